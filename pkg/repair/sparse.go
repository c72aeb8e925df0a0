package repair

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// zeroBlock feeds the holes of sparse files to a hash.
var zeroBlock [1 << 16]byte

// hashSparse writes the bytes of f to h and returns how many. Holes
// (SEEK_DATA/SEEK_HOLE: a staged RocketMQ index file is mostly a sparse run
// of zeros, 420 MB at the broker's defaults) are fed from a zero buffer
// instead of being read, which spares the kernel zero-filling them; a
// filesystem without hole support is read whole.
func hashSparse(h io.Writer, f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	buf := make([]byte, chunkSize)
	zeros := func(n int64) {
		for n > 0 {
			k := min(n, int64(len(zeroBlock)))
			h.Write(zeroBlock[:k])
			n -= k
		}
	}
	for pos := int64(0); pos < size; {
		data, err := unix.Seek(int(f.Fd()), pos, unix.SEEK_DATA)
		if err != nil { // ENXIO: only a hole up to EOF; EINVAL: no hole support
			if errors.Is(err, unix.ENXIO) {
				zeros(size - pos)
				return size, nil
			}
			n, err := io.CopyBuffer(h, io.NewSectionReader(f, pos, size-pos), buf)
			return pos + n, err
		}
		zeros(data - pos)
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return 0, err
		}
		hole = min(hole, size)
		for p := data; p < hole; {
			k := min(int64(len(buf)), hole-p)
			got, err := f.ReadAt(buf[:k], p)
			h.Write(buf[:got])
			p += int64(got)
			if int64(got) < k {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
		}
		pos = hole
	}
	return size, nil
}
