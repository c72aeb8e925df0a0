package timer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/bytemask"
	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
)

type formatCorrupt = format.CorruptError

// Target states: what a unit's offsetPy/sizePy find in the commitlog.
const (
	TargetOK        = "ok"
	TargetBeyondEnd = "beyond-end" // past the recovery end: the record is gone
	TargetAtEnd     = "at-end"     // starts exactly at the recovery end: the next record written there
	// TargetUnknown: at or past a recovery end that is only a lower bound
	// (a commitlog file could not be read in full): not known to be gone.
	TargetUnknown   = "unknown"
	TargetNotRecord = "not-a-record"
	TargetSize      = "size-mismatch"
	TargetTopic     = "wrong-topic"
)

// target is what a unit points at.
type target struct {
	state     string
	readable  bool // the dequeue's getMessageByCommitOffset finds a message there now
	topic     string
	realTopic string
	realQID   string
	uniqKey   string
	msgID     string
	outMs     int64 // TIMER_OUT_MS; -1 when absent
	delKey    string
	queueID   int32
	queueOff  int64
	size      int32
	detail    string
	full      bool // the strings are filled in
	hashOK    bool // hashTopic is the REAL_TOPIC's hash (or there is none)
	hasDelKey bool
}

// pendingUnit is a unit whose slot the next start reads again.
type pendingUnit struct {
	off, prev int64
	magic     int32
	deliverMs int64
	offsetPy  int64
	sizePy    int32
	hash      int32
	writeMs   int64
	t         target
}

// walkLog streams every timerlog file: framing, chains, targets, and the
// broker's recovery walk.
func (s *scanner) walkLog(ctx context.Context) error {
	s.readFrom = s.readTime()
	s.revised = slotTable[revisedSlot]{}
	begin := int64(0)
	if s.cpPresent {
		begin = s.cp.LastTimerLogFlushPos
	}
	if n := len(s.files); n > 0 {
		begin -= s.files[n-1].size
	}
	begin = max(begin, 0)
	s.beginFile = 0
	for i := len(s.files) - 1; i >= 0; i-- {
		if begin >= s.files[i].base {
			s.beginFile = i
			break
		}
	}
	if len(s.files) > 0 {
		s.process = s.files[s.beginFile].base
	}
	for i := range s.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.walkFile(i); err != nil {
			s.res.Fail(fmt.Errorf("%s: %w", s.files[i].rel, err))
		}
	}
	if !s.deferTargets {
		s.walkEnd()
	}
	return nil
}

// walkEnd reports what the whole walk found once every unit's target is
// checked: the units the 7-day TTL skips and those past recovery's stop.
func (s *scanner) walkEnd() {
	if n := len(s.expired); n > 0 {
		rel, pos := s.loc(s.expired[0].off)
		ids := []string{}
		for _, e := range s.expired[:min(n, 1000)] {
			ids = append(ids, e.msgID)
		}
		f := scan.Finding{Code: CodeTTLExpired, Severity: scan.Error, Path: rel, Offset: pos, Repair: scan.RepairNone,
			Details: map[string]any{"units": n, "last_read_time_ms": s.cp.LastReadTimeMs, "read_from_ms": s.readFrom, "msg_ids": ids},
			Message: fmt.Sprintf("the broker has been down longer than the timer wheel's 7 days (TIMER_WHEEL_TTL_DAY): a start now reads the wheel from %d, after the checkpoint's %d, and skips %d due timer messages (storectl salvage exports them)", s.readFrom, s.cp.LastReadTimeMs, n)}
		s.atLeast(&f, 0)
		s.add(f)
	}
	if s.endUnknown > 0 {
		rel, pos := s.loc(s.endUnknownAt)
		s.add(scan.Finding{Code: CodeTargetUnknown, Severity: scan.Warning, Path: rel, Offset: pos, Repair: scan.RepairNone,
			Details: map[string]any{"units": s.endUnknown, "recovery_end_at_least": s.end, "waits_on": []string{s.cfg.RecoveryEndUnknown}},
			Message: fmt.Sprintf("%d timer units point at or past commitlog offset %d, %s: whether their messages are there (and what the dequeue does with them) is unknown, not lost", s.endUnknown, s.end, s.endBound())})
	}
	if s.dropped > 0 {
		rel, pos := s.loc(s.process)
		f := scan.Finding{Code: CodeLogDropped, Severity: scan.Error, Path: rel, Offset: pos, Repair: scan.RepairNone,
			Details: map[string]any{"units": s.dropped, "process_offset": s.process},
			Message: fmt.Sprintf("%d timer units lie past timerlog offset %d, where the broker's timer recovery stops: it truncates them away and their messages never fire", s.dropped, s.process)}
		s.atLeast(&f, s.process)
		s.add(f)
	}
}

// endBound says why the commitlog's recovery end s.end is only a lower
// bound (Config.RecoveryEndUnknown), after "commitlog offset N, ".
func (s *scanner) endBound() string {
	if s.cfg.RecoveryEndWhy != "" {
		return "the recovery end's lower bound (" + s.cfg.RecoveryEndWhy + ")"
	}
	return "where the read of " + s.cfg.RecoveryEndUnknown + " stopped"
}

