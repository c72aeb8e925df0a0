package timer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
)

// scanner carries the state of one Scan.
type scanner struct {
	cfg     Config
	res     *scan.Result
	opts    scan.Options
	cl      CommitLog
	own     *FileCommitLog // cl when the scan opened it (closed at its end)
	present bool           // the root has a timer store
	end     int64          // commitlog recovery end
	capped  map[string]int

	cp        ftimer.Checkpoint
	cpPresent bool
	files     []logFile
	logSize   int64 // timerlog mapped file size
	logEnd    int64 // timerlog offset past the last unit of the whole walk

	// The broker's recovery walk (recoverAndRevise with check on).
	beginFile int   // index into files where it starts
	process   int64 // processOffset: where it stops
	stopped   bool  // the walk stopped before the last file's end
	dropped   int   // units past the stop point
	// recUnknown: the walk went into this timerlog file (relative path),
	// which could not be read: where it stops is unknown (process is
	// where the unread bytes begin, a lower bound), and so is what the
	// next start does with the pending messages.
	recUnknown string
	unread     []unreadRange // the parts of the timerlog not read (nil: all read)

	units      int
	validPos   []uint64               // bit per 52-byte step of the log: a unit recovery accepts sits here
	lastInSlot slotTable[int64]       // slot time -> offset of the last unit seen with it
	wheel      slotTable[ftimer.Slot] // the on-disk wheel's non-zero slots, by index
	revised    slotTable[revisedSlot] // the slots recovery's reviseSlot left other than the wheel's (eachRevised)
	wheelOK    bool
	pending    map[int64]*pendingUnit // units whose slot is read again at the next start, by offset
	readFrom   int64                  // currReadTimeMs the broker will use
	rec        *Recovery
	neutral    int // units storectl neutralised (DELETE markers without a target)
	// predictWaits: a timer store file the prediction reads that could
	// not be read (fileUnreadable): the next start is not predicted.
	predictWaits string
	// endUnknown counts the units pointing at or past a recovery end that
	// is only a lower bound (Config.RecoveryEndUnknown), the first at
	// endUnknownAt (a timerlog offset).
	endUnknown   int
	endUnknownAt int64
	expired      []expiredUnit
	rv           *resolver // target's record lookups
	pre          *Prepass  // what the commitlog's own scan found of the units' targets (nil: none)

	// deferTargets: the walk checks the units' frames only and notes them
	// in spans; checkTargets checks their targets once the commitlog scan
	// is done (Prepass.Begin).
	deferTargets bool
	spans        []unitSpan
	tail         *tailReputs // readTail's, for predict (nil: predict reads the tail)
	// tapTail: the prepass tap collects the re-puts of the files readTail
	// would read (Prepass.Begin planned them), so readTail does not.
	tapTail bool
	cqCh    chan *timerCQ // cqAhead's result, for predict (nil: predict reads it)
	// kept: the targets the prepass tap kept, by step (keptTarget);
	// keptUsed counts those used.
	kept     map[int64]*target
	keptUsed int
	dq       dequeueScratch // dequeueSlot's
}

// expiredUnit is a unit due between the checkpoint's read time and the
// oldest slot a start now still reads (the 7-day TTL).
type expiredUnit struct {
	off       int64
	deliverMs int64
	offsetPy  int64
	sizePy    int32
	uniqKey   string
	msgID     string
	realTopic string
}

// logFile is one timerlog file.
type logFile struct {
	name string
	rel  string
	path string
	base int64
	size int64
	end  int64 // file position past its last unit
	kind string
	step int64 // stepIndex of its first byte
	// openErr: the entry is not a regular file (or is gone): it is never
	// opened, and its size is taken to be the log's file size.
	openErr error
}

