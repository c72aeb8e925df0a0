#include "textflag.h"

// func int32s(base *int32, size int64, idx *int64, n int)
TEXT ·int32s(SB), NOSPLIT, $0-32
	MOVQ base+0(FP), SI
	MOVQ size+8(FP), DX
	MOVQ idx+16(FP), DI
	MOVQ n+24(FP), CX
loop:
	MOVQ       (DI), AX
	CMPQ       AX, DX
	JAE        next // also a negative index
	PREFETCHT0 (SI)(AX*4)
next:
	ADDQ       $8, DI
	DECQ       CX
	JNZ        loop
	RET
