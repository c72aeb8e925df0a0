package timer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// The timer walk beside the commitlog scan. Most of a timer scan needs
// only the timer store's own files: the units' framing, their slot
// chains, the slots recovery revises, the wheel. What a unit's target is
// needs the commitlog's recovery end and the prepass tap's marks, both
// known only when the commitlog scan ends. Prepass.Begin runs the first
// part on its own goroutine while the commitlog is scanned; the walk notes
// its units in spans of up to chunkUnits, with what decides whether a
// span needs looking at again (any unit kept for its ids, the range of
// the offsets its units point at). Scan then waits for that walk and
// checks the targets span by span: a span whose units the tap all marked
// and that lies below the recovery end is done without being read again;
// any other is read again and each of its units checked exactly as the
// walk of a sequential Scan checks it, in the same order, so the result
// is the same (TestOverlapSameResult).

// unitSpan is up to chunkUnits consecutive units of one timerlog file as
// the deferred walk handed them to unitFrame.
type unitSpan struct {
	file     int
	pos, end int64 // file positions of its first unit and past its last
	n        int
	keep     bool  // a unit of it needs its target whatever the tap found
	minPy    int64 // lowest offsetPy
	maxPy    int64 // highest offsetPy
	maxPyEnd int64 // highest offsetPy + sizePy
}

// spanAdd notes the unit at position pos of file i, of slot time st
// (u.DeliverMs() / PrecisionMs * PrecisionMs), for checkTargets.
func (s *scanner) spanAdd(i int, pos int64, u *ftimer.Unit, st int64) {
	pyEnd := u.OffsetPy + int64(u.SizePy)
	if n := len(s.spans); n > 0 {
		sp := &s.spans[n-1]
		if sp.file == i && sp.end == pos && sp.n < chunkUnits {
			sp.end, sp.n = pos+ftimer.UnitSize, sp.n+1
			sp.keep = sp.keep || s.keep(st)
			sp.minPy, sp.maxPy, sp.maxPyEnd = min(sp.minPy, u.OffsetPy), max(sp.maxPy, u.OffsetPy), max(sp.maxPyEnd, pyEnd)
			return
		}
	}
	s.spans = append(s.spans, unitSpan{file: i, pos: pos, end: pos + ftimer.UnitSize, n: 1, keep: s.keep(st),
		minPy: u.OffsetPy, maxPy: u.OffsetPy, maxPyEnd: pyEnd})
}

// settled reports whether no unit of sp needs its target looked at: none
// is kept for its ids, none is decided by the recovery end (endTarget),
// and the tap marked every one as checking out.
func (s *scanner) settled(sp *unitSpan) bool {
	if sp.keep || s.pre == nil || s.cl == nil || sp.minPy < 0 || sp.maxPy >= s.end || sp.maxPyEnd > s.end {
		return false
	}
	return s.pre.allClean(s.files[sp.file].base+sp.pos, sp.n)
}

// checkTargets is the deferred second half of walkLog: the targets of the
// units the walk noted, in timerlog order, then walkEnd.
func (s *scanner) checkTargets(ctx context.Context) error {
	var (
		fh   *os.File
		at   = -1
		buf  []byte
		fail = -1 // a file that could not be read again (reported once)
	)
	defer func() {
		if fh != nil {
			fh.Close()
		}
	}()
	for k := range s.spans {
		sp := &s.spans[k]
		if k%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if s.settled(sp) || sp.file == fail {
			continue
		}
		f := &s.files[sp.file]
		if at != sp.file {
			if fh != nil {
				fh.Close()
				fh = nil
			}
			var err error
			if fh, err = storefile.Open(f.path); err != nil {
				s.res.Fail(fmt.Errorf("%s: reading the units again for their targets: %w", f.rel, err))
				fail, at = sp.file, -1
				continue
			}
			at = sp.file
		}
		n := int(sp.end - sp.pos)
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if k, err := fh.ReadAt(b, sp.pos); k < n {
			s.res.Fail(fmt.Errorf("%s: reading the units again for their targets at %d: %w", f.rel, sp.pos+int64(k), err))
			fail = sp.file
			continue
		}
		for q := 0; q < n; q += ftimer.UnitSize {
			pos := sp.pos + int64(q)
			u, _ := ftimer.DecodeUnit(b[q:], f.base+pos)
			if !u.Valid() {
				// Not the unit the walk saw: the file changed under the scan.
				s.res.Fail(fmt.Errorf("%s: the unit at %d changed between two reads", f.rel, pos))
				fail = sp.file
				break
			}
			s.unitTarget(f, pos, &u)
		}
	}
	s.kept = nil // the pending units hold theirs now (pu.t): let the rest go before predict
	s.walkEnd()
	return nil
}

