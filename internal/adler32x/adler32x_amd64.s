#include "textflag.h"

// The weights of a 32-byte step's bytes in s2: byte i adds (32-i) times
// its value (a signed byte operand of VPMADDUBSW).
DATA taps<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA taps<>+8(SB)/8, $0x1112131415161718
DATA taps<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA taps<>+24(SB)/8, $0x0102030405060708
GLOBL taps<>(SB), RODATA, $32

// Sixteen 16-bit ones: VPMADDWD by them adds pairs of words into dwords.
DATA ones<>+0(SB)/8, $0x0001000100010001
DATA ones<>+8(SB)/8, $0x0001000100010001
DATA ones<>+16(SB)/8, $0x0001000100010001
DATA ones<>+24(SB)/8, $0x0001000100010001
GLOBL ones<>(SB), RODATA, $32

// func accumAVX2(s1, s2 uint32, p []byte) (uint32, uint32)
//
// For n = len(p)/32 steps of 32 bytes: s2 gains 32*s1 (s1 before the
// step) plus the bytes times their weights 32..1, s1 gains the bytes'
// sum. Y3 holds the bytes' sums so far (VPSADBW: four 64-bit lanes), Y1
// the sum over the steps of Y3 before each step, started at s1*n in lane
// 0 (the s1 of the call, counted once per step), Y2 the weighted sums in
// eight 32-bit lanes, started at s2. At the end s1 += sum(Y3) and
// s2 = sum(Y2) + 32*sum(Y1). No lane passes 2^32: each is at most the
// total, which nmax32 bounds.
TEXT ·accumAVX2(SB), NOSPLIT, $0-40
	MOVL    s1+0(FP), AX
	MOVL    s2+4(FP), BX
	MOVQ    p_base+8(FP), SI
	MOVQ    p_len+16(FP), CX
	SHRQ    $5, CX
	MOVL    AX, DX
	IMULL   CX, DX
	VPXOR   Y0, Y0, Y0
	VMOVD   DX, X1
	VMOVD   BX, X2
	VPXOR   Y3, Y3, Y3
	VMOVDQU taps<>(SB), Y4
	VMOVDQU ones<>(SB), Y5

loop:
	VMOVDQU    (SI), Y6
	VPADDD     Y3, Y1, Y1
	VPSADBW    Y0, Y6, Y7
	VPADDD     Y7, Y3, Y3
	VPMADDUBSW Y4, Y6, Y8
	VPMADDWD   Y5, Y8, Y8
	VPADDD     Y8, Y2, Y2
	ADDQ       $32, SI
	DECQ       CX
	JNZ        loop

	VPSLLD       $5, Y1, Y1
	VPADDD       Y1, Y2, Y2

	// s1 += the eight dwords of Y3
	VEXTRACTI128 $1, Y3, X7
	VPADDD       X7, X3, X3
	VPSHUFD      $0x4e, X3, X7
	VPADDD       X7, X3, X3
	VPSHUFD      $0xb1, X3, X7
	VPADDD       X7, X3, X3
	VMOVD        X3, DX
	ADDL         DX, AX

	// s2 = the eight dwords of Y2
	VEXTRACTI128 $1, Y2, X7
	VPADDD       X7, X2, X2
	VPSHUFD      $0x4e, X2, X7
	VPADDD       X7, X2, X2
	VPSHUFD      $0xb1, X2, X7
	VPADDD       X7, X2, X2
	VMOVD        X2, BX

	VZEROUPPER
	MOVL AX, ret+32(FP)
	MOVL BX, ret1+36(FP)
	RET
