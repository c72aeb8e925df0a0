#include "textflag.h"

// func cpuid7ecx() uint32
TEXT ·cpuid7ecx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET

// The folding constants of hash/crc32's ieeeCLMUL (from the Linux kernel,
// reflected): r2r1 folds a 128-bit lane 512 bits forward, r4r3 128 bits.
DATA r2r1y<>+0(SB)/8, $0x154442bd4
DATA r2r1y<>+8(SB)/8, $0x1c6e41596
DATA r2r1y<>+16(SB)/8, $0x154442bd4
DATA r2r1y<>+24(SB)/8, $0x1c6e41596
GLOBL r2r1y<>(SB), RODATA, $32

DATA r4r3x<>+0(SB)/8, $0x1751997d0
DATA r4r3x<>+8(SB)/8, $0x0ccaa009e
GLOBL r4r3x<>(SB), RODATA, $16

// Reduction to 32 bits: r5 folds 64 bits, then Barrett reduction by the
// polynomial P' and mu.
DATA r5x<>+0(SB)/8, $0x163cd6124
GLOBL r5x<>(SB), RODATA, $8
DATA pmux<>+0(SB)/8, $0x1db710641
DATA pmux<>+8(SB)/8, $0x1f7011641
GLOBL pmux<>(SB), RODATA, $16

// PSHUFB controls for the partial block: the 16 bytes from offset r
// (1-15) move byte i to i+16-r (0x8n: a zero byte); XORed with topx they
// move byte i+r to i and flag the top r bytes for PBLENDVB.
DATA shufx<>+0(SB)/8, $0x8786858483828100
DATA shufx<>+8(SB)/8, $0x8f8e8d8c8b8a8988
DATA shufx<>+16(SB)/8, $0x0706050403020100
DATA shufx<>+24(SB)/8, $0x000e0d0c0b0a0908
GLOBL shufx<>(SB), RODATA, $32
DATA topx<>+0(SB)/8, $0x8080808080808080
DATA topx<>+8(SB)/8, $0x8080808080808080
GLOBL topx<>(SB), RODATA, $16

// func foldAVX2(state uint32, p []byte) uint32
//
// len(p) is at least 64. state (the raw CRC state,
// that is the inverted CRC) is merged into the first 4 bytes; every 64
// bytes are folded into two YMM accumulators (four 128-bit lanes, as
// hash/crc32's four XMM lanes, two per VPCLMULQDQ); the four lanes are
// folded into one, then each 16 bytes left and the last 1-15 bytes, and
// the 128 bits are reduced to the raw CRC state after p.
TEXT ·foldAVX2(SB), NOSPLIT, $0-36
	MOVL    state+0(FP), AX
	VMOVD   AX, X0 // VEX: zeroes the rest of Y0
	MOVQ    p_base+8(FP), SI
	MOVQ    p_len+16(FP), CX

	VMOVDQU (SI), Y1
	VMOVDQU 32(SI), Y2
	VPXOR   Y0, Y1, Y1
	ADDQ    $64, SI
	SUBQ    $64, CX
	VMOVDQU r2r1y<>+0(SB), Y0
	CMPQ    CX, $64
	JB      fold4

	PCALIGN $16
loop64:
	VMOVDQU    (SI), Y11
	VMOVDQU    32(SI), Y12
	VPCLMULQDQ $0x11, Y0, Y1, Y5
	VPCLMULQDQ $0x00, Y0, Y1, Y1
	VPCLMULQDQ $0x11, Y0, Y2, Y6
	VPCLMULQDQ $0x00, Y0, Y2, Y2
	VPXOR      Y5, Y1, Y1
	VPXOR      Y6, Y2, Y2
	VPXOR      Y11, Y1, Y1
	VPXOR      Y12, Y2, Y2
	ADDQ       $64, SI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JAE        loop64

fold4:
	// Lanes in message order: X1, X7 (upper Y1), X2, X8 (upper Y2).
	VEXTRACTI128 $1, Y1, X7
	VEXTRACTI128 $1, Y2, X8
	VZEROUPPER
	MOVOU        r4r3x<>+0(SB), X0

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X7, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1

	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X8, X1

	// Each 16 bytes left.
	CMPQ CX, $16
	JB   partial

fold16:
	MOVOU     (SI), X10
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X10, X1
	ADDQ      $16, SI
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       fold16

	// The last 1-15 bytes (CX), if any, as a partial block: the state's
	// 128 bits S and the r tail bytes are the r-byte head S[0:r] (a block
	// of leading zeros and S[0:r], which has the same value) and the
	// block S[r:16] || tail, so the head is folded 128 bits forward onto
	// that block (the partial-block step of Intel's reflected CRC folding,
	// as in ISA-L's crc32_gzip_refl_by8).
partial:
	TESTQ CX, CX
	JZ    reduce

	MOVOU    -16(SI)(CX*1), X11 // the last 16 bytes of p: the tail on top
	LEAQ     shufx<>(SB), AX
	MOVOU    (AX)(CX*1), X12    // bytes 16-r..15 take S[0..r-1], the rest 0
	MOVOA    X1, X13
	PSHUFB   X12, X1            // X1: the head block
	MOVOU    topx<>(SB), X14
	PXOR     X14, X12           // bytes 0..15-r take S[r..15]; top r flagged
	PSHUFB   X12, X13
	MOVOA    X12, X0
	PBLENDVB X0, X11, X13       // X13: S[r:16] || tail
	MOVOU    r4r3x<>+0(SB), X0
	MOVOA    X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR     X5, X1
	PXOR     X13, X1

reduce:
	// 128 -> 96 bits: the low 64 bits times x^64 mod P (r4r3's upper
	// constant), added to the upper 64.
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1

	// 96 -> 64 bits: the low 32 bits times r5, added to the rest.
	PCMPEQB   X3, X3
	PSRLQ     $32, X3 // the low 32 bits of each quadword
	MOVOA     X1, X2
	PSRLDQ    $4, X2
	PAND      X3, X1
	MOVQ      r5x<>+0(SB), X0
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	// Barrett reduction: q = floor(low32 * mu), crc = value ^ q * P'.
	MOVOU     pmux<>+0(SB), X0
	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1

	PEXTRD $1, X1, AX
	MOVL   AX, ret+32(FP)
	RET