func (s *scanner) readCheckpoint(context.Context) error {
	b, err := storefile.ReadFile(filepath.Join(s.cfg.Root, CheckFile))
	if errors.Is(err, fs.ErrNotExist) {
		s.add(scan.Finding{Code: CodeCheckMissing, Severity: scan.Warning, Path: CheckFile,
			Message: "config/timercheck is missing: timer recovery starts from timerlog offset 0, queue offset 0 and the oldest wheel slot"})
		return nil
	}
	if err != nil {
		s.fileUnreadable(CheckFile, err, true)
		return nil
	}
	s.res.Files = append(s.res.Files, scan.File{Path: CheckFile, Kind: "timercheck", Size: int64(len(b)), BytesScanned: int64(len(b)),
		Records: 1, FirstValid: 0, LastValid: 0, ValidEnd: min(int64(len(b)), ftimer.CheckpointSize), End: scan.EndEOF})
	cp, err := ftimer.DecodeCheckpoint(b, 0)
	if err != nil {
		// TimerCheckpoint maps 4096 bytes: a short file reads as zeros past its end.
		pad := make([]byte, ftimer.CheckpointSize)
		copy(pad, b)
		cp, _ = ftimer.DecodeCheckpoint(pad, 0)
		s.add(scan.Finding{Code: CodeCheckShort, Severity: scan.Warning, Path: CheckFile, Length: int64(len(b)),
			Expected: fmt.Sprint(ftimer.CheckpointFileSize), Actual: fmt.Sprint(len(b)),
			Message: "config/timercheck is shorter than its four offsets: the broker reads the missing bytes as zeros"})
	}
	s.cp, s.cpPresent = cp, true
	return nil
}

// fileUnreadable reports the timer store file rel (the checkpoint, the
// wheel, the metrics) that err kept from being read: a finding naming
// it, the result incomplete, and, when the next start's prediction reads
// it (predicts), that prediction waits on it (predictWaits): it is not
// made from a file taken to be missing or empty.
func (s *scanner) fileUnreadable(rel string, err error, predicts bool) {
	s.res.Unread(rel, err)
	if predicts && s.predictWaits == "" {
		s.predictWaits = rel
	}
}

func (s *scanner) readMetrics(context.Context) error {
	for _, rel := range []string{MetricsFile, MetricsFile + rmq.BakSuffix} {
		b, err := storefile.ReadFile(filepath.Join(s.cfg.Root, rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.fileUnreadable(rel, err, false) // only metrics: the prediction does not use them
			continue
		}
		if _, err := ftimer.DecodeMetrics(b); err != nil && len(b) > 0 {
			var off int64
			if ce := corruptOf(err); ce != nil {
				off = ce.Offset
			}
			s.add(scan.Finding{Code: CodeMetricsBad, Severity: scan.Info, Path: rel, Offset: off,
				Details: map[string]any{"error": err.Error()},
				Message: "the timer metrics do not parse; TimerMetrics.load fails and the broker starts with empty per-topic timer counts (only metrics are affected)"})
		}
	}
	return nil
}

// listLog lists timerlog/ and picks the file size. An entry named by an
// offset that is not a regular file (a FIFO, socket, device, directory or
// dangling symlink in place of a timerlog file) is listed, to be reported
// unread by walkLog, and never opened (an open of a FIFO blocks): its name
// places it in the log, nothing is known of its bytes. A symlink to a
// regular file is read through, as the broker reads it.
func (s *scanner) listLog(context.Context) error {
	dir := filepath.Join(s.cfg.Root, LogDir)
	ents, err := storefile.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := LogDir + "/" + e.Name()
		base, err := rmq.ParseFileName(e.Name())
		if err != nil {
			s.add(scan.Finding{Code: CodeLogBadFileName, Severity: scan.Warning, Path: rel,
				Message: "entry in timerlog/ is not a file named by a 20-digit offset; MappedFileQueue would try to load it"})
			continue
		}
		f := logFile{name: e.Name(), rel: rel, path: filepath.Join(dir, e.Name()), base: base, size: -1}
		if info, err := storefile.Info(dir, e); err != nil {
			f.openErr = err // gone since the listing, a dangling link
		} else if !info.Mode().IsRegular() {
			f.openErr = errors.New(storefile.TypeName(info.Mode().Type()) + ", not a regular file")
		} else {
			f.size = info.Size()
		}
		s.files = append(s.files, f)
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].base < s.files[j].base })
	s.logSize = s.cfg.LogFileSize
	if s.logSize <= 0 && len(s.files) > 0 {
		// The first file whose size is known (MappedFileQueue's files are
		// all one size); with none, the broker's default.
		known := -1
		for i := range s.files {
			if s.files[i].size >= 0 {
				known = i
				break
			}
		}
		if known >= 0 {
			s.logSize = s.files[known].size
		}
		if known < 0 || len(s.files) == 1 && s.files[0].base == 0 && s.logSize == 0 {
			s.logSize = ftimer.DefaultLogFileSize
		}
	}
	for i := range s.files {
		if s.files[i].size < 0 {
			s.files[i].size = max(s.logSize, 0) // where its name puts it; none of its bytes are read
		}
		if s.logSize > 0 {
			s.files[i].step = (s.files[i].base / s.logSize) * (s.logSize/ftimer.UnitSize + 1)
		}
	}
	for i, f := range s.files {
		if f.size != s.logSize && f.openErr == nil {
			s.add(scan.Finding{Code: CodeLogBadFileSize, Severity: scan.Error, Path: f.rel, Length: f.size,
				Expected: fmt.Sprint(s.logSize), Actual: fmt.Sprint(f.size),
				Message: "timerlog file is not the mapped file size: MappedFileQueue.load refuses it and the timer store (and the broker) does not start"})
		}
		if f.base%max(s.logSize, 1) != 0 || i > 0 && f.base != s.files[i-1].base+s.logSize {
			s.add(scan.Finding{Code: CodeLogOffsetGap, Severity: scan.Error, Path: f.rel,
				Message: "timerlog files are not adjacent: the units of the missing range are gone and recovery's file order check fails"})
		}
	}
	return nil
}

