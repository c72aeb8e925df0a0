package rocketmq

// Comparing a rebuilt consume queue file with the store's without reading
// the store's holes. The broker creates consume queue files at full size
// (FileChannel.map extends them: 5.7 MB at the defaults), so past a
// queue's last unit most of its last file is a hole, and a broker with
// thousands of queues holds gigabytes of them. Reading a hole makes the
// kernel fill the buffer with zeros; asking where the data is (SEEK_DATA,
// SEEK_HOLE) reads only the units.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/repair"
)

// rbCompareChunk is how much of a data extent rbSameSparse reads at a time.
const rbCompareChunk = 256 << 10

// rbSameSparse reports whether the file at p holds exactly want, where
// want[zeroFrom:] is known to be zero: data extents are read (in chunks
// into *buf) and compared, holes (repair.DataExtents; on a file system
// that does not report them, the whole file is data) compare as zeros
// without a read. exists is false for a missing file. ok is false when it
// cannot tell that way (the file is not a regular file of len(want)
// bytes, or it shrank under the read): the caller then reads the file
// whole.
func rbSameSparse(p string, want []byte, zeroFrom int, buf *[]byte) (same, exists, ok bool, err error) {
	f, err := storefile.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, true, nil
	}
	if err != nil {
		return false, false, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, true, false, err
	}
	size := int64(len(want))
	if !st.Mode().IsRegular() || st.Size() != size {
		return false, true, false, nil
	}
	if len(*buf) < rbCompareChunk {
		*buf = make([]byte, rbCompareChunk)
	}
	pos := int64(0)
	err = repair.DataExtents(f, size, func(data, hole int64) error {
		if !zeroPast(want, pos, data, int64(zeroFrom)) {
			return errDiffers // a hole where want has units
		}
		for off := data; off < hole; {
			n := min(int64(len(*buf)), hole-off)
			if k, err := f.ReadAt((*buf)[:n], off); int64(k) < n {
				if err == nil || errors.Is(err, io.EOF) {
					return errShrank
				}
				return fmt.Errorf("%s at %d: %w", p, off+int64(k), err)
			}
			if !bytes.Equal((*buf)[:n], want[off:off+n]) {
				return errDiffers
			}
			off += n
		}
		pos = hole
		return nil
	})
	switch {
	case err == errDiffers:
		return false, true, true, nil
	case err == errShrank:
		return false, true, false, nil // shrank under the read
	case err != nil:
		return false, true, false, err
	case !zeroPast(want, pos, size, int64(zeroFrom)):
		return false, true, true, nil // a hole up to the end where want has units
	}
	return true, true, true, nil
}

// errDiffers and errShrank end rbSameSparse's walk early; neither leaves
// it.
var (
	errDiffers = errors.New("differs")
	errShrank  = errors.New("shrank")
)

// zeroPast reports whether want[from:to] is all zeros, knowing that
// want[zeroFrom:] is.
func zeroPast(want []byte, from, to, zeroFrom int64) bool {
	if to <= from || from >= zeroFrom {
		return true
	}
	for _, c := range want[from:min(to, zeroFrom)] {
		if c != 0 {
			return false
		}
	}
	return true
}
