// Package crc32x computes the IEEE CRC-32 of hash/crc32 (RocketMQ's body
// CRC) faster on amd64 CPUs that have VPCLMULQDQ, where hash/crc32 folds
// 16 bytes per PCLMULQDQ (always without AVX-512 VPCLMULQDQ, such as on
// AMD Zen 3; below 1024 bytes with it): here each VPCLMULQDQ folds two
// 16-byte lanes of a YMM register, with the same constants. Elsewhere it
// is hash/crc32.
package crc32x

import "hash/crc32"

// minFold is the shortest input folded with YMM registers: below it the
// setup costs more than hash/crc32's loop.
const minFold = 128

// ChecksumIEEE is crc32.ChecksumIEEE(p).
func ChecksumIEEE(p []byte) uint32 { return Update(0, p) }

// Update is crc32.Update(crc, crc32.IEEETable, p).
func Update(crc uint32, p []byte) uint32 {
	if haveFold && len(p) >= minFold && len(p) < foldMax {
		n := len(p) &^ 15
		crc = ^foldAVX2(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, crc32.IEEETable, p)
}
