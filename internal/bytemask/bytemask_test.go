package bytemask

import (
	"math/rand"
	"testing"
)

func naive(b []byte, c byte) uint64 {
	var m uint64
	for i := 0; i < len(b) && i < 64; i++ {
		if b[i] == c {
			m |= 1 << i
		}
	}
	return m
}

// TestEq: Eq64 (AVX2 where the CPU has it), its generic form and Eq on
// every length to 70 against a byte loop, on random blocks dense in the
// byte looked for and its neighbours (the generic form's borrows).
func TestEq(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var b [80]byte
	for range 2000 {
		c := byte(rng.Intn(256))
		for i := range b {
			switch rng.Intn(4) {
			case 0:
				b[i] = c
			case 1:
				b[i] = c + 1
			case 2:
				b[i] = c - 1
			default:
				b[i] = byte(rng.Intn(256))
			}
		}
		blk := (*[64]byte)(b[:64])
		want := naive(b[:64], c)
		if got := Eq64(blk, c); got != want {
			t.Fatalf("Eq64(%x, %#x) = %x, want %x", b[:64], c, got, want)
		}
		if got := eq64Generic(blk, c); got != want {
			t.Fatalf("eq64Generic(%x, %#x) = %x, want %x", b[:64], c, got, want)
		}
		for n := 0; n <= 70; n++ {
			if got, want := Eq(b[:n], c), naive(b[:n], c); got != want {
				t.Fatalf("Eq(%x, %#x) = %x, want %x", b[:n], c, got, want)
			}
		}
	}
}

func FuzzEq(f *testing.F) {
	f.Add([]byte("REAL_TOPIC\x01TopicA\x02REAL_QID\x010\x02"), byte(2))
	f.Fuzz(func(t *testing.T, b []byte, c byte) {
		if got, want := Eq(b, c), naive(b, c); got != want {
			t.Fatalf("Eq(%x, %#x) = %x, want %x", b, c, got, want)
		}
		if len(b) >= 64 {
			if got, want := eq64Generic((*[64]byte)(b[:64]), c), naive(b, c); got != want {
				t.Fatalf("eq64Generic(%x, %#x) = %x, want %x", b[:64], c, got, want)
			}
		}
	})
}

func BenchmarkEq64(b *testing.B) {
	var blk [64]byte
	for i := range blk {
		blk[i] = byte(i)
	}
	var s uint64
	for range b.N {
		s += Eq64(&blk, 2)
	}
	_ = s
}
