package scan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func testID(i int) [16]byte {
	var id [16]byte
	for j := range id {
		id[j] = byte(i*17 + j*29 + i>>8)
	}
	return id
}

// TestMsgIDsJSON: a list of ids encodes exactly as the list of their hex
// strings does, and inside a queue an empty list is omitted.
func TestMsgIDsJSON(t *testing.T) {
	var all [][16]byte
	for i := range 5 {
		all = append(all, testID(i))
	}
	for _, c := range []MsgIDs{NewMsgIDs(all...), NewMsgIDs(all[0]), {}} {
		got, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		strs := c.Strings()
		if strs == nil {
			strs = []string{}
		}
		if want, _ := json.Marshal(strs); string(got) != string(want) {
			t.Errorf("got %s, want %s", got, want)
		}
		b, _ := json.Marshal(Queue{DropMsgIDs: c, AtRiskMsgIDs: map[string]MsgIDs{"3.10.0-3.13.0": c}})
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		_, has := m["drop_msg_ids"]
		if has != (c.Len() > 0) {
			t.Errorf("%d ids: drop_msg_ids present %v", c.Len(), has)
		}
		if c.Len() > 0 {
			var back []string
			for _, x := range m["drop_msg_ids"].([]any) {
				back = append(back, x.(string))
			}
			if !reflect.DeepEqual(back, c.Strings()) {
				t.Errorf("queue drop_msg_ids %v, want %v", back, c.Strings())
			}
		}
	}
}

// TestMsgIDsSpool: lists built through a spool (chunks of 3 ids, several
// lists interleaved in one file) hold the same ids in the same order and
// encode the same JSON as in-memory lists, at every length around a chunk
// boundary; only full chunks are spilled.
func TestMsgIDsSpool(t *testing.T) {
	sp := NewIDSpool(3)
	lens := []int{0, 1, 2, 3, 4, 6, 7, 20}
	spooled := make([]MsgIDs, len(lens))
	mem := make([]MsgIDs, len(lens))
	for i := range 20 {
		for k, n := range lens {
			if i < n {
				id := testID(k*100 + i)
				spooled[k].AppendTo(sp, id)
				mem[k].Append(id)
			}
		}
	}
	for k, n := range lens {
		s, m := spooled[k], mem[k]
		if s.Len() != n || m.Len() != n {
			t.Errorf("len %d: Len spooled %d, memory %d", n, s.Len(), m.Len())
		}
		if s.Spilled() != (n >= 3) || m.Spilled() {
			t.Errorf("len %d: spilled %v (memory list %v)", n, s.Spilled(), m.Spilled())
		}
		if len(s.ids) >= 3 {
			t.Errorf("len %d: %d ids left in memory, a chunk is 3", n, len(s.ids))
		}
		a, errA := json.Marshal(s)
		b, errB := json.Marshal(m)
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("len %d: spooled %s (%v), memory %s (%v)", n, a, errA, b, errB)
		}
		if !reflect.DeepEqual(s.Strings(), m.Strings()) {
			t.Errorf("len %d: Strings differ", n)
		}
	}
	if sp.file.end != int64(16*3*(1+1+2+2+6)) {
		t.Errorf("spool holds %d bytes", sp.file.end)
	}
}

// TestMsgIDsSpoolFailures: a spool that cannot make its file keeps lists
// in memory; a spilled chunk that cannot be read back is an error from
// the encoder, not wrong ids.
func TestMsgIDsSpoolFailures(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", "/nonexistent/storectl-test")
	var l MsgIDs
	sp := NewIDSpool(2)
	for i := range 5 {
		l.AppendTo(sp, testID(i))
	}
	if l.Spilled() || l.Len() != 5 {
		t.Fatalf("no temp dir: spilled %v, Len %d", l.Spilled(), l.Len())
	}
	// Once the spool has failed, appends no longer try (each try copied
	// the whole in-memory list: quadratic in a long list).
	for i := 5; i < 20000; i++ {
		l.AppendTo(sp, testID(i))
	}
	if sp.file.tries != 1 || l.Len() != 20000 || l.Spilled() {
		t.Fatalf("failed spool: %d write tries for 20000 ids, Len %d", sp.file.tries, l.Len())
	}
	t.Setenv("TMPDIR", tmp)
	sp = NewIDSpool(2)
	var s MsgIDs
	for i := range 5 {
		s.AppendTo(sp, testID(i))
	}
	if !s.Spilled() {
		t.Fatal("nothing spilled")
	}
	sp.file.f.Truncate(16) // the second chunk is gone
	if _, err := json.Marshal(s); err == nil || !strings.Contains(err.Error(), "reading msg ids back") {
		t.Fatalf("truncated spool: %v", err)
	}
	sp.file.f.Close()
	if err := s.Each(func([16]byte) {}); err == nil {
		t.Fatal("closed spool: no error")
	}
}

// maxWriter records the largest single write it was given.
type maxWriter struct {
	b   []byte
	max int
}

func (w *maxWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	w.max = max(w.max, len(p))
	return len(p), nil
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, errFail }

var errFail = &json.UnsupportedValueError{Str: "write failed"}

// TestMsgIDsWriteJSON: WriteJSON writes exactly what MarshalJSON returns,
// for in-memory and spilled lists around its 32 KiB flush point (936 ids
// of 35 bytes), in writes of at most 32 KiB plus one id whatever the
// list's length; a failed write or read-back is its error.
func TestMsgIDsWriteJSON(t *testing.T) {
	sp := NewIDSpool(100)
	for _, n := range []int{0, 1, 935, 936, 937, 5000} {
		var mem, spilled MsgIDs
		for i := range n {
			mem.Append(testID(i))
			spilled.AppendTo(sp, testID(i))
		}
		if n >= 100 && !spilled.Spilled() {
			t.Fatalf("%d ids: nothing spilled", n)
		}
		for _, l := range []MsgIDs{mem, spilled} {
			want, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var w maxWriter
			if err := l.WriteJSON(&w); err != nil {
				t.Fatal(err)
			}
			if string(w.b) != string(want) {
				t.Fatalf("%d ids (spilled %v): WriteJSON gave %d bytes, MarshalJSON %d", n, l.Spilled(), len(w.b), len(want))
			}
			if w.max > 32<<10+40 {
				t.Errorf("%d ids: a write of %d bytes", n, w.max)
			}
		}
		if err := mem.WriteJSON(failWriter{}); err != errFail {
			t.Errorf("%d ids: failed write gave %v", n, err)
		}
	}
	var s MsgIDs
	sp2 := NewIDSpool(2)
	for i := range 5 {
		s.AppendTo(sp2, testID(i))
	}
	sp2.file.f.Truncate(16)
	if err := s.WriteJSON(&maxWriter{}); err == nil || !strings.Contains(err.Error(), "reading msg ids back") {
		t.Fatalf("truncated spool: %v", err)
	}
}
