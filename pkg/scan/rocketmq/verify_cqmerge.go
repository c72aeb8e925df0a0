package rocketmq

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// cqMergeQueues is how many queues are walked together: each holds an
// open file and a cqCursorBuf buffer, so memory and descriptors stay
// bounded (2 MiB, 128 files) however many queues the store has. A
// variable so tests can walk one queue at a time.
var cqMergeQueues = 128

// cqCursorBuf is the read buffer of one queue's cursor: 819 units.
const cqCursorBuf = 819 * rmq.CQUnitSize

// cqCursor walks the units of one queue in stream order (§4.1, §4.2),
// one unit at a time, so that the units of many queues can be checked in
// commitlog order: the record lookups then go through the record table
// (verify_spill.go) once per group of queues, not once per queue.
type cqCursor struct {
	q        *queueState
	us       *unitScan
	files    []cqFile
	fileSize int64
	fi       int      // current file
	fh       *os.File // open current file, nil before the first read
	end      int64    // units end of the current file
	pos      int64    // next unit's position in the current file
	buf      []byte
	bufPos   int64 // file position of buf[0]
	bufN     int64 // valid bytes in buf
	unit     rmq.CQUnit
	err      error
}

// advance loads the next unit into c.unit; false at the end of the queue
// (or on a read error, left in c.err).
func (c *cqCursor) advance() bool {
	for c.fi < len(c.files) {
		f := c.files[c.fi]
		if c.fh == nil {
			if c.fh, c.err = storefile.Open(f.path); c.err != nil {
				return false
			}
			c.end = min(f.size, c.fileSize) / rmq.CQUnitSize * rmq.CQUnitSize
			c.pos, c.bufN = 0, 0
		}
		if c.pos >= c.end {
			c.fh.Close()
			c.fh = nil
			c.fi++
			continue
		}
		if c.pos >= c.bufPos+c.bufN || c.pos < c.bufPos {
			n := min(int64(len(c.buf)), c.end-c.pos)
			if c.err = readFull(c.fh, c.buf[:n], c.pos); c.err != nil {
				return false
			}
			c.bufPos, c.bufN = c.pos, n
		}
		i := c.pos - c.bufPos
		c.unit, _ = rmq.DecodeCQUnit(c.buf[i:i+rmq.CQUnitSize], c.pos) // length checked: never fails
		return true
	}
	return false
}

// skipZeros moves to the next unit that is not all zeros, at or after
// c.pos, and loads it into c.unit; false at the end of the queue (or on a
// read error, left in c.err).
// The rest of a file past the buffer is read in large reads into
// scratch (a multiple of the unit size): zero tails run to megabytes.
func (c *cqCursor) skipZeros(scratch []byte) bool {
	for c.advance() {
		i := c.pos - c.bufPos
		if j := format.FirstNonZero(c.buf[i:c.bufN]); j >= 0 {
			c.pos += int64(j) / rmq.CQUnitSize * rmq.CQUnitSize
			i = c.pos - c.bufPos
			c.unit, _ = rmq.DecodeCQUnit(c.buf[i:i+rmq.CQUnitSize], c.pos) // inside the buffer: never fails
			return true
		}
		c.pos = c.bufPos + c.bufN
		for c.pos < c.end && len(scratch) > 0 {
			if next := nextData(c.fh, c.pos); next >= c.end {
				c.pos = c.end
				break
			} else if next > c.pos {
				c.pos = next / rmq.CQUnitSize * rmq.CQUnitSize
			}
			n := min(int64(len(scratch)), c.end-c.pos)
			if c.err = readFull(c.fh, scratch[:n], c.pos); c.err != nil {
				return false
			}
			if j := format.FirstNonZero(scratch[:n]); j >= 0 {
				c.pos += int64(j) / rmq.CQUnitSize * rmq.CQUnitSize
				break // advance reads the buffer from there
			}
			c.pos += n
		}
	}
	return false
}

// nextData returns where the next bytes at or after pos that are not a
// hole start (SEEK_DATA; what follows pos when the file system cannot
// tell, and the file's end when only a hole follows). The broker creates
// consume queue files at their full size (FileChannel.map extends them),
// so most of a queue's last file is a hole: reading it would make the
// kernel zero-fill megabytes for each queue.
func nextData(f *os.File, pos int64) int64 {
	next, err := unix.Seek(int(f.Fd()), pos, unix.SEEK_DATA)
	switch {
	case err == nil:
		return next
	case errors.Is(err, unix.ENXIO): // a hole up to the end, or pos at the end
		if st, err := f.Stat(); err == nil {
			return max(pos, st.Size())
		}
	}
	return pos
}

// cqScratch is skipZeros' read size: 13107 units (256 KiB), one buffer
// for the whole (sequential) walk.
const cqScratch = 13107 * rmq.CQUnitSize

func (c *cqCursor) close() {
	if c.fh != nil {
		c.fh.Close()
		c.fh = nil
	}
}

// cqHeap orders cursors by the commitlog offset of their current unit,
// then by queue order: a strict order (queue paths differ), so the units
// come out in the same sequence whatever the heap's shape. Written out
// for its entries (the offset beside the cursor), not container/heap's
// interface calls: it takes one sift per unit.
type cqHeap []cqEntry

type cqEntry struct {
	off int64 // c.unit.CommitLogOffset
	c   *cqCursor
}

func (a *cqEntry) less(b *cqEntry) bool {
	if a.off != b.off {
		return a.off < b.off
	}
	return a.c.q.rel < b.c.q.rel
}

// down moves entry i down to its place.
func (h cqHeap) down(i int) {
	n := len(h)
	x := h[i]
	for {
		l := 2*i + 1
		if l >= n || l < 0 {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].less(&h[l]) {
			j = r
		}
		if !h[j].less(&x) {
			break
		}
		h[i] = h[j]
		i = j
	}
	h[i] = x
}

