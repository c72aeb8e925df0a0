package timer

import "math"

// slotTable is a map from int64 keys (slot times, wheel slot indexes) to
// V: open addressing with linear probing and backward-shift deletion, a
// multiplicative hash, no pointers in the keys. The timer walk looks up
// a unit's slot in two such maps per unit; Go's map cost about 40 ns a
// lookup there. Iteration (each) is in table order.
type slotTable[V any] struct {
	keys []int64 // empty: emptyKey
	vals []V
	n    int
	bits uint // len(keys) is 1 << bits
	// the one key that is emptyKey itself
	hasEmpty bool
	emptyVal V
}

const emptyKey = math.MinInt64

func (t *slotTable[V]) slot(k int64) int {
	return int((uint64(k) * 0x9E3779B97F4A7C15) >> (64 - t.bits))
}

func (t *slotTable[V]) get(k int64) (V, bool) {
	if k == emptyKey {
		return t.emptyVal, t.hasEmpty
	}
	if t.n == 0 {
		var zero V
		return zero, false
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i], true
		case emptyKey:
			var zero V
			return zero, false
		}
	}
}

func (t *slotTable[V]) put(k int64, v V) {
	p, _ := t.ref(k)
	*p = v
}

// ref returns a pointer to k's value, inserting the zero V first when k
// is absent (added): a get and a put in one probe. The pointer is valid
// until the next put, ref or del.
func (t *slotTable[V]) ref(k int64) (v *V, added bool) {
	if k == emptyKey {
		added = !t.hasEmpty
		t.hasEmpty = true
		return &t.emptyVal, added
	}
	if (t.n+1)*4 > len(t.keys)*3 {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return &t.vals[i], false
		case emptyKey:
			var zero V
			t.keys[i], t.vals[i] = k, zero
			t.n++
			return &t.vals[i], true
		}
	}
}

func (t *slotTable[V]) del(k int64) {
	if k == emptyKey {
		var zero V
		t.hasEmpty, t.emptyVal = false, zero
		return
	}
	if t.n == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(k)
	for t.keys[i] != k {
		if t.keys[i] == emptyKey {
			return
		}
		i = (i + 1) & mask
	}
	// Backward shift: move up every later key of the run whose home is
	// not between the hole and it.
	for j := i; ; {
		j = (j + 1) & mask
		if t.keys[j] == emptyKey {
			break
		}
		h := t.slot(t.keys[j])
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	var zero V
	t.keys[i], t.vals[i] = emptyKey, zero
	t.n--
}

func (t *slotTable[V]) grow() {
	old, oldVals := t.keys, t.vals
	t.bits = max(4, t.bits+1)
	size := 1 << t.bits
	t.keys, t.vals, t.n = make([]int64, size), make([]V, size), 0
	for i := range t.keys {
		t.keys[i] = emptyKey
	}
	for i, k := range old {
		if k != emptyKey {
			t.put(k, oldVals[i])
		}
	}
}

func (t *slotTable[V]) len() int {
	if t.hasEmpty {
		return t.n + 1
	}
	return t.n
}

// each calls fn for every key, in table order.
func (t *slotTable[V]) each(fn func(k int64, v V)) {
	if t.hasEmpty {
		fn(emptyKey, t.emptyVal)
	}
	for i, k := range t.keys {
		if k != emptyKey {
			fn(k, t.vals[i])
		}
	}
}
