package adler32x

import (
	"hash/adler32"
	"math/rand"
	"testing"
)

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
	}
	var lens []int
	for n := 0; n <= 300; n++ {
		lens = append(lens, n)
	}
	for _, n := range append(lens, 5552, 5553, 1<<20, 1<<20+7, 3<<20+13) {
		b := make([]byte, n)
		rng.Read(b)
		check(b)
		for i := range b {
			b[i] = 0xff
		}
		check(b)
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
func BenchmarkStdlib(b *testing.B)   { benchSizes(b, adler32.Checksum) }