func (h cqHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// pop drops the top entry.
func (h *cqHeap) pop() {
	n := len(*h) - 1
	(*h)[0] = (*h)[n]
	*h = (*h)[:n]
	if n > 0 {
		h.down(0)
	}
}

// scanQueues walks the units of a group of queues merged in commitlog
// order. Each queue's units are still checked in its own stream order,
// so its findings (and their caps) are those of a walk of it alone.
func (v *verifier) scanQueues(qs []*queueState, files [][]cqFile, fileSize int64, bufs, scratch []byte) {
	h := make(cqHeap, 0, len(qs))
	cursors := make([]*cqCursor, len(qs))
	for i, q := range qs {
		c := &cqCursor{q: q, us: &unitScan{q: q, prevOff: -1}, files: files[i], fileSize: fileSize,
			buf: bufs[i*cqCursorBuf : (i+1)*cqCursorBuf : (i+1)*cqCursorBuf]}
		cursors[i] = c
		if len(c.files) > 0 {
			q.minIdx = c.files[0].base / rmq.CQUnitSize
			q.units = q.minIdx
		}
		if c.advance() {
			h = append(h, cqEntry{c.unit.CommitLogOffset, c})
		}
	}
	h.init()
	for len(h) > 0 {
		c := h[0].c
		if !v.unitsOf(c, scratch) {
			c.close()
			h.pop()
			continue
		}
		h[0].off = c.unit.CommitLogOffset
		h.down(0)
	}
	for _, c := range cursors {
		c.close()
		if c.q.claim != nil && (c.us.ended || c.err != nil) && c.q.claim.maxHi > c.us.next {
			// Claimed units the walk did not reach (a queue's end at its
			// zero tail is the usual case and reaches them all).
			c.q.claimCut, c.q.claimUpTo = true, c.us.next
			v.claimsCut = true
		}
		if c.err != nil {
			// What the file and those after it hold is unknown: its units
			// are neither checked nor missing (checkMissing).
			f := c.files[min(c.fi, len(c.files)-1)]
			c.q.unreadFile, c.q.unreadFrom = f.rel, f.base/rmq.CQUnitSize
			v.dispatchWaits = append(v.dispatchWaits, f.rel)
			v.res.Unread(f.rel, c.err)
		} else {
			v.finishQueue(c.us, c.files)
		}
		v.dispatchFrom = max(v.dispatchFrom, c.q.lastEnd)
	}
}

// unitsOf checks c's current unit and the claimed units that follow it
// (verify_cqclaim.go: a claimed unit needs no record lookup, so it need
// not wait for the other queues' units before it in commitlog order; a
// queue's findings stay in its own order, and the report sorts them by
// path). It returns false at the queue's end, with c.unit the next unit
// (to be looked up in commitlog order) otherwise.
func (v *verifier) unitsOf(c *cqCursor, scratch []byte) bool {
	for {
		v.unit(c.us, c.files[c.fi], c.pos, c.unit)
		c.pos += rmq.CQUnitSize
		if c.us.ended {
			// Past the queue's end only the first non-zero unit matters
			// (it is reported; nothing else is): find it in bulk rather
			// than sending every zero unit of the file through the heap.
			if c.skipZeros(scratch) {
				v.unit(c.us, c.files[c.fi], c.pos, c.unit)
			}
			return false
		}
		if !c.advance() {
			return false
		}
		if c.q.claim == nil || !c.us.claimedAt((c.files[c.fi].base+c.pos)/rmq.CQUnitSize) {
			return true
		}
	}
}

// finishQueue adds a queue's summary findings after its units.
func (v *verifier) finishQueue(us *unitScan, files []cqFile) {
	q := us.q
	if us.placeholders > 0 {
		v.add(q.rel+":ph", scan.Finding{Code: CodeCQPlaceholder, Severity: scan.Info, Path: files[0].rel, Repair: scan.RepairNone,
			Length: us.placeholders * rmq.CQUnitSize, Details: map[string]any{"units": us.placeholders},
			Message: fmt.Sprintf("%d pre-blank placeholder units (size 0x7FFFFFFF) before the queue's first message", us.placeholders)})
	}
	if us.unknown > 0 {
		v.add(q.rel+":unknown", scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: us.unknownFile, Offset: us.unknownPos,
			Length: us.unknown * rmq.CQUnitSize, Repair: scan.RepairNone,
			Details: map[string]any{"units": us.unknown, "recovery_end_at_least": v.recoveryEnd, "waits_on": []string{v.unread}},
			Message: fmt.Sprintf("%d unit(s) of %s point at or past commitlog offset %d, %s: whether recovery keeps them is unknown, not lost",
				us.unknown, q.rel, v.recoveryEnd, v.pastUnread())})
	}
	if su := &us.spanUnknown; su.n > 0 {
		v.add(q.rel+":span", scan.Finding{Code: CodeCQUnknown, Severity: scan.Warning, Path: su.first, Offset: su.pos,
			Length: su.n * rmq.CQUnitSize, Repair: scan.RepairNone, Details: map[string]any{"units": su.n, "waits_on": su.waits},
			Message: fmt.Sprintf("%d unit(s) of %s point %s: whether their records are there is unknown, not lost", su.n, q.rel, su.into())})
	}
	if us.expired > 0 {
		v.add(q.rel+":exp", scan.Finding{Code: CodeCQExpired, Severity: scan.Info, Path: files[0].rel, Repair: scan.RepairNone,
			Details: map[string]any{"units": us.expired, "commitlog_min_offset": v.minPhy},
			Message: fmt.Sprintf("%d units point below the commitlog's first file (expired messages; normal)", us.expired)})
	}
}
