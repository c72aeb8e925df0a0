package rabbitmq

import "testing"

// TestReuseList: a slice handed back comes back empty with its capacity;
// at most reuseKeep are kept, none larger than reuseMaxBytes.
func TestReuseList(t *testing.T) {
	var l reuseList[uint64]
	if b := l.get(); b != nil {
		t.Fatalf("empty list gave %d/%d", len(b), cap(b))
	}
	l.put(make([]uint64, 5, 100))
	if b := l.get(); len(b) != 0 || cap(b) != 100 {
		t.Fatalf("got %d/%d, want 0/100", len(b), cap(b))
	}
	l.put(make([]uint64, 0, reuseMaxBytes/8+1))
	if b := l.get(); b != nil {
		t.Fatalf("an oversized slice was kept: cap %d", cap(b))
	}
	for range reuseKeep + 2 {
		l.put(make([]uint64, 1))
	}
	n := 0
	for l.get() != nil {
		n++
	}
	if n != reuseKeep {
		t.Fatalf("kept %d, want %d", n, reuseKeep)
	}
}
