// Package fileview reads store files for a scan without growing memory
// with the file and without evicting the broker's working set.
//
// View reads bounded windows with pread into one reusable buffer: with a
// window of a few hundred KiB the copy out of the page cache lands in the
// CPU cache, where the checksum pass finds it. Slice hands out bounded
// windows of a mapping instead, for a reader that goes front to back: on
// Linux 6.x the page faults of a populated mapping cost less than pread's
// copy (a sequential scan saves about 0.35 CPU s of system time per GiB;
// docs/performance.md), though the decode then reads memory, not a
// cache-warm copy. Whole maps a whole file read-only, for scanners that
// need random access to all of it (RabbitMQ .rdq files, at most a few
// tens of MiB).
//
// Pages that were not in the page cache before the scan read them
// (mincore on a mapping of the file) are dropped again with
// posix_fadvise(POSIX_FADV_DONTNEED) once the scan has moved past them;
// pages the broker had cached stay.
//
// A mapped file that shrinks while it is read raises SIGBUS; callers of
// Whole, Stream and Slice scan under Guard, which turns that fault into
// an error.
package fileview

import (
	"errors"
	"io"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
)

// MaxWindow bounds one window: the largest slice View or Whole hands out.
// 1 GiB holds any record a broker writes (RocketMQ 4 MiB + 64 KiB by
// default) and any .rdq file the RabbitMQ scanner accepts (MaxFileSize).
const MaxWindow = 1 << 30

var pageSize = int64(os.Getpagesize())

// maxTracked bounds the bytes of a file whose page-cache residency is
// recorded (2 bytes a page: 2 MiB at 4 GiB, above any store file a broker
// writes).
const maxTracked = 4 << 30

// ErrFault is the cause of a read that hit a memory fault: the file was
// truncated while it was mapped.
var ErrFault = errors.New("memory fault reading a mapped file (was it truncated while being scanned?)")

// File is one store file opened read-only for scanning. It is not safe
// for concurrent use.
type File struct {
	f    *os.File
	size int64
	// probe maps the whole file without populating it: mincore on it tells
	// which pages were cached before the scan read them. nil when the file
	// can't be mapped (then nothing is dropped).
	probe []byte
	// The current window: data covers [start, start+len(data)).
	data  []byte
	start int64
	buf   []byte // View's reusable buffer
	// cold[i] is true when page i was not in the page cache when the scan
	// started (one mincore of the whole file at the first read: pages the
	// kernel's readahead brings in for the scan count as cold too).
	// [winFrom, winTo) are the pages of the current window.
	cold           []bool
	winFrom, winTo int64
	maxRead        int64
	// Slice's state: the mapping is advised sequential (sliceSeq), pages
	// below sliceLow are let go, sliceHi is the furthest byte asked for.
	sliceSeq          bool
	sliceLow, sliceHi int64
	// Progress, when set, is told how many new bytes each read brought in
	// (a caller's rate limiter may sleep in it).
	Progress func(n int64)
	// KeepCache disables dropping the pages the scan brought in.
	KeepCache bool
}

// Open opens path read-only.
func Open(path string) (*File, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	v := &File{f: f, size: st.Size()}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
	if v.size > 0 && v.size <= 1<<40 {
		if m, err := unix.Mmap(int(f.Fd()), 0, int(v.size), unix.PROT_READ, unix.MAP_SHARED); err == nil {
			v.probe = m
			register(m, path) // a fault in it names the file (fault.go)
		}
	}
	return v, nil
}

// Size is the file size at Open.
func (v *File) Size() int64 { return v.size }

// DataExtent returns the first extent [start, end) of the file that may
// hold data and ends after off, as the file system reports it
// (SEEK_DATA, SEEK_HOLE); start is Size() when only a hole follows off.
// Where holes cannot be asked for, the rest of the file is one extent.
// It implements rocketmq.Extenter: readers skip holes instead of reading
// their zeros.
func (v *File) DataExtent(off int64) (int64, int64, error) {
	if off >= v.size {
		return v.size, v.size, nil
	}
	fd := int(v.f.Fd())
	data, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return v.size, v.size, nil
	case err != nil:
		return off, v.size, nil
	case data >= v.size:
		return v.size, v.size, nil
	}
	hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
	if err != nil {
		hole = v.size
	}
	return data, min(hole, v.size), nil
}

