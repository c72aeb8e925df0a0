package adler32x

import "golang.org/x/sys/cpu"

// haveAVX2: AVX2 (VPSADBW, VPMADDUBSW and VPMADDWD on YMM registers); the
// flag also says the OS saves the YMM state.
var haveAVX2 = cpu.X86.HasAVX2

// accumAVX2 returns s1 and s2 after p, not reduced modulo 65521. len(p)
// is a positive multiple of 32 and at most nmax32; s1 and s2 are below
// 2^16.
//
//go:noescape
func accumAVX2(s1, s2 uint32, p []byte) (uint32, uint32)
