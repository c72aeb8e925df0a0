package timer

import (
	ftimer "github.com/storectl/storectl/pkg/format/timer"
)

// Summary is Result.Extra["timer"].
type Summary struct {
	Units         int       `json:"units"`
	TimerLogEnd   int64     `json:"timerlog_end"`
	TimerLogFiles int       `json:"timerlog_files"`
	LogFileSize   int64     `json:"timerlog_file_size"`
	WheelSlots    int       `json:"wheel_slots"` // non-zero slots on disk
	CommitLogEnd  int64     `json:"commitlog_end"`
	Neutralised   int       `json:"neutralised_units"` // DELETE markers without a target (truncate's fix)
	Checkpoint    *CheckSum `json:"timercheck,omitempty"`
	Recovery      *Recovery `json:"recovery,omitempty"`
	// Unread: the parts of the timerlog that could not be read (coverage:
	// nothing is judged through them). TimerLogEnd is then the end of the
	// units read, and the log may go on in an unread part past it.
	Unread []UnreadPart `json:"unread,omitempty"`
}

// UnreadPart is a byte range of a timerlog file that was not read.
type UnreadPart struct {
	Path        string `json:"path"`
	Offset      int64  `json:"offset"` // in the file
	Length      int64  `json:"length"`
	TimerOffset int64  `json:"timer_offset"` // of its first byte
	Error       string `json:"error"`
}

// CheckSum is the checkpoint as read.
type CheckSum struct {
	LastReadTimeMs         int64 `json:"last_read_time_ms"`
	LastTimerLogFlushPos   int64 `json:"last_timerlog_flush_pos"`
	LastTimerQueueOffset   int64 `json:"last_timer_queue_offset"`
	MasterTimerQueueOffset int64 `json:"master_timer_queue_offset"`
}

func (s *scanner) summary() *Summary {
	sm := &Summary{Units: s.units, TimerLogEnd: s.logEnd, TimerLogFiles: len(s.files), LogFileSize: s.logSize,
		WheelSlots: s.wheel.len(), CommitLogEnd: s.end, Neutralised: s.neutral, Recovery: s.rec}
	for _, r := range s.unread {
		f := &s.files[r.file]
		sm.Unread = append(sm.Unread, UnreadPart{Path: f.rel, Offset: r.from - f.base, Length: r.to - r.from, TimerOffset: r.from, Error: r.err.Error()})
	}
	if s.cpPresent {
		sm.Checkpoint = &CheckSum{s.cp.LastReadTimeMs, s.cp.LastTimerLogFlushPos, s.cp.LastTimerQueueOffset, s.cp.MasterTimerQueueOffset}
	}
	return sm
}

// readTime is recover()'s currReadTimeMs: the checkpoint's read time, but
// no earlier than the oldest slot the 7-day wheel still holds.
func (s *scanner) readTime() int64 {
	p := s.cfg.PrecisionMs
	now := s.cfg.Now.UnixMilli() / p * p
	oldest := now - ftimer.SlotsTotal*p + ftimer.BlankSlots*p
	return max(s.cp.LastReadTimeMs, oldest)
}
