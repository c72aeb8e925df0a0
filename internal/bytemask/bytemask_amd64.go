package bytemask

import "golang.org/x/sys/cpu"

// haveAVX2: VPCMPEQB and VPMOVMSKB on YMM registers (the flag also says
// the OS saves the YMM state).
var haveAVX2 = cpu.X86.HasAVX2

// eq64AVX2 is Eq64 of the 64 bytes from p, in two 32-byte compares.
//
//go:noescape
func eq64AVX2(p *byte, c byte) uint64
