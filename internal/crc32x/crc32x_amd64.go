package crc32x

import "golang.org/x/sys/cpu"

//go:noescape
func foldAVX2(state uint32, p []byte) uint32

func cpuid7ecx() uint32

// haveFold: VPCLMULQDQ on YMM registers (CPUID.7.0:ECX bit 10) with AVX2
// (which also says the OS saves the YMM state), and PCLMULQDQ.
var haveFold = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpuid7ecx()&(1<<10) != 0

// foldMax is the length from which hash/crc32 is faster: with AVX-512
// VPCLMULQDQ it folds four 16-byte lanes per instruction from 1024 bytes
// on, but below that it folds 16 bytes per PCLMULQDQ, and the two-lane
// fold is 1.3-1.6x faster for 300-1023 bytes (a RocketMQ body's usual
// size) on the AMD EPYC benchmark host.
var foldMax = foldLimit()

func foldLimit() int {
	if cpu.X86.HasAVX512VPCLMULQDQ {
		return 1024
	}
	return int(^uint(0) >> 1)
}
