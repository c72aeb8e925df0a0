#include "textflag.h"

// func prefetch(p *byte, n int)
//
// PREFETCHT0 of every 64-byte line that [p, p+n) touches; n > 0. A
// prefetch never faults, not even past a mapping's end.
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	LEAQ (AX)(CX*1), CX
	ANDQ $-64, AX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JB   loop
	RET