// atLeast marks f, a count of units, as a lower bound when a part of the
// timerlog past offset from was not read: the units there are not
// counted (waits_on names the files).
func (s *scanner) atLeast(f *scan.Finding, from int64) {
	var files []string
	for _, r := range s.unread {
		if rel := s.files[r.file].rel; r.to > from && !slices.Contains(files, rel) {
			files = append(files, rel)
		}
	}
	if files != nil {
		f.Details["waits_on"] = files
		f.Message = "at least: " + f.Message + " (the units of " + strings.Join(files, ", ") + ", not read, are not counted)"
	}
}

// walkFile walks file i. A file that cannot be opened or read (to its
// end) is not an error of the walk: fileUnread notes the part not read,
// and nothing is concluded about it.
func (s *scanner) walkFile(i int) error {
	f := &s.files[i]
	inWalk := i >= s.beginFile && !s.stopped && s.recUnknown == ""
	if f.openErr != nil {
		s.fileUnread(i, 0, 0, 0, inWalk, f.openErr)
		return nil
	}
	fh, err := storefile.Open(f.path)
	if err != nil {
		s.fileUnread(i, 0, 0, 0, inWalk, err)
		return nil
	}
	defer fh.Close()
	r := ftimer.NewLogReader(fh, f.size, f.base)
	fileRecords := 0
	for r.Next() {
		e := r.Current() // s.unit and the findings copy what they keep
		pos := r.Offset() - f.base
		switch e.Kind {
		case ftimer.EntryUnit:
			fileRecords++
			s.unit(i, pos, &e.Unit, inWalk && !s.stopped)
			if s.stopped && i >= s.beginFile {
				s.dropped++
			}
		case ftimer.EntryBlank:
			f.kind = scan.EndBlank
			if int64(e.Rest) != f.size-pos {
				s.add(scan.Finding{Code: CodeLogBlankMisplaced, Severity: scan.Warning, Path: f.rel, Offset: pos, Length: ftimer.BlankSize,
					Expected: fmt.Sprint(f.size - pos), Actual: fmt.Sprint(e.Rest),
					Message: "the BLANK at the end of this timerlog file does not give the rest of the file as its length"})
			}
		case ftimer.EntryZero:
			f.kind = scan.EndZero
		case ftimer.EntryBad:
			f.kind = scan.EndGarbage
			code := CodeLogBadSize
			var ce *format.CorruptError
			if errors.As(r.Err(), &ce) && ce.Field == "magic" {
				code = CodeLogBadMagic
			}
			sev, msg := scan.Error, "the broker's timer recovery stops at this unit (bad "+map[string]string{CodeLogBadSize: "size", CodeLogBadMagic: "magic"}[code]+") and truncates the timerlog here"
			var details map[string]any
			switch {
			case s.recUnknown != "" && i >= s.beginFile && !s.stopped:
				// The walk went through a file not read before this one.
				msg = "unit with a bad " + map[string]string{CodeLogBadSize: "size", CodeLogBadMagic: "magic"}[code] + "; whether the broker's timer recovery reaches it (and truncates the timerlog here) is unknown: its walk goes through " + s.recUnknown + ", which could not be read"
				details = map[string]any{"waits_on": []string{s.recUnknown}}
			case !inWalk || s.stopped:
				msg = "unit with a bad " + map[string]string{CodeLogBadSize: "size", CodeLogBadMagic: "magic"}[code] + "; the dequeue skips nothing here but a slot chain through it is broken"
				sev = scan.Warning
			}
			s.add(scan.Finding{Code: code, Severity: sev, Path: f.rel, Offset: pos, Length: ftimer.UnitSize,
				Expected: map[string]string{CodeLogBadSize: "52", CodeLogBadMagic: "flags within 0xF"}[code],
				Actual:   map[string]string{CodeLogBadSize: fmt.Sprint(e.Unit.Size), CodeLogBadMagic: fmt.Sprintf("%#x", uint32(e.Unit.Magic))}[code],
				Details:  details, Repair: scan.RepairNone, Message: msg})
		}
	}
	if err := r.Err(); err != nil {
		var ce *format.CorruptError
		if !errors.As(err, &ce) {
			// A read failed (or came short) at the entry Next was reading:
			// what came before stands, the rest is unread.
			pos := r.Offset() - f.base
			if fileRecords > 0 && s.logEnd < f.base+r.End() {
				s.logEnd = f.base + r.End()
			}
			s.fileUnread(i, pos, fileRecords, pos, inWalk && !s.stopped, err)
			return nil
		}
	}
	f.end = r.End()
	var afterErr error // unitsAfter's read error, at afterPos
	var afterPos int64
	if f.kind == scan.EndZero || f.kind == scan.EndGarbage {
		n, last, at, err := s.unitsAfter(f, fh, f.end+ftimer.UnitSize)
		afterErr, afterPos = err, at
		if n > 0 {
			if inWalk && !s.stopped {
				s.dropped += n
			}
			fileRecords += n
			s.logEnd = f.base + last
		}
	}
	if f.kind == "" {
		f.kind = scan.EndEOF
		if r.Tail > 0 {
			f.kind = scan.EndTorn
		}
	}
	stopHere := f.kind == scan.EndZero || f.kind == scan.EndGarbage || f.kind == scan.EndTorn ||
		f.kind == scan.EndBlank && i == len(s.files)-1
	if inWalk && !s.stopped {
		s.process = f.base + f.end
		if f.kind == scan.EndEOF && r.Tail == 0 {
			s.process = f.base + f.size
		}
		if stopHere {
			s.stopped = true
		}
	}
	if fileRecords > 0 && s.logEnd < f.base+f.end {
		s.logEnd = f.base + f.end
	}
	if afterErr != nil {
		// Recovery's walk of this file stopped before (at f.end), so where
		// it stops is known; the units past it are not all counted.
		s.fileUnread(i, afterPos, fileRecords, afterPos, false, afterErr)
		return nil
	}
	bytes := min(f.size, f.end+ftimer.UnitSize)
	s.res.Files = append(s.res.Files, scan.File{Path: f.rel, Kind: "timerlog", Size: f.size, BytesScanned: bytes,
		Records: fileRecords, FirstValid: firstValid(fileRecords), LastValid: lastValid(fileRecords, f.end), ValidEnd: f.end, End: f.kind})
	s.res.BytesScanned += bytes
	if s.opts.Progress != nil {
		s.opts.Progress(bytes)
	}
	return nil
}