// MaxRead is the furthest offset any read reached (bytes scanned).
func (v *File) MaxRead() int64 { return v.maxRead }

// View returns the bytes from off to at least min(off+want, Size()),
// reusing the current window when it covers them, else reading a new
// window of max(want, window) bytes from off. The slice runs to the end
// of the window and is valid until the next View or Close. Past EOF it
// is empty.
func (v *File) View(off int64, want, window int) ([]byte, error) {
	if off < 0 || off >= v.size {
		return nil, nil
	}
	end := v.start + int64(len(v.data))
	if v.data != nil && off >= v.start && (off+int64(want) <= end || end == v.size) {
		return v.data[off-v.start:], nil
	}
	n := min(int64(max(want, window)), v.size-off, MaxWindow)
	v.track(off, off+n)
	if int64(cap(v.buf)) < n {
		v.buf = make([]byte, n)
	}
	b := v.buf[:n]
	got, err := v.f.ReadAt(b, off)
	if int64(got) < n {
		v.data = nil
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	v.data, v.start = b, off
	v.advance(off, n)
	return b, nil
}

// ReadAt reads len(p) bytes at off into p, as os.File.ReadAt does, with
// View's bookkeeping: the pages of the previous read that the scan
// brought into the page cache are dropped, Progress is told, MaxRead
// advances. It is the io.ReaderAt that pure readers (such as
// rocketmq.Reader, which keeps its own window) read through. Past the
// end of the file it returns io.EOF.
func (v *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= v.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), v.size-off)
	v.track(off, off+n)
	got, err := v.f.ReadAt(p[:n], off)
	v.advance(off, int64(got))
	if got == len(p) {
		return got, nil
	}
	if err == nil {
		err = io.EOF
	}
	return got, err
}

// Whole returns the whole file, mapped read-only and populated (no copy).
// Scan it under Guard. It falls back to one read into memory when the
// file can't be mapped.
func (v *File) Whole() ([]byte, error) {
	if v.size == 0 {
		return nil, nil
	}
	if v.probe == nil || v.size > MaxWindow {
		return v.View(0, int(min(v.size, MaxWindow)), 0)
	}
	v.track(0, v.size)
	_ = unix.Madvise(v.probe, unix.MADV_HUGEPAGE) // see adviseSequential
	populate(v.probe)
	v.data, v.start = v.probe, 0
	v.advance(0, v.size)
	return v.data, nil
}

// SliceBehind is how far behind the furthest byte asked for Slice lets
// the pages of the mapping go.
const SliceBehind = 4 << 20

// maxFolio is the largest folio the page cache uses for a file (a PMD).
const maxFolio = 2 << 20

