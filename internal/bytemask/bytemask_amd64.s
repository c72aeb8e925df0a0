#include "textflag.h"

// func eq64AVX2(p *byte, c byte) uint64
TEXT ·eq64AVX2(SB), NOSPLIT, $0-24
	MOVQ         p+0(FP), SI
	MOVBQZX      c+8(FP), AX
	MOVQ         AX, X0
	VPBROADCASTB X0, Y0
	VPCMPEQB     (SI), Y0, Y1
	VPCMPEQB     32(SI), Y0, Y2
	VPMOVMSKB    Y1, AX
	VPMOVMSKB    Y2, BX
	SHLQ         $32, BX
	ORQ          BX, AX
	VZEROUPPER
	MOVQ         AX, ret+16(FP)
	RET