func firstValid(n int) int64 {
	if n == 0 {
		return -1
	}
	return 0
}

func lastValid(n int, end int64) int64 {
	if n == 0 {
		return -1
	}
	return end - ftimer.UnitSize
}

// unitsAfter looks for units past the point where a file's walk stopped
// (zeros or a rejected unit): recovery drops them, but they are on disk
// and slot chains may lead to them. It skips holes, and returns how many
// it found and the file position past the last; on a read error, the
// file position from which it could not read (at) with the error.
func (s *scanner) unitsAfter(f *logFile, fh *os.File, from int64) (n int, last, at int64, err error) {
	ra, err := sparse.NewReaderAt(fh, f.size)
	if err != nil {
		return 0, 0, from, err
	}
	buf := make([]byte, 1<<20/ftimer.UnitSize*ftimer.UnitSize)
	for pos := from; pos+ftimer.UnitSize <= f.size; {
		chunk := min(int64(len(buf)), (f.size-pos)/ftimer.UnitSize*ftimer.UnitSize)
		if !ra.Data(pos, pos+chunk) {
			pos += chunk
			continue
		}
		b := buf[:chunk]
		if _, err := ra.ReadAt(b, pos); err != nil {
			return n, last, pos, err
		}
		for k := int64(0); k+ftimer.UnitSize <= chunk; k += ftimer.UnitSize {
			e, _ := ftimer.DecodeEntry(b[k:], f.base+pos+k)
			if e.Kind == ftimer.EntryBlank {
				return n, last, 0, nil
			}
			if e.Kind == ftimer.EntryUnit {
				n++
				last = pos + k + ftimer.UnitSize
				s.setValid(e.Unit.Offset)
				s.lastInSlot.put(e.Unit.DeliverMs()/s.cfg.PrecisionMs, e.Unit.Offset)
			}
		}
		pos += chunk
	}
	return n, last, 0, nil
}

// unit checks one unit recovery accepts at position pos of file i: its
// frame (the slot's chain, the slot revision) and, unless the targets
// wait for the commitlog scan (deferTargets), its target.
func (s *scanner) unit(i int, pos int64, u *ftimer.Unit, revise bool) {
	f := &s.files[i]
	slotT := s.unitFrame(i, pos, u, revise)
	if s.deferTargets {
		s.spanAdd(i, pos, u, slotT*s.cfg.PrecisionMs)
		return
	}
	s.unitTarget(f, pos, u)
}