// fileOf returns the index of the timerlog file holding offset off, or -1.
func (s *scanner) fileOf(off int64) int {
	// The file the offset's place in equal adjacent files names (the
	// broker's layout), when it is the last file starting at or before
	// off, as the search below finds it; else that search.
	if n := len(s.files); n > 0 && s.logSize > 0 && off >= s.files[0].base {
		if i := (off - s.files[0].base) / s.logSize; i < int64(n) {
			if f := &s.files[i]; f.base <= off && (int(i) == n-1 || s.files[i+1].base > off) {
				if off >= f.base+f.size {
					return -1
				}
				return int(i)
			}
		}
	}
	i := sort.Search(len(s.files), func(i int) bool { return s.files[i].base > off }) - 1
	if i < 0 || off >= s.files[i].base+s.files[i].size {
		return -1
	}
	return i
}

// loc turns a timerlog offset into the file holding it (relative to the
// root) and the position in that file.
func (s *scanner) loc(off int64) (string, int64) {
	if i := s.fileOf(off); i >= 0 {
		return s.files[i].rel, off - s.files[i].base
	}
	if n := len(s.files); n > 0 && off == s.files[n-1].base+s.files[n-1].size {
		return s.files[n-1].rel, s.files[n-1].size
	}
	return LogDir, off
}

// setValid marks the 52-byte step at timerlog offset off as a unit.
func (s *scanner) setValid(off int64) {
	if k := s.stepIndex(off); k >= 0 {
		s.markStep(k)
	}
}

// markStep sets validPos's bit for step k (>= 0).
func (s *scanner) markStep(k int64) {
	for int(k/64) >= len(s.validPos) {
		s.validPos = append(s.validPos, 0)
	}
	s.validPos[k/64] |= 1 << (k % 64)
}

// stepMarked reports validPos's bit for step k (< 0: false).
func (s *scanner) stepMarked(k int64) bool {
	return k >= 0 && int(k/64) < len(s.validPos) && s.validPos[k/64]&(1<<(k%64)) != 0
}

// setStep is setValid(s.files[i].base + pos) for a unit of file i,
// without looking for the file (unless a later file overlaps it).
func (s *scanner) setStep(i int, pos int64) {
	f := &s.files[i]
	if i+1 < len(s.files) && s.files[i+1].base <= f.base+pos {
		s.setValid(f.base + pos)
		return
	}
	if s.logSize <= 0 || pos < 0 || pos >= f.size || pos%ftimer.UnitSize != 0 {
		return
	}
	s.markStep(f.step + pos/ftimer.UnitSize)
}

// isUnitNear is isUnit(off) for an offset that is most likely in file i
// (a unit's prevPos), without looking for the file when it is.
func (s *scanner) isUnitNear(i int, off int64) bool {
	f := &s.files[i]
	pos := off - f.base
	if pos < 0 || pos >= f.size || i+1 < len(s.files) && s.files[i+1].base <= off {
		return s.isUnit(off)
	}
	if s.logSize <= 0 || pos%ftimer.UnitSize != 0 {
		return false
	}
	return s.stepMarked(f.step + pos/ftimer.UnitSize)
}

// isUnit reports whether a unit recovery accepts sits at offset off.
func (s *scanner) isUnit(off int64) bool {
	return s.stepMarked(s.stepIndex(off))
}

// stepIndex numbers the 52-byte steps of the log, file after file.
func (s *scanner) stepIndex(off int64) int64 {
	i := s.fileOf(off)
	if i < 0 || s.logSize <= 0 {
		return -1
	}
	pos := off - s.files[i].base
	if pos%ftimer.UnitSize != 0 {
		return -1
	}
	return s.files[i].step + pos/ftimer.UnitSize // (base/logSize)*(logSize/UnitSize+1) + pos/UnitSize
}

