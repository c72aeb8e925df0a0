package timer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/storefile"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
)

// readWheel loads the non-zero slots of the timerwheel.
func (s *scanner) readWheel(context.Context) error {
	p := filepath.Join(s.cfg.Root, WheelFile)
	fh, err := storefile.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		s.add(scan.Finding{Code: CodeWheelMissing, Severity: scan.Warning, Path: WheelFile,
			Message: "the timerwheel file is missing: the broker creates an empty one, and only the slots recovery revises from the timerlog are found again"})
		return nil
	}
	if err != nil {
		s.fileUnreadable(WheelFile, err, true)
		return nil
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		s.fileUnreadable(WheelFile, err, true)
		return nil
	}
	f := scan.File{Path: WheelFile, Kind: "timerwheel", Size: st.Size(), FirstValid: -1, LastValid: -1, End: scan.EndEOF}
	if st.Size() == 0 {
		f.End = scan.EndShort
		s.res.Files = append(s.res.Files, f)
		s.add(scan.Finding{Code: CodeWheelStale, Severity: scan.Info, Path: WheelFile,
			Message: "the timerwheel is empty: the broker extends it to its full size; only the slots recovery revises from the timerlog are found again"})
		return nil
	}
	if st.Size() != ftimer.WheelSize {
		f.End = scan.EndShort
		s.res.Files = append(s.res.Files, f)
		s.add(scan.Finding{Code: CodeWheelBadSize, Severity: scan.Error, Path: WheelFile, Length: st.Size(),
			Expected: fmt.Sprint(ftimer.WheelSize), Actual: fmt.Sprint(st.Size()),
			Message: "the timerwheel is not 38,707,200 bytes: TimerWheel's constructor throws (\"Timer wheel length\") and the broker does not start"})
		return nil
	}
	ra, err := sparse.NewReaderAt(fh, st.Size())
	if err != nil {
		s.fileUnreadable(WheelFile, err, true)
		return nil
	}
	err = ftimer.ReadWheel(ra, st.Size(), func(i int, sl ftimer.Slot) error {
		s.wheel.put(int64(i), sl)
		if f.FirstValid < 0 {
			f.FirstValid = int64(i) * ftimer.SlotSize
		}
		f.LastValid = int64(i) * ftimer.SlotSize
		return nil
	})
	if err != nil {
		s.wheel = slotTable[ftimer.Slot]{} // a part read is not the wheel
		s.fileUnreadable(WheelFile, err, true)
		return nil
	}
	f.Records, f.ValidEnd = s.wheel.len(), st.Size()
	f.BytesScanned = st.Size()
	s.res.BytesScanned += st.Size()
	s.res.Files = append(s.res.Files, f)
	s.wheelOK = true
	return nil
}

// checkWheel compares every non-zero slot with the timerlog.
func (s *scanner) checkWheel(context.Context) error {
	if !s.wheelOK {
		return nil
	}
	idx := make([]int, 0, s.wheel.len())
	s.wheel.each(func(i int64, _ ftimer.Slot) { idx = append(idx, int(i)) })
	sort.Ints(idx)
	behind := 0
	for _, i := range idx {
		sl, _ := s.wheel.get(int64(i))
		off := int64(i) * ftimer.SlotSize
		tm := sl.TimeMs(s.cfg.PrecisionMs)
		if ftimer.SlotIndex(tm, s.cfg.PrecisionMs) != i {
			s.add(scan.Finding{Code: CodeWheelSlotTime, Severity: scan.Warning, Path: WheelFile, Offset: off, Length: ftimer.SlotSize,
				Expected: fmt.Sprintf("time for slot %d", i), Actual: fmt.Sprint(tm),
				Message: "the slot's stored time does not belong at this index: getSlot ignores the slot and its units are not dequeued from it"})
			continue
		}
		for _, p := range []struct {
			name string
			pos  int64
		}{{"firstPos", sl.FirstPos}, {"lastPos", sl.LastPos}} {
			switch {
			case (p.pos >= s.logEnd || p.pos < 0) && s.unread != nil && s.slotUnread(p.pos):
				// Into bytes not read: unknown, not past the log.
			case (p.pos >= s.logEnd || p.pos < 0) && (s.unread == nil || p.pos < 0 || p.pos >= s.logEndMax()):
				s.add(scan.Finding{Code: CodeWheelPastLog, Severity: scan.Error, Path: WheelFile, Offset: off, Length: ftimer.SlotSize,
					Expected: fmt.Sprintf("%s < %d (timerlog end)", p.name, s.logEnd), Actual: fmt.Sprint(p.pos),
					Details: map[string]any{"slot_index": i, "slot_time_ms": tm, p.name: p.pos, "timerlog_end": s.logEnd},
					Message: fmt.Sprintf("the slot's %s points past the end of the timerlog: the dequeue of this slot reads nothing there (recovery re-walks the log from the lowest such firstPos)", p.name)})
			case !s.isUnit(p.pos) && (s.unread == nil || !s.slotUnread(p.pos)):
				// (Past the last unit read but short of the end of a range
				// not read: not past the log, but not a unit either.)
				s.add(scan.Finding{Code: CodeWheelBadUnit, Severity: scan.Error, Path: WheelFile, Offset: off, Length: ftimer.SlotSize,
					Expected: p.name + " at a unit", Actual: fmt.Sprint(p.pos),
					Details: map[string]any{"slot_index": i, "slot_time_ms": tm},
					Message: fmt.Sprintf("the slot's %s does not point at a timer unit", p.name)})
			}
		}
		if last, ok := s.lastInSlot.get(sl.Time); ok && last > sl.LastPos {
			behind++
		}
	}
	if behind > 0 {
		f := scan.Finding{Code: CodeWheelStale, Severity: scan.Info, Path: WheelFile, Details: map[string]any{"slots_behind": behind},
			Message: fmt.Sprintf("%d wheel slots are behind the timerlog (the wheel is flushed lazily, a clean stop does not flush it); recovery revises the slots of the units it re-walks", behind)}
		s.atLeast(&f, 0) // the units of the parts not read may put more slots behind
		s.add(f)
	}
	return nil
}

// checkCheckpoint compares config/timercheck with the timerlog and the
// timer consume queue.
func (s *scanner) checkCheckpoint(context.Context) error {
	if !s.cpPresent {
		return nil
	}
	if s.cp.LastTimerLogFlushPos > s.logEnd && (s.unread == nil || s.cp.LastTimerLogFlushPos > s.logEndMax()) {
		s.add(scan.Finding{Code: CodeCheckAheadLog, Severity: scan.Warning, Path: CheckFile, Offset: 8, Length: 8,
			Expected: fmt.Sprintf("<= %d", s.logEnd), Actual: fmt.Sprint(s.cp.LastTimerLogFlushPos),
			Message: "the checkpoint's timerlog flush position is past the timerlog's last unit: units it counted as flushed are gone"})
	}
	return nil
}