// unitFrame is the part of a unit's checks that needs only the timerlog
// and the wheel: the chain of its slot, the slot recovery revises, and
// whether it is kept as pending (its target is filled in by unitTarget).
func (s *scanner) unitFrame(i int, pos int64, u *ftimer.Unit, revise bool) (slotT int64) {
	f := &s.files[i]
	s.units++
	off := u.Offset
	s.setStep(i, pos)
	slotT = u.DeliverMs() / s.cfg.PrecisionMs
	last, added := s.lastInSlot.ref(slotT) // nothing below touches lastInSlot until *last = off
	want, seen := *last, !added
	switch {
	case u.PrevPos == -1 && seen:
		s.add(scan.Finding{Code: CodeLogChainRestart, Severity: scan.Warning, Path: f.rel, Offset: pos, Length: ftimer.UnitSize,
			Expected: fmt.Sprint(want), Actual: "-1",
			Details: map[string]any{"slot_time_ms": slotT * s.cfg.PrecisionMs, "earlier_unit": want},
			Message: "this unit starts a new chain for a slot that already has units: the wheel was behind the timerlog when it was written (lazy wheel, #9735), so the earlier units are reachable only if recovery revises their slot"})
	case u.PrevPos != -1 && (u.PrevPos >= off || !s.isUnitNear(i, u.PrevPos)):
		if u.PrevPos < off && s.unread != nil && s.linksUnread(u.PrevPos) {
			break // into bytes not read: the chain is unknown there, not broken
		}
		s.add(scan.Finding{Code: CodeLogBadPrev, Severity: scan.Error, Path: f.rel, Offset: pos + 4, Length: 8,
			Expected: "an earlier unit of the same slot", Actual: fmt.Sprint(u.PrevPos),
			Message: "prevPos does not point at an earlier unit: the dequeue of this slot stops (or reads garbage) there, and the units before it in the slot never fire"})
	case u.PrevPos != -1 && u.PrevPos != want:
		if s.unread != nil && s.linksUnread(u.PrevPos) {
			break
		}
		if pu, ok := s.pending[u.PrevPos]; ok && pu.deliverMs/s.cfg.PrecisionMs != slotT || !ok && !s.sameSlot(u.PrevPos, slotT) {
			s.add(scan.Finding{Code: CodeLogBadPrev, Severity: scan.Error, Path: f.rel, Offset: pos + 4, Length: 8,
				Expected: "a unit of slot " + strconv.FormatInt(slotT*s.cfg.PrecisionMs, 10), Actual: fmt.Sprint(u.PrevPos),
				Message: "prevPos points at a unit of another slot: the dequeue of this slot would fire that slot's messages too"})
		}
	}
	*last = off
	if revise {
		s.reviseSlotAt(slotT, off)
	}
	if slotT*s.cfg.PrecisionMs >= s.readFrom && len(s.pending) < s.cfg.PendingCache {
		s.pending[off] = &pendingUnit{off: off, prev: u.PrevPos, magic: u.Magic, deliverMs: u.DeliverMs(), offsetPy: u.OffsetPy,
			sizePy: u.SizePy, hash: u.HashTopic, writeMs: u.CurrWriteTimeMs}
	}
	return slotT
}

// keepFrom is the lowest slot time keep is true for (without Records):
// the checkpoint's read time, or the read time when there is no
// checkpoint.
func (s *scanner) keepFrom() int64 {
	if f := s.readTime(); !s.cpPresent || f < s.cp.LastReadTimeMs {
		return f
	}
	return s.cp.LastReadTimeMs
}

// keep reports whether a unit of slot time st needs its target whatever
// the prepass found: it is pending or expired (its ids are kept), or
// every unit goes to the Records callback.
func (s *scanner) keep(st int64) bool {
	return st >= s.readFrom || s.opts.Records != nil || s.cpPresent && st >= s.cp.LastReadTimeMs
}

// unitTarget checks what the unit at position pos of f points at in the
// commitlog, after unitFrame.
func (s *scanner) unitTarget(f *logFile, pos int64, u *ftimer.Unit) {
	off := u.Offset
	st := u.DeliverMs() / s.cfg.PrecisionMs * s.cfg.PrecisionMs
	keep := s.keep(st)
	if !keep && s.pre != nil && s.pre.clean(off) {
		if _, decided := s.endTarget(u); !decided {
			return // the commitlog scan found its target to check out, and nothing else needs it
		}
	}
	t := s.keptTarget(u, keep)
	if !s.clean(u, &t) {
		if !t.full {
			t = s.target(u, true)
		}
		s.unitFindings(f, pos, u, &t)
	}
	if s.cpPresent && st >= s.cp.LastReadTimeMs && st < s.readFrom && !u.Delete() {
		s.expired = append(s.expired, expiredUnit{off: off, deliverMs: u.DeliverMs(), offsetPy: u.OffsetPy, sizePy: u.SizePy,
			uniqKey: t.uniqKey, msgID: t.msgID, realTopic: t.realTopic})
	}
	if st >= s.readFrom {
		if pu, ok := s.pending[off]; ok {
			pu.t = t
		}
	}
	if s.opts.Records != nil {
		_ = s.opts.Records(UnitRecord{Path: f.rel, Offset: pos, Size: ftimer.UnitSize, MsgID: t.msgID, Kind: "timer_unit",
			TimerOffset: off, PrevPos: u.PrevPos, Magic: u.Magic, Flags: ftimer.MagicFlags(u.Magic), WriteMs: u.CurrWriteTimeMs,
			DelayedMs: u.DelayedMs, DeliverMs: u.DeliverMs(), OffsetPy: u.OffsetPy, SizePy: u.SizePy, HashTopic: u.HashTopic,
			RealTopic: t.realTopic, UniqKey: t.uniqKey, Target: t.state})
	}
}

// sameSlot reads the unit at off again (a prevPos that is not the slot's
// last unit in log order) and reports whether it has slot time slotT.
func (s *scanner) sameSlot(off, slotT int64) bool {
	i := s.fileOf(off)
	if i < 0 {
		return false
	}
	fh, err := storefile.Open(s.files[i].path)
	if err != nil {
		return false
	}
	defer fh.Close()
	var b [ftimer.UnitSize]byte
	if _, err := fh.ReadAt(b[:], off-s.files[i].base); err != nil {
		return false
	}
	u, err := ftimer.DecodeUnit(b[:], off)
	return err == nil && u.Valid() && u.DeliverMs()/s.cfg.PrecisionMs == slotT
}

