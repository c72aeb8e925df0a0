// Package bytemask finds every occurrence of one byte in a 64-byte block
// at once, as a bit mask: a walk over short separated fields (RocketMQ
// property strings: key 0x01 value 0x02 ...) then takes its fields from
// the mask's bits instead of a bytes.IndexByte call per field, whose
// call and vector setup cost more than the search on fields of 10-40
// bytes.
package bytemask

import (
	"encoding/binary"
	"unsafe"
)

// Eq64 has bit i set when b[i] == c.
func Eq64(b *[64]byte, c byte) uint64 {
	if haveAVX2 {
		return eq64AVX2(&b[0], c)
	}
	return eq64Generic(b, c)
}

// pageSize is the smallest page a mapping has (4 KiB on every
// architecture Go supports): a read that stays in one page of a valid
// byte cannot fault.
const pageSize = 4096

// Eq has bit i set when b[i] == c, for the first min(len(b), 64) bytes.
// A shorter b is compared in place when the 64 bytes from its first stay
// in that byte's page (the bytes past b are read and their bits
// dropped), else from a copy.
func Eq(b []byte, c byte) uint64 {
	if len(b) >= 64 {
		return Eq64((*[64]byte)(b[:64]), c)
	}
	if len(b) == 0 {
		return 0
	}
	p := unsafe.SliceData(b)
	if haveAVX2 && uintptr(unsafe.Pointer(p))%pageSize <= pageSize-64 {
		return eq64AVX2(p, c) & (1<<len(b) - 1)
	}
	var tail [64]byte
	copy(tail[:], b)
	return Eq64(&tail, c) & (1<<len(b) - 1)
}

// eq64Generic is Eq64 eight bytes at a time in a register.
func eq64Generic(b *[64]byte, c byte) uint64 {
	le := binary.LittleEndian
	var m uint64
	for w := 0; w < 8; w++ {
		m |= eq8(le.Uint64(b[8*w:]), c) << (8 * w)
	}
	return m
}

// eq8 has bit j set when byte j of w is c.
func eq8(w uint64, c byte) uint64 {
	const lo, hi7 = 0x0101010101010101, 0x7f7f7f7f7f7f7f7f
	const gather = 0x0102040810204080 // bit 8j of t -> bit 56+j of t*gather
	x := w ^ (uint64(c) * lo)
	t := ^((x&hi7 + hi7) | x | hi7) >> 7 // 1 in exactly the zero bytes of x (no borrows between bytes)
	return t * gather >> 56
}