// Slice returns the bytes [off, off+n) of the file without copying them:
// a slice of its mapping, valid until Close (scan it under Guard: a file
// that shrinks under it faults). It is for a reader that goes front to
// back: the mapping is advised sequential (the kernel reads ahead of
// the reader's page faults; each fault maps the cached pages around it),
// and pages more than SliceBehind behind the furthest byte asked for are
// let go (MADV_DONTNEED: unmapped from the process; then, where the scan
// brought them into the page cache, FADV_DONTNEED), so the process holds
// about 5 MiB of the file whatever its size. Bytes let go stay readable:
// they fault in again. Bytes past Size() are io.ErrUnexpectedEOF. Where
// the file can't be mapped it reads them with View (valid until the next
// Slice or View).
func (v *File) Slice(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > v.size {
		return nil, io.ErrUnexpectedEOF
	}
	if n == 0 {
		return []byte{}, nil
	}
	if v.probe == nil {
		b, err := v.View(off, n, n)
		if err != nil {
			return nil, err
		}
		return b[:n], nil
	}
	end := off + int64(n)
	if v.cold == nil {
		v.track(0, 0) // which pages were cached, before populating any
	}
	if !v.sliceSeq {
		// The reader's page faults map what it touches: on Linux 6.18
		// that cost 0.03-0.04 CPU s a GiB less than populating a window
		// ahead (MADV_POPULATE_READ, 1,700 calls a GiB) on a warm 1 GiB
		// DLedger scan, and on a cold one the kernel's readahead for a
		// sequential mapping keeps the disk as busy (docs/performance.md).
		adviseSequential(v.probe)
		v.sliceSeq = true
	}
	v.sliceHi = max(v.sliceHi, end)
	if d := (v.sliceHi - SliceBehind) / maxFolio * maxFolio; d >= v.sliceLow+StreamWindow {
		_ = unix.Madvise(v.probe[v.sliceLow:d], unix.MADV_DONTNEED)
		if !v.KeepCache && v.cold != nil {
			// From a folio before: the page cache drops only whole
			// folios (of up to 2 MiB), and one that straddled the last
			// boundary was still mapped then.
			v.drop(max(0, v.sliceLow-maxFolio)/pageSize, d/pageSize, 0, 0)
		}
		v.sliceLow = d
	}
	v.advance(off, int64(n))
	return v.probe[off:end:end], nil
}

// Mapped reports whether the file is mapped: then what Slice returns
// stays valid until Close (else it is View's buffer, valid until the next
// read).
func (v *File) Mapped() bool { return v.probe != nil }

// StreamWindow is how far behind its reader Stream lets the pages of a
// mapping go.
const StreamWindow = 1 << 20

// Stream is Whole for a caller that reads the file front to back (once,
// or in a few passes) and calls reached(off) as it goes, as often as it
// likes: the reader's page faults map what it touches, and pages a
// window behind off are let go (MADV_DONTNEED: unmapped from the
// process, still in the page cache), so the process holds about a window
// and what the reader has read past off of the file whatever its size (a
// 20 MB msg_store_index.ets held whole is a quarter of a 4 GiB scan's
// memory). A reached offset lower than the last starts a new pass.
// Bytes behind the window stay readable: they fault in again. Scan it
// under Guard.
//
// The mapping is advised sequential, as Slice's, and not populated a
// window ahead (MADV_POPULATE_READ) any more: a RabbitMQ scan reads each
// .rdq file in four or five passes (the prepass, the walk, the hazard
// models), and on a warm 1 GiB store of small messages populating cost
// 0.6 of its 3.5 CPU s (pprof); the faults cost less (system CPU
// 1.43-1.67 -> 1.03-1.30 s in 4 alternating pairs), and a cold 256 MiB
// store scans as fast (0.70-0.81 s wall either way).
func (v *File) Stream() (b []byte, reached func(off int64), err error) {
	if v.size == 0 || v.probe == nil || v.size > MaxWindow {
		b, err := v.Whole()
		return b, func(int64) {}, err
	}
	v.track(0, v.size)
	v.data, v.start = v.probe, 0
	v.advance(0, v.size)
	adviseSequential(v.probe)
	var dropTo, last int64
	reached = func(off int64) {
		off = min(max(off, 0), v.size)
		if off < last { // a new pass
			dropTo = off / maxFolio * maxFolio
		}
		last = off
		if d := (off - StreamWindow) / maxFolio * maxFolio; d > dropTo {
			_ = unix.Madvise(v.probe[dropTo:d], unix.MADV_DONTNEED)
			dropTo = d
		}
	}
	reached(0)
	return v.probe, reached, nil
}

// Release lets go of every page of the mapping Whole or Stream handed
// out (MADV_DONTNEED: unmapped from the process, still in the page cache),
// so a file whose pass is done holds no memory while it waits for its
// next one. The bytes stay readable: a later touch faults them in again
// (under Guard: a file that shrank meanwhile faults with its offset).
func (v *File) Release() {
	if v.probe != nil {
		_ = unix.Madvise(v.probe, unix.MADV_DONTNEED)
	}
}