// reviseSlot is TimerWheel.reviseSlot(timeMs, IGNORE, lastPos, force=true).
func (s *scanner) reviseSlot(timeMs, lastPos int64) {
	s.reviseSlotAt(timeMs/s.cfg.PrecisionMs, lastPos)
}

// reviseSlotAt is reviseSlot for slot time slotT (timeMs/PrecisionMs,
// which the walk has already divided out: ftimer.SlotIndex of timeMs).
func (s *scanner) reviseSlotAt(slotT, lastPos int64) {
	idx := slotT % ftimer.WheelSlots
	if idx < 0 {
		idx += ftimer.WheelSlots
	}
	e, added := s.revised.ref(idx)
	if added {
		e.wheel, e.inWheel = s.wheel.get(idx)
		e.sl = e.wheel
	}
	if e.sl.Time != slotT {
		e.sl.Time, e.sl.FirstPos, e.sl.LastPos = slotT, lastPos, lastPos
	} else {
		e.sl.LastPos = lastPos
	}
	if !e.differs() {
		// Back to what the wheel says (a healthy slot's last unit): revised
		// holds only the slots that differ, so memory follows the slots
		// whose units are still being walked, not all the store's.
		s.revised.del(idx)
	}
}

// revisedSlot is a slot of the wheel that recovery's reviseSlot left
// other than the wheel's: what it made of the slot, and what the wheel
// holds there (looked up once, when the slot first differs).
type revisedSlot struct {
	sl, wheel ftimer.Slot
	inWheel   bool
}

// differs reports whether the revisions left the slot other than the
// wheel's.
func (r *revisedSlot) differs() bool { return !r.inWheel || r.sl != r.wheel }

// eachRevised calls fn for every non-zero slot of the wheel after
// recovery's revisions, in no order: the wheel's own slots, except those
// revised holds (it keeps only the slots that differ, so a healthy store
// does not hold the wheel twice), then those.
func (s *scanner) eachRevised(fn func(idx int, sl ftimer.Slot)) {
	s.wheel.each(func(i int64, sl ftimer.Slot) {
		if _, ok := s.revised.get(i); !ok {
			fn(int(i), sl)
		}
	})
	s.revised.each(func(i int64, r revisedSlot) { fn(int(i), r.sl) })
}

// Property keys target looks up, in this order.
var targetKeys = []string{PropRealTopic, PropRealQueueID, PropOutMs, PropDelUniqKey, rmq.PropUniqKey}

// target looks up what u points at in the commitlog. With full it also
// keeps the strings (ids, topics) a pending unit or a finding needs;
// without, it allocates nothing for a unit that checks out.
func (s *scanner) target(u *ftimer.Unit, full bool) target {
	if t, ok := s.endTarget(u); ok {
		t.full = full
		return t
	}
	m, err := s.cl.RecordAt(u.OffsetPy)
	return s.rv.resolve(u, &m, err, full)
}

// keptTarget is target(u, full) for the unit u of the timerlog: the one
// the prepass tap kept for it (Prepass.captureFrom) when the recovery end
// does not decide it, else looked up.
func (s *scanner) keptTarget(u *ftimer.Unit, full bool) target {
	if full && s.kept != nil && s.pre != nil && s.cl != nil {
		if kt, ok := s.kept[s.pre.step(u.Offset)]; ok {
			if _, decided := s.endTarget(u); !decided {
				s.keptUsed++
				return *kt
			}
		}
	}
	return s.target(u, full)
}

// endTarget is the target of a unit that the commitlog's recovery end
// decides (no log, at or past the end) without reading the record.
func (s *scanner) endTarget(u *ftimer.Unit) (target, bool) {
	t := target{outMs: -1, hashOK: true}
	switch {
	case s.cl == nil:
		t.state, t.detail = TargetBeyondEnd, "no commitlog"
	case s.cfg.RecoveryEndUnknown != "" && u.OffsetPy >= 0 && u.OffsetPy+int64(u.SizePy) > s.end:
		t.state, t.detail = TargetUnknown, s.cfg.RecoveryEndUnknown
	case u.OffsetPy == s.end:
		t.state = TargetAtEnd
	case u.OffsetPy < 0 || u.OffsetPy+int64(u.SizePy) > s.end:
		t.state = TargetBeyondEnd
	default:
		return t, false
	}
	return t, true
}

// resolver turns the commitlog record a unit points at into its target;
// it keeps the property lookups' scratch and the topic hashes, so each
// goroutine that resolves targets has its own.
type resolver struct {
	pvals  [5][]byte // property values (targetKeys)
	pfound [5]bool
	hashes map[string]int32 // REAL_TOPIC -> Java hash
	recent []topicHashed    // topicHash's first topics (cap 8)
}

func newResolver() *resolver {
	return &resolver{hashes: map[string]int32{}, recent: make([]topicHashed, 0, 8)}
}