// tailReputs is what readTail found in the commitlog's tail: the re-puts
// (reputKey) with their offsets, which predict counts below the recovery
// end, and the error that cut the read short.
type tailReputs struct {
	reputs []reput
	err    error
}

type reput struct {
	key string
	phy int64
}

// readTail is predict's read of the plain commitlog's tail (the messages
// delivered before the stop), done beside the commitlog scan: it needs
// the checkpoint, not the recovery end, so it keeps each re-put's offset
// and predict counts those below the end.
func (s *scanner) readTail(ctx context.Context) error {
	if !s.cpPresent || s.cfg.CommitLog != nil || s.tapTail {
		return nil
	}
	fc, err := NewFileCommitLog(rmqscan.Config{Root: s.cfg.Root, CommitLogDir: s.cfg.CommitLogDir, MappedFileSize: s.cfg.MappedFileSize})
	if err != nil {
		return nil // no commitlog to read (openLog finds the same)
	}
	defer fc.Close()
	t := &tailReputs{}
	t.err = fc.Tail(ctx, s.cp.LastReadTimeMs-60_000, func(m *rmq.Message, phy int64) error {
		if k, ok := reputKey(m); ok {
			t.reputs = append(t.reputs, reput{k, phy})
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil // the walk is being stopped
	}
	s.tail = t
	return nil
}

// early is a Scan begun beside the commitlog scan (Prepass.Begin): its
// walk runs on its own goroutine; Scan finishes it.
type early struct {
	cfg    Config // as Begin was given it
	s      *scanner
	done   chan struct{}
	cancel context.CancelFunc
	err    error // what stopped the first steps (a cancelled context)
}

// Begin starts the part of Scan(ctx, cfg, opts) that needs only the timer
// store's own files (the checkpoint, the wheel, the timerlog walk) on its
// own goroutine, to run while the commitlog scan that p taps runs. A
// later Scan with the same Config (whatever its RecoveryEnd) and p as its
// Prepass waits for it and finishes it with opts as given here; any other
// Scan starts over. Call Stop when the commitlog scan fails before Scan.
// Begin does nothing for a nil p, with Records (every unit goes to the
// callback, in order) or with a CommitLog other than the plain one.
func (p *Prepass) Begin(ctx context.Context, cfg Config, opts scan.Options) {
	if p == nil || opts.Records != nil || cfg.CommitLog != nil {
		return
	}
	p.Stop()
	cfg.Prepass = p
	ctx, cancel := context.WithCancel(ctx)
	e := &early{cfg: cfg, done: make(chan struct{}), cancel: cancel}
	e.s = newScanner(cfg, opts)
	e.s.deferTargets = true
	p.early = e
	p.tail = nil
	steps := e.s.framesSteps()
	// The checkpoint first, here: it says which commitlog files readTail
	// would read, and the tap collects their re-puts as the commitlog
	// scan walks them instead (planTail), unless that scan's record limit
	// (TapMaxSize, set before Begin) is not Tail's.
	if e.err = e.s.run(ctx, steps[:1]); e.err == nil {
		if pl := e.s.planTail(); pl != nil && pl.maxSize == p.tapMaxSize() {
			p.tail, e.s.tapTail = pl, true
		}
		p.captureFrom(e.s.keepFrom(), e.s.cfg.PrecisionMs, e.s.cfg.PendingCache)
	}
	go func() {
		defer close(e.done)
		if e.err == nil {
			e.err = e.s.run(ctx, steps[1:])
		}
	}()
}

// tailPlan is what the tap collects for readTail: the re-puts (reputKey)
// of the valid records of the commitlog files FileCommitLog.Tail would
// read, per file, with the number of records it saw, to check against
// the commitlog scan's own count (CommitLogScanned) before Scan takes them
// as readTail's.
type tailPlan struct {
	bases   map[int64]bool // first offsets of the files Tail reads
	maxSize int            // Tail's record limit
	mu      sync.Mutex
	files   map[int64]*tapTail // by first offset, as the tap met them
	scanned map[int64]int      // the commitlog scan's valid records per file (-1: named twice)
}

// tapTail is what the tap collected of one commitlog file.
type tapTail struct {
	n      int
	reputs []reput
	twice  bool // the file was tapped twice: not the one walk Tail makes
}

func (t *tapTail) record(m *rmq.Message, phy int64) {
	t.n++
	if k, ok := reputKey(m); ok {
		t.reputs = append(t.reputs, reput{k, phy})
	}
}

// planTail is readTail's plan for the tap, nil when readTail reads
// nothing or must read for itself (no checkpoint, no commitlog files).
func (s *scanner) planTail() *tailPlan {
	if !s.cpPresent || s.cfg.CommitLog != nil {
		return nil
	}
	fc, err := NewFileCommitLog(rmqscan.Config{Root: s.cfg.Root, CommitLogDir: s.cfg.CommitLogDir, MappedFileSize: s.cfg.MappedFileSize})
	if err != nil || len(fc.files) == 0 {
		return nil
	}
	defer fc.Close()
	pl := &tailPlan{bases: map[int64]bool{}, maxSize: fc.cfg.MaxMessageSize, files: map[int64]*tapTail{}}
	for _, f := range fc.files[fc.tailStart(s.cp.LastReadTimeMs-60_000):] {
		pl.bases[f.base] = true
	}
	return pl
}

// collect is the collector of the commitlog file at base, nil when Tail
// does not read it.
func (pl *tailPlan) collect(base int64) *tapTail {
	if pl == nil || !pl.bases[base] {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if t := pl.files[base]; t != nil {
		t.twice = true
		return nil
	}
	t := &tapTail{}
	pl.files[base] = t
	return t
}

// CommitLogScanned hands the prepass the files of the commitlog scan it
// tapped (its Result.Files), once that scan is done: a file's count of
// valid records says whether the tap saw its whole walk.
func (p *Prepass) CommitLogScanned(files []scan.File) {
	if p == nil || p.tail == nil {
		return
	}
	pl := p.tail
	pl.scanned = map[int64]int{}
	for _, f := range files {
		if f.Kind != "commitlog" {
			continue
		}
		base, err := rmq.ParseFileName(filepath.Base(f.Path))
		if err != nil {
			continue
		}
		if _, dup := pl.scanned[base]; dup {
			pl.scanned[base] = -1
			continue
		}
		pl.scanned[base] = f.Records
	}
}

// tapReputs is what readTail would have found, from the tap: nil unless
// the tap saw every valid record of every file Tail reads, walked with
// Tail's record limit (TapMaxSize, still), each file once.
func (p *Prepass) tapReputs() *tailReputs {
	pl := p.tail
	if pl == nil || pl.scanned == nil || p.tapMaxSize() != pl.maxSize {
		return nil
	}
	bases := make([]int64, 0, len(pl.bases))
	for b := range pl.bases {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	t := &tailReputs{}
	for _, b := range bases {
		f := pl.files[b]
		if n, ok := pl.scanned[b]; f == nil || f.twice || !ok || n != f.n {
			return nil
		}
		t.reputs = append(t.reputs, f.reputs...)
	}
	return t
}

// Begun returns the Config Begin was given, if a walk is waiting for Scan.
func (p *Prepass) Begun() (Config, bool) {
	if p == nil || p.early == nil {
		return Config{}, false
	}
	return p.early.cfg, true
}

// Stop ends a walk Begin started that no Scan will finish, and waits for
// it. It is safe to call at any time, also on a nil p.
func (p *Prepass) Stop() {
	if p == nil || p.early == nil {
		return
	}
	p.early.cancel()
	<-p.early.done
	p.early = nil
}

// take hands the begun walk to a Scan of cfg, or stops it if cfg is not
// the Config it was begun with.
func (p *Prepass) take(cfg Config) *early {
	if p == nil || p.early == nil {
		return nil
	}
	e := p.early
	if !sameWalk(e.cfg, cfg) {
		p.Stop()
		return nil
	}
	<-e.done
	e.cancel()
	p.early = nil
	return e
}

// sameWalk reports whether two Configs give the same walk: equal but for
// RecoveryEnd and RecoveryEndUnknown, which only the targets use.
func sameWalk(a, b Config) bool {
	if !a.Now.Equal(b.Now) || a.CommitLog != nil || b.CommitLog != nil {
		return false
	}
	a.Now, b.Now = time.Time{}, time.Time{}
	a.RecoveryEnd, b.RecoveryEnd = 0, 0
	a.RecoveryEndUnknown, b.RecoveryEndUnknown = "", ""
	a.RecoveryEndWhy, b.RecoveryEndWhy = "", ""
	return a == b
}
