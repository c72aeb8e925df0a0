package crc32x

import "golang.org/x/sys/cpu"

//go:noescape
func foldAVX2(state uint32, p []byte) uint32

func cpuid7ecx() uint32

// haveFold: VPCLMULQDQ on YMM registers (CPUID.7.0:ECX bit 10) with AVX2
// (which also says the OS saves the YMM state), and PCLMULQDQ; but not
// AVX-512 with VPCLMULQDQ, where hash/crc32 has its own wider fold.
var haveFold = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && !cpu.X86.HasAVX512VPCLMULQDQ &&
	cpuid7ecx()&(1<<10) != 0