// StreamFile opens path, hands its bytes to fn through Stream (fn calls
// reached as it goes) under Guard, and closes it: the whole life of a
// file read once front to back. A memory fault (the file shrank) is
// ErrFault.
func StreamFile(path string, fn func(b []byte, reached func(off int64)) error) (err error) {
	v, err := Open(path)
	if err != nil {
		return err
	}
	defer v.Close()
	defer Guard(&err)()
	b, reached, err := v.Stream()
	if err != nil {
		return err
	}
	return fn(b, reached)
}

// adviseSequential tells the kernel that the mapping m is read front to
// back (MADV_SEQUENTIAL: it reads ahead of the faults) and may be mapped
// in huge pages (MADV_HUGEPAGE). The second matters on a cold cache: the
// faults then read the file into 2 MiB folios, which one page-table entry
// maps, where otherwise each fault maps at most 64 KiB (the kernel's fault
// around) of small folios and the process stalls on every one. On Linux
// 6.18 (THP "madvise"), cold 1 GiB stores, alternating runs: RabbitMQ
// scan 1.29-1.52 -> 0.51-0.75 s wall (system CPU 0.67-0.80 -> 0.11-0.20 s),
// RabbitMQ verify 1.23-1.49 -> 0.67-0.90 s, RocketMQ scan 0.55-0.66 ->
// 0.45-0.53 s (cat of the same files 0.45-1.32 s). Pages already cached
// keep their folios: a warm scan is unchanged. Where the kernel has no
// huge pages the advice is refused and nothing changes. The page cache
// and the files are the same either way; the drops behind the reader
// (Slice, Stream) are at 2 MiB boundaries so that they do not split a
// huge mapping.
func adviseSequential(m []byte) {
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL)
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
}

// populate reads the pages of m in (MADV_POPULATE_READ), or where the
// kernel can't (before Linux 5.14) asks it to read them ahead.
func populate(m []byte) {
	if err := unix.Madvise(m, unix.MADV_POPULATE_READ); err != nil {
		_ = unix.Madvise(m, unix.MADV_WILLNEED)
	}
}

func (v *File) advance(off, n int64) {
	if e := off + n; e > v.maxRead {
		if v.Progress != nil {
			v.Progress(e - max(v.maxRead, off))
		}
		v.maxRead = e
	}
}

// track notes that [from, to) is about to be read: on the first call it
// records which pages of the file are cold, and it drops the cold pages of
// the previous window that the new one does not cover.
func (v *File) track(from, to int64) {
	if v.KeepCache || v.probe == nil {
		return
	}
	if v.cold == nil {
		// Pages past maxTracked are never dropped: a file that large (a
		// 1 TiB sparse file) would need a byte and a bool per page.
		pages := min((int64(len(v.probe))+pageSize-1)/pageSize, maxTracked/pageSize)
		cold, ok := v.coldPages(pages)
		if !ok {
			v.KeepCache = true // can't tell what was cached: drop nothing
			return
		}
		if cold == nil {
			// All of it was cached: nothing to drop.
			v.KeepCache = true
			return
		}
		v.cold = cold
	}
	pFrom, pTo := from/pageSize, (to+pageSize-1)/pageSize
	v.drop(v.winFrom, v.winTo, pFrom, pTo)
	v.winFrom, v.winTo = pFrom, pTo
}

// drop drops the cold pages of [from, to) outside [keepFrom, keepTo)
// (page numbers).
func (v *File) drop(from, to, keepFrom, keepTo int64) {
	to = min(to, int64(len(v.cold)))
	run := int64(-1)
	flush := func(p int64) {
		if run >= 0 {
			_ = unix.Fadvise(int(v.f.Fd()), run*pageSize, (p-run)*pageSize, unix.FADV_DONTNEED)
			run = -1
		}
	}
	for p := from; p < to; p++ {
		if v.cold[p] && (p < keepFrom || p >= keepTo) {
			if run < 0 {
				run = p
			}
			continue
		}
		flush(p)
	}
	flush(to)
}

