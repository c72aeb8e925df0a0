package crc32x

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestUpdateMatchesStdlib compares Update with hash/crc32 for every
// length up to 2 KiB and random longer ones, at every alignment of the
// first 64 bytes, from random initial CRCs.
func TestUpdateMatchesStdlib(t *testing.T) {
	t.Logf("YMM folding available: %v", haveFold)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+200)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	check := func(crc uint32, p []byte) {
		t.Helper()
		if got, want := Update(crc, p), crc32.Update(crc, crc32.IEEETable, p); got != want {
			t.Fatalf("Update(%#x, %d bytes at %p): %#x, want %#x", crc, len(p), &p, got, want)
		}
	}
	for n := 0; n <= 2048; n++ {
		off := n % 64
		check(r.Uint32(), buf[off:off+n])
	}
	for range 300 {
		off, n := r.IntN(64), r.IntN(1<<20)
		check(r.Uint32(), buf[off:off+n])
	}
	check(0, buf[:1<<20])
	if got, want := ChecksumIEEE(buf[:4096]), crc32.ChecksumIEEE(buf[:4096]); got != want {
		t.Fatalf("ChecksumIEEE %#x, want %#x", got, want)
	}
	// All zeros and all ones: no lane may be lost.
	for _, b := range []byte{0, 0xFF} {
		p := make([]byte, 4096+17)
		for i := range p {
			p[i] = b
		}
		check(0, p)
		check(0xFFFFFFFF, p)
	}
}

// TestFoldDetectsEveryByte flips each byte of a 1 KiB input in turn: the
// CRC must change (a lane dropped by the fold would not).
func TestFoldDetectsEveryByte(t *testing.T) {
	p := make([]byte, 1024)
	base := ChecksumIEEE(p)
	for i := range p {
		p[i] ^= 0x5A
		if ChecksumIEEE(p) == base {
			t.Fatalf("flipping byte %d left the CRC unchanged", i)
		}
		p[i] ^= 0x5A
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 300))
	f.Add(uint32(0xDEADBEEF), []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, crc uint32, p []byte) {
		if got, want := Update(crc, p), crc32.Update(crc, crc32.IEEETable, p); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, want %#x", crc, len(p), got, want)
		}
	})
}

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{64, 100, 127, 128, 150, 200, 256, 512, 4 << 10, 64 << 10} {
		p := make([]byte, n)
		b.Run("crc32x/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				ChecksumIEEE(p)
			}
		})
		if haveFold && n >= 64 {
			b.Run("fold/"+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					foldAVX2(0, p)
				}
			})
		}
		b.Run("stdlib/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.ChecksumIEEE(p)
			}
		})
	}
}

// TestFoldWholeRange runs the YMM fold itself on lengths Update leaves to
// hash/crc32 on this CPU (below minFold, from foldMax on), with and without
// a partial last block, so the fold stays tested on every host that has
// it.
func TestFoldWholeRange(t *testing.T) {
	if !haveFold {
		t.Skip("no YMM folding on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 256<<10)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for _, n := range []int{64, 65, 79, minFold, 129, 143, 1008, 1023, 1024, 1031, 1040, 4095, 4096, 65536 + 7, 256 << 10} {
		crc := r.Uint32()
		if got, want := ^foldAVX2(^crc, buf[:n]), crc32.Update(crc, crc32.IEEETable, buf[:n]); got != want {
			t.Fatalf("fold of %d bytes: %#x, want %#x", n, got, want)
		}
	}
}

// BenchmarkMix: 1024 inputs of 100-1500 bytes (the generated stores'
// bodies), crc32x against hash/crc32.
func BenchmarkMix(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 1500)
	sizes := make([]int, 1024)
	total := 0
	for i := range sizes {
		sizes[i] = 100 + r.IntN(1400)
		total += sizes[i]
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) uint32
	}{{"crc32x", ChecksumIEEE}, {"stdlib", crc32.ChecksumIEEE}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, n := range sizes {
					c.fn(buf[:n])
				}
			}
		})
	}
}
