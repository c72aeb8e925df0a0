package rocketmq

import (
	"fmt"
	"time"

	"github.com/storectl/storectl/pkg/format"
)

// FileNameLen is the length of a mapped-file name: the 20-digit,
// zero-padded decimal offset of its first byte (UtilAll.offset2FileName).
const FileNameLen = 20

// FormatFileName returns the name of the mapped file starting at off.
func FormatFileName(off int64) string { return fmt.Sprintf("%020d", off) }

// ParseFileName parses a mapped-file name. It requires exactly 20 decimal
// digits and a value that fits an int64 (Long.parseLong).
func ParseFileName(name string) (int64, error) {
	if len(name) != FileNameLen {
		return 0, format.Corrupt(0, "fileName", fmt.Errorf("%w: %q is not 20 digits", format.ErrInvalid, name))
	}
	var v uint64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, format.Corrupt(int64(i), "fileName", fmt.Errorf("%w: %q is not 20 digits", format.ErrInvalid, name))
		}
		d := uint64(c - '0')
		if v > (1<<63-1-d)/10 {
			return 0, format.Corrupt(int64(i), "fileName", fmt.Errorf("%w: %q overflows int64", format.ErrInvalid, name))
		}
		v = v*10 + d
	}
	return int64(v), nil
}

// IndexNameLayout is the Go layout of UtilAll.timeMillisToHumanString,
// the broker's index file name: local time yyyyMMddHHmmssSSS (the '.' is
// dropped, see IndexFileName).
const IndexNameLayout = "20060102150405.000"

// IndexFileNameLen is the length of an index file name.
const IndexFileNameLen = 17

// IndexFileName formats ms (Unix milliseconds) as an index file name in
// loc (the broker names a file by the store time of the record that
// created it, in its own time zone).
func IndexFileName(ms int64, loc *time.Location) string {
	s := time.UnixMilli(ms).In(loc).Format(IndexNameLayout)
	return s[:14] + s[15:] // drop the '.'
}