// Close unmaps the file, drops the pages the scan brought in and closes
// it.
func (v *File) Close() error {
	if v.probe != nil {
		unregister(v.probe)
		_ = unix.Munmap(v.probe) // first: FADV_DONTNEED skips mapped pages
		v.probe = nil
		if !v.KeepCache && v.cold != nil {
			// Every cold page, also what readahead brought in past the
			// last window.
			v.drop(0, int64(len(v.cold)), 0, 0)
		}
	}
	v.data, v.buf, v.cold = nil, nil, nil
	return v.f.Close()
}

// residencyChunk is the span coldPages asks cachestat about at a time:
// 2 MiB, so a 128 MiB file costs 64 calls of a microsecond where mincore
// of all of it took 5 ms, and only chunks partly cached (a hole never
// read, pages the kernel let go) go to mincore.
const residencyChunk = 2 << 20

// coldPages returns which of the file's first pages pages were not in the
// page cache (nil when all were), from cachestat(2) per chunk and mincore
// for the chunks partly cached; ok is false when neither can tell.
func (v *File) coldPages(pages int64) (cold []bool, ok bool) {
	per := residencyChunk / pageSize
	for c := int64(0); c < pages; c += per {
		n := min(per, pages-c)
		cached, ok := cachedPages(v.f, c*pageSize, n*pageSize)
		if !ok { // no cachestat: one mincore of all of it
			return v.mincoreCold(0, pages, nil)
		}
		if cached >= n {
			continue
		}
		if cold == nil {
			cold = make([]bool, pages)
		}
		if cached == 0 {
			for i := c; i < c+n; i++ {
				cold[i] = true
			}
			continue
		}
		if cold, ok = v.mincoreCold(c, n, cold); !ok {
			return nil, false
		}
	}
	return cold, true
}

// mincoreCold marks in cold (made when nil) the pages [first, first+n)
// that mincore says are not in the page cache.
func (v *File) mincoreCold(first, n int64, cold []bool) ([]bool, bool) {
	vec := make([]byte, n)
	from := first * pageSize
	if err := mincore(v.probe[from:min(int64(len(v.probe)), from+n*pageSize)], vec); err != nil {
		return nil, false
	}
	for i, r := range vec {
		if r&1 == 0 {
			if cold == nil {
				cold = make([]bool, first+n)
			}
			cold[first+int64(i)] = true
		}
	}
	return cold, true
}

// cachestatRange and cachestatCounts are struct cachestat_range and
// struct cachestat of cachestat(2) (Linux 6.5).
type cachestatRange struct{ off, len uint64 }

type cachestatCounts struct {
	nrCache, nrDirty, nrWriteback, nrEvicted, nrRecentlyEvicted uint64
}

// cachedPages is how many pages of f's bytes [off, off+n) are in the
// page cache (cachestat(2)); ok is false where the kernel can't tell
// (before Linux 6.5, or a file system it does not support).
func cachedPages(f *os.File, off, n int64) (int64, bool) {
	if n <= 0 {
		return 0, true
	}
	r := cachestatRange{off: uint64(off), len: uint64(n)}
	var c cachestatCounts
	_, _, e := unix.Syscall6(unix.SYS_CACHESTAT, f.Fd(), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&c)), 0, 0, 0)
	if e != 0 {
		return 0, false
	}
	return int64(c.nrCache), true
}

// mincore fills vec with the page-cache residency of the pages of m.
func mincore(m, vec []byte) error {
	if len(m) == 0 {
		return nil
	}
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if e != 0 {
		return e
	}
	return nil
}

// Guard turns a memory fault of a mapped file (SIGBUS when a file shrinks
// under the scan) into an error in *errp: a *FaultError naming the file
// and offset (it wraps ErrFault). Use it in the goroutine that
// scans, as
//
//	defer fileview.Guard(&err)()
func Guard(errp *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if f, ok := r.(interface{ Addr() uintptr }); ok {
				*errp = locate(f.Addr()) // the file and offset (fault.go)
				return
			}
			panic(r)
		}
	}
}