func corruptOf(err error) *formatCorrupt {
	var ce *formatCorrupt
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// unreadRange is a part of the timerlog storectl could not read: from a
// file position of file to the file's end (the whole file when it could
// not be opened, or was not a regular file). Nothing is concluded about a
// position in it: a prevPos or a wheel slot pointing there is unknown, not
// bad, and the prediction does not follow a chain through it.
type unreadRange struct {
	file     int
	from, to int64 // timerlog offsets
	err      error
	// What depended on it: units of the files read whose prevPos points
	// into it, wheel positions (firstPos, lastPos) in it, slots the
	// prediction's dequeue could not follow through it.
	links, slots, chains int
}

// unreadAt is the index in s.unread of the range holding timerlog offset
// off, or -1. Only asked when s.unread is not empty, on a path that would
// otherwise report a finding or stop a chain: a scan that read every file
// never gets here.
func (s *scanner) unreadAt(off int64) int {
	for k := range s.unread {
		if r := &s.unread[k]; off >= r.from && off < r.to {
			return k
		}
	}
	return -1
}

// logEndMax is the highest offset the timerlog may end at: logEnd, or the
// end of an unread range past it (units may fill it).
func (s *scanner) logEndMax() int64 {
	end := s.logEnd
	for _, r := range s.unread {
		end = max(end, r.to)
	}
	return end
}

// fileUnread notes that file i could not be read from file position from
// on (0: not at all): the range is unread, the scan incomplete, and the
// file has no end (its File has End "", which the report turns into a
// storectl.file.unreadable finding). records and bytes are what was read
// of it before. If recovery's walk was to go through it, where that walk
// stops is unknown from here on (recUnknown).
func (s *scanner) fileUnread(i int, from int64, records int, bytes int64, inWalk bool, err error) {
	f := &s.files[i]
	s.unread = append(s.unread, unreadRange{file: i, from: f.base + from, to: f.base + max(f.size, from), err: err})
	s.res.Fail(fmt.Errorf("%s: bytes %d-%d not read: %w", f.rel, from, max(f.size, from), err))
	size := f.size
	if f.openErr != nil {
		size = 0
	}
	s.res.Files = append(s.res.Files, scan.File{Path: f.rel, Kind: "timerlog", Size: size, BytesScanned: bytes,
		Records: records, FirstValid: firstValid(records), LastValid: -1, ValidEnd: 0})
	s.res.BytesScanned += bytes
	if s.opts.Progress != nil && bytes > 0 {
		s.opts.Progress(bytes)
	}
	if inWalk && s.recUnknown == "" {
		s.recUnknown, s.process = f.rel, f.base+from
	}
}

// unreadFindings reports each unread range once the scan is done: its
// bytes and what could not be judged for want of them (rocketmq.timerlog.
// unknown), and the assumption every verdict of the run makes about it.
func (s *scanner) unreadFindings() {
	for _, r := range s.unread {
		f := &s.files[r.file]
		from := r.from - f.base
		s.add(scan.Finding{Code: CodeLogUnknown, Severity: scan.Warning, Path: f.rel, Offset: from, Length: r.to - r.from, Repair: scan.RepairNone,
			Details: map[string]any{"waits_on": []string{f.rel}, "timer_offset": r.from, "timer_offset_end": r.to, "error": r.err.Error(),
				"units": r.links, "slots": r.slots, "chains": r.chains},
			Message: fmt.Sprintf("%s was not read from byte %d to %d (%v): %d units of the files read link into it (prevPos), %d wheel positions and %d slot chains the dequeue follows lead into it; their chains are unknown there, not broken, and the units it holds are not counted",
				f.rel, from, from+r.to-r.from, r.err, r.links, r.slots, r.chains)})
		s.res.Assume(fmt.Sprintf("%s could not be read (timerlog offsets %d-%d): no slot chain, wheel slot or timer message outcome is judged through it, and what it holds is not counted", f.rel, r.from, r.to))
	}
}

// linksUnread reports whether prevPos off points into an unread range,
// and counts the link there.
func (s *scanner) linksUnread(off int64) bool {
	k := s.unreadAt(off)
	if k >= 0 {
		s.unread[k].links++
	}
	return k >= 0
}

// slotUnread reports whether a wheel slot's position off is in an unread
// range, and counts it there.
func (s *scanner) slotUnread(off int64) bool {
	k := s.unreadAt(off)
	if k >= 0 {
		s.unread[k].slots++
	}
	return k >= 0
}
