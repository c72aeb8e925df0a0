package ra

import (
	"fmt"
	"math/rand"
	"testing"
)

// memSpiller is a MsgSpiller over a map, counting what it holds.
type memSpiller struct {
	chunks      map[int64][]FifoMsg
	next        int64
	spills, lds int
}

func (s *memSpiller) Spill(msgs []FifoMsg) (int64, bool) {
	if s.chunks == nil {
		s.chunks = map[int64][]FifoMsg{}
	}
	s.next++
	s.chunks[s.next] = append([]FifoMsg(nil), msgs...)
	s.spills++
	return s.next, true
}

func (s *memSpiller) Load(dst []FifoMsg, at int64) error {
	c, ok := s.chunks[at]
	if !ok || len(c) != len(dst) {
		return fmt.Errorf("no chunk of %d at %d", len(dst), at)
	}
	copy(dst, c)
	s.lds++
	return nil
}

// TestMsgQueue runs random pushes, pops, resets and walks against a plain
// slice, with chunks of 1-5 messages, with and without a Spiller, and
// checks that the Spiller kept at most two chunks in memory.
func TestMsgQueue(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, chunk := range []int{1, 2, 3, 5} {
		for _, spill := range []bool{false, true} {
			var sp *memSpiller
			q := MsgQueue{Chunk: chunk}
			if spill {
				sp = &memSpiller{}
				q.Spiller = sp
			}
			var model []FifoMsg
			next := int64(0)
			for op := 0; op < 20000; op++ {
				switch r := rng.Intn(100); {
				case r < 55:
					next++
					m := FifoMsg{Index: next, Header: FifoHeader{Size: next * 3, Expiry: -1}}
					q.PushBack(m)
					model = append(model, m)
				case r < 97:
					m, ok := q.PopFront()
					if ok != (len(model) > 0) {
						t.Fatalf("chunk %d spill %v op %d: PopFront ok %v with %d in the model", chunk, spill, op, ok, len(model))
					}
					if ok {
						if m != model[0] {
							t.Fatalf("chunk %d spill %v op %d: PopFront %+v, want %+v", chunk, spill, op, m, model[0])
						}
						model = model[1:]
					}
				case r < 98:
					q.Reset()
					model = nil
				default:
					i := 0
					for m := range q.All() {
						if i >= len(model) || m != model[i] {
							t.Fatalf("chunk %d spill %v op %d: All[%d] = %+v", chunk, spill, op, i, m)
						}
						i++
					}
					if i != len(model) {
						t.Fatalf("chunk %d spill %v op %d: All yielded %d, want %d", chunk, spill, op, i, len(model))
					}
				}
				if q.Len() != len(model) {
					t.Fatalf("chunk %d spill %v op %d: Len %d, want %d", chunk, spill, op, q.Len(), len(model))
				}
				if f, ok := q.Front(); ok != (len(model) > 0) || ok && f != model[0] {
					t.Fatalf("chunk %d spill %v op %d: Front %+v %v", chunk, spill, op, f, ok)
				}
				if spill {
					inMem := 0
					for _, c := range q.chunks {
						if !c.spilled {
							inMem++
						}
					}
					if inMem > 2 {
						t.Fatalf("chunk %d op %d: %d chunks in memory, want at most 2", chunk, op, inMem)
					}
				}
			}
			if spill && (sp.spills == 0 || sp.lds == 0) {
				t.Fatalf("chunk %d: the Spiller took %d chunks and gave back %d", chunk, sp.spills, sp.lds)
			}
		}
	}
}
