package rabbitmq

import (
	"encoding/binary"
	"testing"
)

// FuzzVerifySpillCodecs: the spilled verify's temp-file records (questions,
// victims) decode to what was encoded, from any bytes decode to a record
// that encodes to the same bytes, and an answer packed into a fate
// (packAnswer, as the answers file holds it) comes back the same.
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
		// An answer from the bytes, packed into a fate, through its
		// encoding and back.
		if len(b) >= 11 {
			a := entryAnswer{first: int32(binary.LittleEndian.Uint32(b)), set: int32(binary.LittleEndian.Uint32(b[4:])), risk: b[8], lost: b[9]}
			exc := b[10]&1 != 0
			if got, gotExc := unpackAnswer(decodeFate(appendFate(nil, packAnswer(a, exc)))); got != a || gotExc != exc {
				t.Fatalf("answer %+v exception %v: back as %+v, %v", a, exc, got, gotExc)
			}
		}
	})
}
