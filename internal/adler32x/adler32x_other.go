//go:build !amd64

package adler32x

const haveAVX2 = false

func accumAVX2(uint32, uint32, []byte) (uint32, uint32) {
	panic("adler32x: no AVX2 on this architecture")
}
