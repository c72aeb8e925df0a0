//go:build !amd64

package bytemask

const haveAVX2 = false

func eq64AVX2(*byte, byte) uint64 { panic("bytemask: no AVX2 on this architecture") }
