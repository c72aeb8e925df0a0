package adler32x

import (
	"encoding"
	"encoding/binary"
	"hash/adler32"
	"math/rand"
	"testing"
)

// stdlibUpdate is hash/adler32 continued from state adler (through its
// marshalled digest: "adl\x01" and the state).
func stdlibUpdate(t testing.TB, adler uint32, p []byte) uint32 {
	t.Helper()
	h := adler32.New()
	st := binary.BigEndian.AppendUint32([]byte("adl\x01"), adler)
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(st); err != nil {
		t.Fatal(err)
	}
	h.Write(p)
	return h.(interface{ Sum32() uint32 }).Sum32()
}

// TestAgainstStdlib checks Checksum and Update (split anywhere) against
// hash/adler32 on random and all-0xff inputs of every length to 300 and
// a few large ones (past the 1 MiB reduction block).
func TestAgainstStdlib(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(b []byte) {
		t.Helper()
		want := adler32.Checksum(b)
		if got := Checksum(b); got != want {
			t.Fatalf("len %d: %08x, want %08x", len(b), got, want)
		}
		if len(b) > 0 {
			k := rng.Intn(len(b))
			if got := Update(Checksum(b[:k]), b[k:]); got != want {
				t.Fatalf("len %d split at %d: %08x, want %08x", len(b), k, got, want)
			}
		}
		if got := updateGeneric(1, b); got != want {
			t.Fatalf("len %d, portable loop: %08x, want %08x", len(b), got, want)
		}
	}
	var lens []int
	for n := 0; n <= 300; n++ {
		lens = append(lens, n)
	}
	// around the AVX2 path's reductions (every nmax32 bytes) and the
	// portable loop's (every 1 MiB)
	for _, n := range []int{nmax32 - 1, nmax32, nmax32 + 1, nmax32 + 31, nmax32 + 32, 2*nmax32 + 33, 5552, 5553, 100000} {
		lens = append(lens, n)
	}
	for _, n := range append(lens, 1<<20, 1<<20+7, 3<<20+13) {
		b := make([]byte, n)
		rng.Read(b)
		check(b)
		for i := range b {
			b[i] = 0xff
		}
		check(b)
	}
}

// TestFromAnyState continues from the largest states (s1 and s2 of
// 65520, and the unreduced 0xffff that the bounds allow) over all-0xff
// bytes, the worst case for the unreduced sums, against hash/adler32
// continued from the same state.
func TestFromAnyState(t *testing.T) {
	b := make([]byte, 3*nmax32+45)
	for i := range b {
		b[i] = 0xff
	}
	for _, st := range []uint32{65520<<16 | 65520, 0xffffffff, 0, 1, 65520 << 16, 65520} {
		for _, n := range []int{0, 31, 32, 33, 1000, nmax32, nmax32 + 32, len(b)} {
			want := stdlibUpdate(t, st, b[:n])
			if got := Update(st, b[:n]); got != want {
				t.Fatalf("state %08x, %d bytes: %08x, want %08x", st, n, got, want)
			}
			if got := updateGeneric(st, b[:n]); got != want {
				t.Fatalf("state %08x, %d bytes, portable loop: %08x, want %08x", st, n, got, want)
			}
		}
	}
}

func FuzzAdler32(f *testing.F) {
	f.Add([]byte("Wikipedia"), uint16(3))
	f.Fuzz(func(t *testing.T, b []byte, split uint16) {
		want := adler32.Checksum(b)
		if got := Checksum(b); got != want {
			t.Fatalf("%08x, want %08x", got, want)
		}
		k := int(split) % (len(b) + 1)
		if got := Update(Checksum(b[:k]), b[k:]); got != want {
			t.Fatalf("split %d: %08x, want %08x", k, got, want)
		}
		if got := updateGeneric(1, b); got != want {
			t.Fatalf("portable loop: %08x, want %08x", got, want)
		}
		// from an arbitrary state, as hash/adler32 continues it
		st := uint32(split)<<16 | uint32(len(b))&0xffff
		if got, want := Update(st, b), stdlibUpdate(t, st, b); got != want {
			t.Fatalf("from %08x: %08x, want %08x", st, got, want)
		}
	})
}

func benchSizes(b *testing.B, f func([]byte) uint32) {
	buf := make([]byte, 1500)
	rand.New(rand.NewSource(1)).Read(buf)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		f(buf)
	}
}

func BenchmarkAdler32x(b *testing.B) { benchSizes(b, Checksum) }
func BenchmarkGeneric(b *testing.B) {
	benchSizes(b, func(p []byte) uint32 { return updateGeneric(1, p) })
}
func BenchmarkStdlib(b *testing.B) { benchSizes(b, adler32.Checksum) }
