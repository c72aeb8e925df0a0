//go:build !amd64

package crc32x

const haveFold = false

func foldAVX2(uint32, []byte) uint32 { panic("crc32x: no fold on this architecture") }

const foldMax = 0