// resolve is the target of u given what RecordAt returned for its offset.
func (r *resolver) resolve(u *ftimer.Unit, m *rmq.Message, err error, full bool) target {
	t := target{outMs: -1, full: full, hashOK: true}
	structural := m.Raw != nil && (err == nil || errors.Is(err, format.ErrChecksum) || errors.Is(err, rmq.ErrStale))
	if !structural {
		t.state = TargetNotRecord
		if err != nil {
			t.detail = err.Error()
		}
		return t
	}
	t.queueID, t.queueOff, t.size = m.QueueID, m.QueueOffset, m.TotalSize
	isTimer := string(m.Topic) == Topic
	rmq.LookupProperties(m.Properties, targetKeys, r.pvals[:], r.pfound[:])
	if r.pfound[2] {
		if n, err := strconv.ParseInt(string(r.pvals[2]), 10, 64); err == nil {
			t.outMs = n
		}
	}
	t.hasDelKey = r.pfound[3]
	if r.pfound[0] {
		t.hashOK = r.topicHash(r.pvals[0]) == u.HashTopic
	}
	// getMessageByCommitOffset: getData(offsetPy, sizePy) then
	// MessageDecoder.decode, which needs the whole record in the buffer.
	t.readable = m.TotalSize <= u.SizePy
	switch {
	case err != nil:
		t.state, t.detail = TargetNotRecord, err.Error()
	case m.TotalSize != u.SizePy:
		t.state = TargetSize
	case !isTimer:
		t.state = TargetTopic
	default:
		t.state = TargetOK
	}
	if full || t.state != TargetOK {
		t.full = true
		t.topic, t.msgID = string(m.Topic), m.MsgID()
		if r.pfound[0] {
			t.realTopic = string(r.pvals[0])
		}
		if r.pfound[1] {
			t.realQID = string(r.pvals[1])
		}
		if r.pfound[3] {
			t.delKey = string(r.pvals[3])
		}
		if r.pfound[4] {
			t.uniqKey = string(r.pvals[4])
		}
	}
	return t
}

// tapKeys are the properties checksOut looks up: what unitClean reads of
// a target (REAL_TOPIC's hash, TIMER_OUT_MS, whether TIMER_DEL_UNIQKEY is
// there), not the ids and queue that only a finding or a pending unit
// keeps.
var tapKeys = []string{PropRealTopic, PropOutMs, PropDelUniqKey}

// checksOut is unitClean(u, r.resolve(u, m, nil, false)) for a record the
// commitlog walk accepted (m decoded with no error), without building the
// target: the prepass tap's test, once per timer record of the log.
func (r *resolver) checksOut(u *ftimer.Unit, m *rmq.Message) bool {
	if m.Raw == nil || m.TotalSize != u.SizePy || !isTimerTopic(m.Topic) {
		return false
	}
	lookupTapKeys(m.Properties, r.pvals[:3], r.pfound[:3])
	if !r.pfound[1] {
		return false
	}
	outMs, ok := parseMs(r.pvals[1])
	if !ok || outMs < 0 {
		return false
	}
	if u.Delete() && !r.pfound[2] {
		return false
	}
	if r.pfound[0] && r.topicHash(r.pvals[0]) != u.HashTopic {
		return false
	}
	d := u.DeliverMs()
	return !u.Roll() && d == outMs || u.Roll() && d <= outMs
}

// timerTopicWords are Topic's bytes 0-7, 8-15 and 11-18, little-endian.
var timerTopicWords = [3]uint64{binary.LittleEndian.Uint64([]byte(Topic)), binary.LittleEndian.Uint64([]byte(Topic)[8:]),
	binary.LittleEndian.Uint64([]byte(Topic)[len(Topic)-8:])}

// isTimerTopic is string(b) == Topic in three 8-byte comparisons (the
// tap asks it of every record; a string comparison was a call).
func isTimerTopic(b []byte) bool {
	const _ = uint(len(Topic) - 17) // three overlapping words cover 17-24 bytes
	const _ = uint(24 - len(Topic))
	le := binary.LittleEndian
	return len(b) == len(Topic) && le.Uint64(b) == timerTopicWords[0] && le.Uint64(b[8:]) == timerTopicWords[1] &&
		le.Uint64(b[len(Topic)-8:]) == timerTopicWords[2]
}

