package rabbitmq

import (
	"cmp"
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzVerifySpillCodecs: the spilled verify's temp-file records (questions,
// victims, placed answers) decode to what was encoded, from any bytes
// decode to a record that encodes to the same bytes, and
// sortPlacedAnswers orders any answers as a sort by (queue, k) does.
func FuzzVerifySpillCodecs(f *testing.F) {
	f.Add(make([]byte, 64))
	f.Add([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= askCodec.Size {
			a := askCodec.Decode(b)
			if got := askCodec.Append(nil, a); string(got) != string(b[:askCodec.Size]) || askCodec.Decode(got) != a {
				t.Fatalf("question %x: round trip %x", b[:askCodec.Size], got)
			}
		}
		if len(b) >= victimCodec.Size {
			v := victimCodec.Decode(b)
			if got := victimCodec.Append(nil, v); string(got) != string(b[:victimCodec.Size]) || victimCodec.Decode(got) != v {
				t.Fatalf("victim %x: round trip %x", b[:victimCodec.Size], got)
			}
		}
		if len(b) >= placedAnswerCodec.Size {
			p := placedAnswerCodec.Decode(b)
			if got := placedAnswerCodec.Append(nil, p); string(got) != string(b[:placedAnswerCodec.Size]) || placedAnswerCodec.Decode(got) != p {
				t.Fatalf("answer %x: round trip %x", b[:placedAnswerCodec.Size], got)
			}
		}
		// Answers at distinct places from the bytes (4 a place), sorted.
		seen := map[uint64]bool{}
		var ps []placedAnswer
		for i := 0; i+4 <= len(b); i += 4 {
			q, k := uint32(b[i])%5, binary.LittleEndian.Uint32(b[i:])>>3
			if key := uint64(q)<<32 | uint64(k); !seen[key] {
				seen[key] = true
				ps = append(ps, placedAnswer{q: q, k: k, a: entryAnswer{first: int32(i)}})
			}
		}
		want := slices.Clone(ps)
		slices.SortFunc(want, func(a, b placedAnswer) int {
			if c := cmp.Compare(a.q, b.q); c != 0 {
				return c
			}
			return cmp.Compare(a.k, b.k)
		})
		sortPlacedAnswers(ps, nil)
		if !slices.Equal(ps, want) {
			t.Fatalf("sortPlacedAnswers: %v, want %v", ps, want)
		}
	})
}
