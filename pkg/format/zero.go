package format

import "encoding/binary"

// LastNonZero returns the index of the last non-zero byte of b, or -1.
// It tests 32 bytes per step: the zero tails of preallocated store files
// run to megabytes.
func LastNonZero(b []byte) int {
	i := len(b)
	for i >= 32 {
		q := b[i-32 : i]
		if binary.LittleEndian.Uint64(q)|binary.LittleEndian.Uint64(q[8:])|
			binary.LittleEndian.Uint64(q[16:])|binary.LittleEndian.Uint64(q[24:]) != 0 {
			break
		}
		i -= 32
	}
	for i > 0 {
		i--
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// FirstNonZero returns the index of the first non-zero byte of b, or -1.
// It tests 32 bytes per step, like LastNonZero.
func FirstNonZero(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		q := b[i : i+32]
		if binary.LittleEndian.Uint64(q)|binary.LittleEndian.Uint64(q[8:])|
			binary.LittleEndian.Uint64(q[16:])|binary.LittleEndian.Uint64(q[24:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// AllZero reports whether every byte of b is zero.
func AllZero(b []byte) bool { return LastNonZero(b) < 0 }
