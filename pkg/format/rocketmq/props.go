package rocketmq

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Property separators (MessageDecoder.NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR).
const (
	NameValueSeparator = 0x01
	PropertySeparator  = 0x02
)

// Property keys the tool uses (MessageConst).
const (
	PropTags      = "TAGS"
	PropKeys      = "KEYS"
	PropUniqKey   = "UNIQ_KEY"
	PropDelay     = "DELAY"
	PropRealTopic = "REAL_TOPIC"
	PropRealQID   = "REAL_QID"
	PropInnerNum  = "INNER_NUM"
	PropInnerBase = "INNER_BASE"
	PropCRC32     = "__CRC32#"
	// PropInnerMultiDispatch lists the LMQ queues a record is also
	// dispatched to when the broker runs with enableMultiDispatch.
	PropInnerMultiDispatch = "INNER_MULTI_DISPATCH"
)

// LMQPrefix is MixAll.LMQ_PREFIX: the topic prefix of light message queues.
const LMQPrefix = "%LMQ%"

// DispatchProps are the properties dispatch reads from a record (tags
// code, multi-dispatch, index keys), in the order of the Dispatch*
// indices, for one LookupProperties walk per record.
var DispatchProps = [...]string{PropTags, PropInnerMultiDispatch, PropUniqKey, PropKeys}

// Indices into DispatchProps.
const (
	DispatchTags = iota
	DispatchMulti
	DispatchUniq
	DispatchKeys
)

// ForEachIndexKey calls fn, in order, with every key
// IndexService.buildIndex puts in the index for m (fn gets the bare key;
// the index hashes topic + "#" + key): none for a ROLLBACK transaction
// message; else UNIQ_KEY when present, then each non-empty token of KEYS
// split on ' ' (MessageConst.KEY_SEPARATOR). vals and found are m's
// DispatchProps as LookupProperties returned them. It does not allocate;
// k aliases m's properties.
func ForEachIndexKey(m *Message, vals [][]byte, found []bool, fn func(k []byte)) {
	if m.TransactionType() == TxRollback {
		return
	}
	if found[DispatchUniq] {
		fn(vals[DispatchUniq])
	}
	if !found[DispatchKeys] {
		return
	}
	for ks := vals[DispatchKeys]; len(ks) > 0; {
		k := ks
		if i := bytes.IndexByte(ks, ' '); i >= 0 {
			k, ks = ks[:i], ks[i+1:]
		} else {
			ks = nil
		}
		if len(k) > 0 {
			fn(k)
		}
	}
}

// forEachProperty calls fn for every segment string2messageProperties
// keeps: split on 0x02; keep a segment only when its first 0x01 leaves a
// non-empty key and a non-empty value. fn returning false stops the walk.
func forEachProperty(raw []byte, fn func(k, v []byte) bool) {
	for len(raw) > 0 {
		seg := raw
		if i := bytes.IndexByte(raw, PropertySeparator); i >= 0 {
			seg, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		j := bytes.IndexByte(seg, NameValueSeparator)
		if j <= 0 || j >= len(seg)-1 {
			continue
		}
		if !fn(seg[:j], seg[j+1:]) {
			return
		}
	}
}

// ParseProperties parses raw properties exactly as Java's
// MessageDecoder.string2messageProperties: segments with an empty key or
// value are dropped and a duplicate key keeps its last value.
func ParseProperties(raw []byte) map[string]string {
	out := map[string]string{}
	forEachProperty(raw, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	})
	return out
}

// LookupProperty returns the value ParseProperties would give key,
// without allocating.
func LookupProperty(raw []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	forEachProperty(raw, func(k, v []byte) bool {
		if string(k) == key {
			val, found = v, true
		}
		return true
	})
	return val, found
}

// Property returns the value of key in m's properties.
func (m *Message) Property(key string) ([]byte, bool) { return LookupProperty(m.Properties, key) }

// Tags returns the TAGS property ("" when absent).
func (m *Message) Tags() string { v, _ := m.Property(PropTags); return string(v) }

// Keys returns the KEYS property: keys separated by single spaces.
func (m *Message) Keys() string { v, _ := m.Property(PropKeys); return string(v) }

// UniqKey returns the UNIQ_KEY property (the client message id).
func (m *Message) UniqKey() string { v, _ := m.Property(PropUniqKey); return string(v) }

// InnerNum is the number of queue offsets the record advances: the
// INNER_NUM property for an inner batch, else 1.
func (m *Message) InnerNum() int64 {
	if !m.InnerBatch() {
		return 1
	}
	v, ok := m.Property(PropInnerNum)
	if !ok {
		return 1
	}
	n, ok := parseJavaInt(v)
	if !ok || n <= 0 {
		return 1
	}
	return n
}

// parseJavaInt parses an optionally signed decimal int32 like
// Integer.parseInt.
func parseJavaInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n > 1<<31-1 || n < -(1<<31) {
		return 0, false
	}
	return n, true
}

// LookupProperties finds every key of keys in one walk of raw: vals[i]
// and found[i] are what LookupProperty(raw, keys[i]) would return (the
// last value wins). vals and found must be as long as keys. It does not
// allocate.
func LookupProperties(raw []byte, keys []string, vals [][]byte, found []bool) {
	clear(found)
	// forEachProperty's walk, inlined (a closure call per property was
	// most of a lookup's cost on a timer scan's 1 M records per GiB), and
	// without looking for the 0x01 of the segments no key wants: a segment
	// is key's when it starts with key and 0x01 and key holds no 0x01
	// (then that 0x01 is the segment's first).
	for len(raw) > 0 {
		seg := raw
		if i := indexPropSep(raw); i >= 0 {
			seg, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(seg) < 3 { // a key, 0x01 and a value at the least
			continue
		}
		for i, key := range keys {
			n := len(key)
			if n == 0 || n >= len(seg)-1 || seg[0] != key[0] || seg[n] != NameValueSeparator || string(seg[:n]) != key {
				continue
			}
			if bytes.IndexByte(seg[:n], NameValueSeparator) >= 0 {
				continue // key itself holds 0x01: no segment's key is it
			}
			vals[i], found[i] = seg[n+1:], true
		}
	}
}

// indexPropSep is bytes.IndexByte(b, PropertySeparator) for the short
// segments of a property string: eight bytes at a time in a register,
// without the call and vector setup that cost more than the search on
// segments of 10-40 bytes (LookupProperties runs once per record).
func indexPropSep(b []byte) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:]) ^ (PropertySeparator * lo)
		// The lowest byte flagged is the first zero byte of x: a borrow
		// only flags bytes above a zero one.
		if t := (x - lo) &^ x & hi; t != 0 {
			return i + bits.TrailingZeros64(t)>>3
		}
	}
	for ; i < len(b); i++ {
		if b[i] == PropertySeparator {
			return i
		}
	}
	return -1
}