// lookupTapKeys is rmq.LookupProperties(raw, tapKeys, vals, found): a
// segment's first bytes pick the one key it can be (R: REAL_TOPIC, T and
// O at 6: TIMER_OUT_MS, other T: TIMER_DEL_UNIQKEY), so a segment costs
// one comparison, not one per key, and the separators come 64 bytes at a
// time as a bit mask (bytemask), not from a bytes.IndexByte call per
// segment. FuzzLookupTapKeys keeps it equal to LookupProperties.
func lookupTapKeys(raw []byte, vals [][]byte, found []bool) {
	_, _ = vals[2], found[2]
	found[0], found[1], found[2] = false, false, false
	start := 0
	for base := 0; base <= len(raw); base += 64 {
		m := bytemask.Eq(raw[base:], rmq.PropertySeparator)
		if len(raw)-base < 64 {
			m |= 1 << (len(raw) - base) // the end of raw ends the last segment
		}
		for ; m != 0; m &= m - 1 {
			end := base + bits.TrailingZeros64(m)
			seg := raw[start:end]
			start = end + 1
			if len(seg) < 3 {
				continue
			}
			switch {
			case seg[0] == 'R':
				const key = PropRealTopic + "\x01"
				if len(seg) > len(key) && string(seg[:len(key)]) == key {
					vals[0], found[0] = seg[len(key):], true
				}
			case seg[0] != 'T':
			case len(seg) > 6 && seg[6] == 'O':
				const key = PropOutMs + "\x01"
				if len(seg) > len(key) && string(seg[:len(key)]) == key {
					vals[1], found[1] = seg[len(key):], true
				}
			default:
				const key = PropDelUniqKey + "\x01"
				if len(seg) > len(key) && string(seg[:len(key)]) == key {
					vals[2], found[2] = seg[len(key):], true
				}
			}
		}
	}
}

// topicHash is the Java hash of a REAL_TOPIC: a short one hashed each
// time, a longer one remembered per topic (the first few topics in a
// small table searched without a map lookup or a string: a log's timer
// records have few topics; the rest in a map).
func (r *resolver) topicHash(topic []byte) int32 {
	if len(topic) <= shortTopic {
		return rmq.JavaHashCode(topic) // as quick as finding it in the table
	}
	for i := range r.recent {
		if string(topic) == r.recent[i].name {
			return r.recent[i].hash
		}
	}
	h, ok := r.hashes[string(topic)]
	if !ok {
		h = rmq.JavaHashCode(topic)
		r.hashes[string(topic)] = h
		if len(r.recent) < cap(r.recent) {
			r.recent = append(r.recent, topicHashed{name: string(topic), hash: h})
		}
	}
	return h
}

// shortTopic is the longest topic topicHash hashes every time rather
// than remembering it: a few multiply-adds against a search of the table
// with a string comparison per topic in it.
const shortTopic = 32

type topicHashed struct {
	name string
	hash int32
}

