package rocketmq

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// ErrStale is the cause of a record whose stored PHYSICALOFFSET is not
// where it sits: a record left over from an earlier life of the file
// (rocketmq #10017), matched with errors.Is.
var ErrStale = errors.New("stored physical offset does not match position")

// CheckMessage decodes the record at b[0], which sits at physical offset
// phy, and applies every record-local check: structure (magic, lengths,
// calMsgLength), body CRC, property CRC when present and stored
// PHYSICALOFFSET == phy. A BLANK record passes. The error is a
// *format.CorruptError; offsets in it are physical.
func CheckMessage(b []byte, phy int64, maxSize int) (rmq.Message, error) {
	m, err := rmq.DecodeMessage(b, phy, maxSize)
	if err != nil || m.IsBlank() {
		return m, err
	}
	if err := m.Verify(); err != nil {
		return m, err
	}
	if m.PhysicalOffset != phy {
		return m, format.Corrupt(phy+28, "physicalOffset", fmt.Errorf("%w: stored %d", ErrStale, m.PhysicalOffset))
	}
	return m, nil
}

var magicPrefix = []byte{0xDA, 0xA3, 0x20}

// resync searches [from, size) for the first position where a message
// passes CheckMessage. It returns -1 when there is none.
func resync(w *window, base, from int64, maxSize int) (int64, error) {
	p := from
	for p+rmq.MinRecordSize <= w.size {
		b, err := w.at(p, windowSize)
		if err != nil {
			return -1, err
		}
		if len(b) < 8 {
			return -1, nil
		}
		i := bytes.Index(b[4:], magicPrefix)
		if i < 0 {
			if int64(len(b)) >= w.size-p {
				return -1, nil
			}
			p += max(1, int64(len(b))-8) // keep an overlap so a split magic is not missed
			continue
		}
		cand := p + int64(i)
		if j := i + 4 + 3; j < len(b) && (b[j] == 0xA7 || b[j] == 0xAB) {
			rb, err := w.record(cand, maxSize)
			if err != nil {
				return -1, err
			}
			if m, err := CheckMessage(rb, base+cand, maxSize); err == nil && !m.IsBlank() {
				return cand, nil
			}
		}
		p = cand + 1
	}
	return -1, nil
}