// parseMs is strconv.ParseInt(string(b), 10, 64) without the string: a
// run of 9-16 digits (a time in ms has 13) eight digits at a time, one
// of up to 18 digit by digit, anything else through ParseInt.
func parseMs(b []byte) (int64, bool) {
	if n := len(b); n > 8 && n <= 16 {
		le := binary.LittleEndian
		hi, lo := le.Uint64(b), le.Uint64(b[n-8:]) // the first and the last eight digits
		if digits8(hi) && digits8(lo) {
			// The first n-8 digits as the last of eight, behind '0's.
			k := uint(n - 8)
			hi = hi<<(8*(8-k)) | 0x3030303030303030>>(8*k)
			return int64(value8(hi))*1e8 + int64(value8(lo)), true
		}
	}
	if n := len(b); n > 0 && n <= 18 {
		v := int64(0)
		for _, c := range b {
			if c < '0' || c > '9' {
				goto slow
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
slow:
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// digits8 reports whether the eight bytes of w are all ASCII digits: a
// byte below '0' sets its top bit in w-0x30.., one above '9' in
// w+0x46..; a byte neither borrows nor carries, so the lowest byte that
// is not a digit always shows.
func digits8(w uint64) bool {
	return ((w-0x3030303030303030)|(w+0x4646464646464646))&0x8080808080808080 == 0
}

// value8 is the number the eight ASCII digits of w spell, its lowest byte
// the first (most significant) digit: pairs, then fours, then the eight.
func value8(w uint64) uint64 {
	w -= 0x3030303030303030
	w = (w*10 + w>>8) & 0x00ff00ff00ff00ff
	w = (w*100 + w>>16) & 0x0000ffff0000ffff
	return (w*10000 + w>>32) & 0xffffffff
}

// clean reports whether a unit whose target is t needs no finding.
func (s *scanner) clean(u *ftimer.Unit, t *target) bool { return unitClean(u, t) }

func unitClean(u *ftimer.Unit, t *target) bool {
	if t.state != TargetOK || t.outMs < 0 || !t.hashOK || u.Delete() && !t.hasDelKey {
		return false
	}
	d := u.DeliverMs()
	return !u.Roll() && d == t.outMs || u.Roll() && d <= t.outMs
}

func (s *scanner) unitFindings(f *logFile, pos int64, u *ftimer.Unit, t *target) {
	ev := map[string]string{"magic": "pass", "size": "pass"}
	base := scan.Finding{Path: f.rel, Offset: pos, Length: ftimer.UnitSize, Repair: scan.RepairTruncate,
		Details: map[string]any{"timer_offset": u.Offset, "offset_py": u.OffsetPy, "size_py": u.SizePy, "deliver_ms": u.DeliverMs(),
			"magic": ftimer.MagicFlags(u.Magic), "commitlog_end": s.end}, MsgID: t.msgID, Evidence: ev}
	if t.state == TargetUnknown {
		// Its record may be there: counted in one CodeTargetUnknown.
		if s.endUnknown == 0 {
			s.endUnknownAt = u.Offset
		}
		s.endUnknown++
		return
	}
	if u.Delete() && !u.Roll() && t.state != TargetOK {
		// A DELETE marker without its record fires nothing (the dequeue
		// skips it): this is how truncate neutralises a stale unit.
		s.neutral++
		return
	}
	switch t.state {
	case TargetBeyondEnd:
		f := base
		f.Code, f.Severity, f.Evidence["target"] = CodeUnitBeyondEnd, scan.Error, "fail"
		f.Expected, f.Actual = fmt.Sprintf("offset_py + size_py <= %d", s.end), fmt.Sprint(u.OffsetPy+int64(u.SizePy))
		f.Message = "timer unit points past the commitlog's recovery end (apache/rocketmq #10668): its message is gone and the dequeue fails to read it three times per pass"
		s.add(f)
	case TargetAtEnd:
		f := base
		f.Code, f.Severity, f.Evidence["target"] = CodeUnitAtRecoveryEnd, scan.Error, "fail"
		f.Expected, f.Actual = "a record below the recovery end", fmt.Sprint(u.OffsetPy)
		f.Message = "timer unit points exactly at the commitlog's recovery end (#10668): its message is gone, and the first record the broker writes there after the restart is delivered again through this unit"
		s.add(f)
	case TargetNotRecord:
		f := base
		f.Code, f.Severity, f.Evidence["target"] = CodeUnitNotRecord, scan.Error, "fail"
		f.Details["error"] = t.detail
		f.Message = "timer unit points at an offset where no valid commitlog record starts (a reused or damaged offset, #10668)"
		s.add(f)
	case TargetSize:
		f := base
		f.Code, f.Severity, f.Evidence["target"] = CodeUnitSizeMismatch, scan.Error, "fail"
		f.Expected, f.Actual = fmt.Sprint(u.SizePy), fmt.Sprint(t.size)
		f.Message = "the commitlog record at the unit's offset has another size: the offset was reused by another record (#10668)"
		s.add(f)
	case TargetTopic:
		f := base
		f.Code, f.Severity, f.Evidence["target"] = CodeUnitWrongTopic, scan.Error, "fail"
		f.Expected, f.Actual = Topic, t.topic
		f.Message = "the record at the unit's offset is not a timer message: the offset was reused (#10668) and the dequeue would deliver this other message again"
		s.add(f)
	}
	if t.state != TargetOK {
		return
	}
	if t.outMs < 0 {
		f := base
		f.Code, f.Severity, f.Repair = CodeStuckEnqueue, scan.Error, scan.RepairNone
		f.Message = "the timer message has no TIMER_OUT_MS property: the timer enqueue throws on it and holds (timerSkipUnknownError is off by default)"
		s.add(f)
	} else if d := u.DeliverMs(); !u.Roll() && d != t.outMs || u.Roll() && d > t.outMs {
		f := base
		f.Code, f.Severity, f.Repair = CodeUnitDeliverTime, scan.Warning, scan.RepairNone
		f.Expected, f.Actual = fmt.Sprint(t.outMs), fmt.Sprint(d)
		f.Message = "the unit's deliver time (currWriteTime + delayedTime) does not match the message's TIMER_OUT_MS"
		s.add(f)
	}
	if !t.hashOK {
		f := base
		f.Code, f.Severity, f.Repair = CodeUnitTopicHash, scan.Warning, scan.RepairNone
		f.Expected, f.Actual = fmt.Sprint(rmq.JavaHashCode([]byte(t.realTopic))), fmt.Sprint(u.HashTopic)
		f.Message = "the unit's topic hash is not the hash of the message's REAL_TOPIC"
		s.add(f)
	}
	if u.Delete() && !t.hasDelKey {
		f := base
		f.Code, f.Severity, f.Repair = CodeUnitNoDeleteKey, scan.Warning, scan.RepairNone
		f.Message = "a DELETE unit whose message has no TIMER_DEL_UNIQKEY: it cancels nothing"
		s.add(f)
	}
}

// UnitRecord is the `record` of one timer unit (scan --records).
type UnitRecord struct {
	Path        string `json:"path"`
	Offset      int64  `json:"offset"`
	Size        int64  `json:"size"`
	MsgID       string `json:"msg_id"`
	Kind        string `json:"kind"` // "timer_unit"
	TimerOffset int64  `json:"timer_offset"`
	PrevPos     int64  `json:"prev_pos"`
	Magic       int32  `json:"magic"`
	Flags       string `json:"magic_flags"`
	WriteMs     int64  `json:"curr_write_time_ms"`
	DelayedMs   int32  `json:"delayed_ms"`
	DeliverMs   int64  `json:"deliver_ms"`
	OffsetPy    int64  `json:"offset_py"`
	SizePy      int32  `json:"size_py"`
	HashTopic   int32  `json:"hash_topic"`
	RealTopic   string `json:"real_topic,omitempty"`
	UniqKey     string `json:"uniq_key,omitempty"`
	Target      string `json:"target"` // ok | beyond-end | at-end | not-a-record | size-mismatch | wrong-topic
}
