package timer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// Outcomes of one timer message at the next start.
const (
	OutcomeRestore   = "restore"           // delivered once, by the restarted broker
	OutcomeDelivered = "already-delivered" // delivered before the stop, not again
	OutcomeDuplicate = "duplicate"         // delivered more than once in all
	OutcomeLost      = "lost"              // never delivered
	OutcomeRoll      = "pending-roll"      // re-enqueued for a later round (delay past the roll window)
	OutcomeCancelled = "cancelled"         // a DELETE marker cancels it
	OutcomeUnknown   = "unknown"           // its slot's chain runs through timerlog bytes storectl could not read
)

// Recovery is the predicted timer recovery (TimerMessageStore.recover)
// and what the dequeue and enqueue do after it, per message.
type Recovery struct {
	BeginOffset     int64  `json:"begin_offset"`      // timerlog offset recovery re-walks from
	ProcessOffset   int64  `json:"process_offset"`    // timerlog offset it keeps up to
	CurrQueueOffset int64  `json:"curr_queue_offset"` // next rmq_sys_wheel_timer/0 offset enqueued
	QueueOffsetFrom string `json:"queue_offset_from"` // "last-unit" or "checkpoint"
	CurrReadTimeMs  int64  `json:"curr_read_time_ms"` // first wheel slot the dequeue reads
	TimerCQMin      int64  `json:"timer_cq_min"`
	TimerCQMax      int64  `json:"timer_cq_max"`
	Reenqueued      int64  `json:"reenqueued"` // timer CQ entries enqueued again
	NowMs           int64  `json:"now_ms"`     // the start time assumed
	Restore         int    `json:"restore"`
	Delivered       int    `json:"already_delivered"`
	Duplicates      int    `json:"duplicates"`         // extra deliveries
	DupMessages     int    `json:"duplicate_messages"` // messages delivered more than once
	Lost            int    `json:"lost"`
	PendingRoll     int    `json:"pending_roll"`
	Cancelled       int    `json:"cancelled"`
	Misdelivered    int    `json:"misdelivered"` // deliveries through a unit that points at another message's record
	FailedReads     int    `json:"failed_reads"` // units whose record the dequeue cannot read ("Fail to read msg", 3 tries each)
	// Unknown: recovery's walk goes through timerlog bytes storectl could
	// not read (WaitsOn), so where it stops (ProcessOffset is then a lower
	// bound), the queue offset it enqueues from and the dequeue are not
	// predicted; only the messages the 7-day TTL loses are (Lost).
	Unknown bool `json:"unknown,omitempty"`
	// UnknownSlots and UnknownMsgs: with the walk known, the slots whose
	// chain the dequeue follows into bytes not read, and the messages met
	// on them (outcome unknown, neither restored nor lost). With WaitsOn
	// (the files not read in full), the counts are of the units read.
	UnknownSlots int       `json:"unknown_slots,omitempty"`
	UnknownMsgs  int       `json:"unknown_messages,omitempty"`
	WaitsOn      []string  `json:"waits_on,omitempty"`
	Messages     []Outcome `json:"-"`
}

// Outcome is what the next start does with one timer message.
type Outcome struct {
	UniqKey   string `json:"uniq_key,omitempty"`
	MsgID     string `json:"msg_id,omitempty"`
	RealTopic string `json:"real_topic,omitempty"`
	RealQID   string `json:"real_queue_id,omitempty"`
	DeliverMs int64  `json:"deliver_ms"`
	OffsetPy  int64  `json:"offset_py"` // the timer-topic record (or where it was)
	SizePy    int32  `json:"size_py"`
	Unit      int64  `json:"timer_offset"`       // one unit of it (-1: none, enqueued again)
	QueueOff  int64  `json:"timer_queue_offset"` // its rmq_sys_wheel_timer/0 offset when enqueued again, else -1
	Outcome   string `json:"outcome"`
	Before    int    `json:"delivered_before"`
	After     int    `json:"delivered_after"`
	Why       string `json:"why,omitempty"`
}

// msgState accumulates one message's fate in the simulation.
type msgState struct {
	o          Outcome
	lostUnits  int
	rolled     bool
	cancelled  bool
	unknown    bool  // met on a slot whose chain runs into bytes not read
	misThrough int64 // a unit of another message that delivers this one (-1 none)
}

func (s *scanner) predict(ctx context.Context) error {
	rc := &Recovery{ProcessOffset: s.process, CurrReadTimeMs: s.readFrom, NowMs: s.cfg.Now.UnixMilli()}
	s.rec = rc
	if len(s.files) > 0 {
		rc.BeginOffset = s.files[s.beginFile].base
	}
	if s.recUnknown != "" || s.cfg.RecoveryEndUnknown != "" || s.predictWaits != "" {
		s.predictUnknown(rc)
		return nil
	}
	c := s.timerCQ()
	if ue := (*cqueue.UnreadError)(nil); errors.As(c.rerr, &ue) {
		// The timer recovery reads the queue (its offsets, its range):
		// one of its files could not be read, so nothing is predicted.
		c.q.Close()
		s.fileUnreadable(ue.Rel, ue.Err, true)
		s.predictUnknown(rc)
		return nil
	}
	q, err := c.q, c.err
	if errors.Is(err, cqueue.ErrRocksDB) {
		// The timer topic's queue is in the RocksDB consume queue, which
		// storectl does not read: no clamp to its range, no re-enqueue.
		q = &cqueue.Queue{}
		s.add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: cqueue.Dir,
			Message: "the timer consume queue is in RocksDB (not read): the prediction takes the checkpoint's queue offset as is and cannot say what is enqueued again"})
	} else if err != nil {
		return err
	}
	defer q.Close()
	haveCQ := len(q.Files) > 0
	if haveCQ {
		if rc.TimerCQMin, rc.TimerCQMax, err = c.min, c.max, c.rerr; err != nil {
			return err
		}
	}
	// reviseQueueOffset and the clamps of recover().
	r, from := s.reviseQueueOffset(q)
	cur := s.cp.LastTimerQueueOffset
	rc.QueueOffsetFrom = "checkpoint"
	if r >= 0 {
		cur, rc.QueueOffsetFrom = r+1, from
	}
	cur = min(cur, s.cp.MasterTimerQueueOffset)
	if haveCQ {
		cur = min(max(cur, rc.TimerCQMin), rc.TimerCQMax)
	}
	rc.CurrQueueOffset = cur
	if haveCQ && s.cpPresent && s.cp.LastTimerQueueOffset > rc.TimerCQMax {
		s.add(scan.Finding{Code: CodeCheckAheadCQ, Severity: scan.Info, Path: CheckFile, Offset: 16, Length: 8,
			Expected: fmt.Sprintf("<= %d (timer consume queue max after recovery)", rc.TimerCQMax), Actual: fmt.Sprint(s.cp.LastTimerQueueOffset),
			Message: "the checkpoint's timer queue offset is past the timer consume queue's end (the commitlog was cut): recovery clamps it to the queue's max, so new timer messages are enqueued from there"})
	}
	s.recheckWheel()
	if s.recUnknown != "" { // the walk again went through bytes not read
		s.predictUnknown(rc)
		return nil
	}

	msgs := make(map[string]*msgState, len(s.pending))
	get := func(key string, t *target, deliverMs, offsetPy int64, sizePy int32, unit int64) *msgState {
		m, ok := msgs[key]
		if !ok {
			m = &msgState{o: Outcome{UniqKey: t.uniqKey, MsgID: t.msgID, RealTopic: t.realTopic, RealQID: t.realQID,
				DeliverMs: deliverMs, OffsetPy: offsetPy, SizePy: sizePy, Unit: unit, QueueOff: -1}, misThrough: -1}
			msgs[key] = m
		}
		return m
	}
	keyOf := func(t *target, offsetPy int64) string {
		if t.uniqKey != "" {
			return "k:" + t.uniqKey
		}
		return "p:" + strconv.FormatInt(offsetPy, 10)
	}
	// What was delivered before the stop: re-puts (TIMER_DEQUEUE_MS) in the
	// commitlog tail stored after the checkpoint's read time.
	before := map[string]int{}
	if s.cl != nil && s.cpPresent {
		var err error
		if s.tail != nil { // read beside the commitlog scan (readTail)
			for _, r := range s.tail.reputs {
				if r.phy < s.end {
					before[r.key]++
				}
			}
			err = s.tail.err
		} else {
			err = s.cl.Tail(ctx, s.cp.LastReadTimeMs-60_000, func(m *rmq.Message, phy int64) error {
				if phy < s.end {
					if k, ok := reputKey(m); ok {
						before[k]++
					}
				}
				return nil
			})
		}
		if err != nil {
			s.res.Fail(fmt.Errorf("reading the commitlog tail for delivered timer messages: %w", err))
		}
	}
	// Dequeue: every slot from currReadTimeMs on, in time order.
	var firstWrite *msgState // the first message the restarted broker writes (at the recovery end)
	deliver := func(m *msgState) {
		m.o.After++
		if firstWrite == nil {
			firstWrite = m
		}
	}
	// Enqueue again from currQueueOffset: messages already due are put at
	// once (putMessageToTimerWheel), the others get a new unit.
	if haveCQ {
		for idx := cur; idx < rc.TimerCQMax; idx++ {
			u, ok, err := q.Unit(idx)
			if err != nil || !ok {
				continue
			}
			rc.Reenqueued++
			fake := ftimer.Unit{OffsetPy: u.CommitLogOffset, SizePy: u.Size, Size: ftimer.UnitSize, Magic: ftimer.MagicDefault}
			t := s.target(&fake, true)
			if !t.readable || t.state == TargetAtEnd {
				continue
			}
			m := get(keyOf(&t, u.CommitLogOffset), &t, t.outMs, u.CommitLogOffset, u.Size, -1)
			m.o.QueueOff = idx
			switch {
			case t.delKey != "":
				// a DELETE marker: cancels at its slot, delivers nothing
			case t.outMs >= 0 && t.outMs-s.cfg.Now.UnixMilli() >= 2*86400_000:
				m.rolled = true
			case t.outMs >= 0:
				if t.outMs < s.cfg.Now.UnixMilli() {
					deliver(m)
				} else {
					m.o.After++
				}
			}
		}
	}
	for _, sl := range s.slotsToRead() {
		s.dequeueSlot(sl, msgs, get, keyOf, deliver, &firstWrite, rc)
	}
	for _, r := range s.unread {
		if rel := s.files[r.file].rel; !slices.Contains(rc.WaitsOn, rel) {
			rc.WaitsOn = append(rc.WaitsOn, rel)
		}
	}
	// Outcomes.
	for k, n := range before {
		if m, ok := msgs[k]; ok {
			m.o.Before = n
		}
	}
	type keyed struct {
		k string
		m *msgState
	}
	keys := make([]keyed, 0, len(msgs))
	for k, m := range msgs {
		keys = append(keys, keyed{k, m})
	}
	slices.SortFunc(keys, func(a, b keyed) int { // keys are unique: one order
		if c := cmp.Compare(a.m.o.DeliverMs, b.m.o.DeliverMs); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	rc.Messages = make([]Outcome, 0, len(s.expired)+len(keys))
	s.expiredOutcomes(rc)
	for _, km := range keys {
		m := km.m
		total := m.o.Before + m.o.After
		switch {
		case m.unknown && m.o.Before < 2:
			// What the unread part of its slot holds (a DELETE marker,
			// another unit of it) decides: neither restored nor lost.
			m.o.Outcome = OutcomeUnknown
			m.o.Why = "its slot's chain runs into timerlog bytes that could not be read"
			rc.UnknownMsgs++
		case total >= 2:
			m.o.Outcome = OutcomeDuplicate
			rc.DupMessages++
			rc.Duplicates += total - 1
		case total == 1 && m.o.After == 1:
			m.o.Outcome = OutcomeRestore
			rc.Restore++
		case total == 1:
			m.o.Outcome = OutcomeDelivered
			rc.Delivered++
		case m.rolled:
			m.o.Outcome = OutcomeRoll
			rc.PendingRoll++
		case m.cancelled:
			m.o.Outcome = OutcomeCancelled
			rc.Cancelled++
		default:
			m.o.Outcome = OutcomeLost
			rc.Lost++
		}
		if m.misThrough >= 0 && m.o.Outcome != OutcomeUnknown {
			m.o.Why = fmt.Sprintf("delivered again through the unit at timerlog offset %d, which points at the recovery end", m.misThrough)
		}
		rc.Messages = append(rc.Messages, m.o)
	}
	s.outcomeFindings(rc)
	return nil
}

// reputKey is the key of a message the broker delivered before the stop
// (a re-put: TIMER_DEQUEUE_MS, outside the timer topic, with a UNIQ_KEY).
func reputKey(m *rmq.Message) (string, bool) {
	if string(m.Topic) == Topic {
		return "", false
	}
	if _, ok := m.Property(PropDequeueMs); ok {
		if k := m.UniqKey(); k != "" {
			return "k:" + k, true
		}
	}
	return "", false
}

// slotsToRead lists the revised wheel's slots the dequeue reads from
// currReadTimeMs on, in time order.
func (s *scanner) slotsToRead() []ftimer.Slot {
	from := s.readFrom / s.cfg.PrecisionMs
	var out []ftimer.Slot
	s.eachRevised(func(i int, sl ftimer.Slot) {
		if sl.Time >= from && sl.Time < from+ftimer.WheelSlots && ftimer.SlotIndex(sl.TimeMs(s.cfg.PrecisionMs), s.cfg.PrecisionMs) == i {
			out = append(out, sl)
		}
	})
	slices.SortFunc(out, func(a, b ftimer.Slot) int { return cmp.Compare(a.Time, b.Time) }) // one slot per time
	return out
}

// dequeueSlot is TimerMessageStore.dequeue for one slot: read the chain
// from lastPos, DELETE markers first, then the messages oldest first.
func (s *scanner) dequeueSlot(sl ftimer.Slot, msgs map[string]*msgState,
	get func(string, *target, int64, int64, int32, int64) *msgState, keyOf func(*target, int64) string,
	deliver func(*msgState), firstWrite **msgState, rc *Recovery) {
	dq := &s.dq
	normal, dels := dq.normal[:0], dq.dels[:0]
	dq.seen = dq.seen[:0]
	clear(dq.seenMap)
	unknown := false
	for cur := sl.LastPos; cur != -1 && !dq.visit(cur); {
		if cur >= s.process || cur < 0 {
			break // past what recovery kept: the read throws and the chain ends
		}
		pu := s.unitAt(cur)
		if pu == nil {
			if s.unread != nil {
				if k := s.unreadAt(cur); k >= 0 {
					// The broker reads on through bytes storectl could not:
					// what this slot delivers is unknown.
					s.unread[k].chains++
					unknown = true
				}
			}
			break
		}
		if pu.magic&ftimer.MagicDelete != 0 && pu.magic&ftimer.MagicRoll == 0 {
			dels = append(dels, pu)
		} else {
			normal = append(normal, pu)
		}
		cur = pu.prev
	}
	dq.normal, dq.dels = normal, dels // their storage, for the next slot
	if unknown {
		rc.UnknownSlots++
		for _, pu := range normal {
			get(keyOf(&pu.t, pu.offsetPy), &pu.t, pu.deliverMs, pu.offsetPy, pu.sizePy, pu.off).unknown = true
		}
		return
	}
	slices.Reverse(normal)      // oldest first (the chain runs newest first)
	var deleted map[string]bool // nil: no DELETE marker of this slot cancels anything
	for _, pu := range dels {
		if pu.t.readable && pu.t.delKey != "" {
			if deleted == nil {
				deleted = map[string]bool{}
			}
			deleted[pu.t.delKey] = true
		}
	}
	for _, pu := range normal {
		t := &pu.t
		if t.state == TargetAtEnd && *firstWrite != nil {
			// The restarted broker has written since: the first record at
			// the recovery end is the first message it delivered.
			fw := *firstWrite
			if fw.misThrough < 0 {
				fw.misThrough = pu.off
			}
			fw.o.After++
			rc.Misdelivered++
			lost := get(keyOf(t, pu.offsetPy), t, pu.deliverMs, pu.offsetPy, pu.sizePy, pu.off)
			lost.lostUnits++
			continue
		}
		if !t.readable {
			rc.FailedReads++
			m := get(keyOf(t, pu.offsetPy), t, pu.deliverMs, pu.offsetPy, pu.sizePy, pu.off)
			m.lostUnits++
			continue
		}
		m := get(keyOf(t, pu.offsetPy), t, pu.deliverMs, pu.offsetPy, pu.sizePy, pu.off)
		if t.state == TargetTopic || t.state == TargetSize || t.state == TargetNotRecord {
			rc.Misdelivered++
		}
		switch {
		case t.uniqKey != "" && deleted != nil && deleted[t.realTopic+"+"+t.uniqKey]:
			m.cancelled = true
		case pu.magic&ftimer.MagicRoll != 0:
			m.rolled = true
		default:
			deliver(m)
		}
	}
}

// unitAt returns the unit at timerlog offset off: from the pending units
// kept (Config.PendingCache), or read from its file with its target.
func (s *scanner) unitAt(off int64) *pendingUnit {
	if pu, ok := s.pending[off]; ok {
		return pu
	}
	i := s.fileOf(off)
	if i < 0 {
		return nil
	}
	fh, err := storefile.Open(s.files[i].path)
	if err != nil {
		return nil
	}
	defer fh.Close()
	var b [ftimer.UnitSize]byte
	if _, err := fh.ReadAt(b[:], off-s.files[i].base); err != nil {
		return nil
	}
	u, err := ftimer.DecodeUnit(b[:], off)
	if err != nil {
		return nil
	}
	pu := &pendingUnit{off: off, prev: u.PrevPos, magic: u.Magic, deliverMs: u.DeliverMs(), offsetPy: u.OffsetPy, sizePy: u.SizePy,
		hash: u.HashTopic, writeMs: u.CurrWriteTimeMs, t: s.target(&u, true)}
	if len(s.pending) < s.cfg.PendingCache {
		s.pending[off] = pu
	}
	return pu
}

// reviseQueueOffset is TimerMessageStore.reviseQueueOffset(processOffset):
// the queue offset of the last unit's message, found in the timer CQ.
func (s *scanner) reviseQueueOffset(q *cqueue.Queue) (int64, string) {
	at := s.process - (ftimer.UnitSize - 28)
	i := s.fileOf(at)
	if i < 0 || at < 0 {
		return -1, ""
	}
	fh, err := storefile.Open(s.files[i].path)
	if err != nil {
		return -1, ""
	}
	defer fh.Close()
	var b [12]byte
	if n, _ := fh.ReadAt(b[:], at-s.files[i].base); n < 12 {
		return -1, ""
	}
	u := ftimer.Unit{OffsetPy: int64(beU64(b[:8])), SizePy: int32(beU32(b[8:])), Size: ftimer.UnitSize, Magic: ftimer.MagicDefault}
	t := s.target(&u, true)
	if !t.readable || t.state == TargetAtEnd || t.state == TargetBeyondEnd {
		return -1, ""
	}
	if t.queueID != 0 {
		return t.queueOff, "last-unit"
	}
	tmp := t.queueOff
	for n := 0; n < 20000; n++ {
		if tmp < 0 {
			break
		}
		cu, ok, err := q.Unit(tmp)
		if err != nil || !ok || tmp >= s.rec.TimerCQMax || tmp < s.rec.TimerCQMin {
			tmp--
			continue
		}
		if cu.CommitLogOffset == u.OffsetPy && cu.Size == u.SizePy {
			return tmp, "last-unit"
		}
		tmp--
	}
	return t.queueOff, "last-unit"
}

// recheckWheel is the end of recover(): if a slot the dequeue will read
// points past processOffset, walk the log again from the lowest firstPos
// of such slots without the check, revising slots.
func (s *scanner) recheckWheel() {
	from := s.readFrom / s.cfg.PrecisionMs
	minFirst := int64(1<<63 - 1)
	s.eachRevised(func(i int, sl ftimer.Slot) {
		if sl.Time >= from && sl.Time < from+ftimer.WheelSlots && ftimer.SlotIndex(sl.TimeMs(s.cfg.PrecisionMs), s.cfg.PrecisionMs) == i && sl.LastPos > s.process {
			minFirst = min(minFirst, sl.FirstPos)
		}
	})
	if minFirst >= s.process {
		return
	}
	start := 0
	for i := len(s.files) - 1; i >= 0; i-- {
		if minFirst >= s.files[i].base {
			start = i
			break
		}
	}
	for i := start; i < len(s.files); i++ {
		f := s.files[i]
		limit := min(f.size, s.process-f.base)
		if limit <= 0 {
			break
		}
		for _, r := range s.unread {
			if r.file == i && r.from < f.base+limit {
				// The broker revises the slots of units storectl could not
				// read: which slots the dequeue reads is unknown.
				s.recUnknown = f.rel
				return
			}
		}
		fh, err := storefile.Open(f.path)
		if err != nil {
			return
		}
		b := make([]byte, limit)
		n, _ := fh.ReadAt(b, 0)
		fh.Close()
		for pos := 0; pos+ftimer.UnitSize <= n; pos += ftimer.UnitSize {
			e, _ := ftimer.DecodeEntry(b[pos:], f.base+int64(pos))
			if e.Kind == ftimer.EntryBlank {
				break
			}
			if e.Kind == ftimer.EntryUnit {
				s.reviseSlot(e.Unit.DeliverMs(), e.Unit.Offset)
			}
		}
	}
}

func beU64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}
func beU32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// expiredOutcomes adds the messages the 7-day TTL skips to rc, lost.
func (s *scanner) expiredOutcomes(rc *Recovery) {
	for _, e := range s.expired {
		rc.Lost++
		rc.Messages = append(rc.Messages, Outcome{UniqKey: e.uniqKey, MsgID: e.msgID, RealTopic: e.realTopic, DeliverMs: e.deliverMs,
			OffsetPy: e.offsetPy, SizePy: e.sizePy, Unit: e.off, QueueOff: -1, Outcome: OutcomeLost,
			Why: "the broker has been down longer than the wheel's 7 days: its slot is older than the oldest one a start now reads"})
	}
}

// outcomeFindings reports the recovery plan and each message it loses or
// delivers twice.
func (s *scanner) outcomeFindings(rc *Recovery) {
	s.messageFindings(rc)
	s.planFinding(rc)
}

// messageFindings reports each message rc loses or delivers twice.
func (s *scanner) messageFindings(rc *Recovery) {
	for _, o := range rc.Messages {
		if o.Outcome != OutcomeLost && o.Outcome != OutcomeDuplicate {
			continue // no finding (a restored message, the usual case, builds nothing)
		}
		path, off := s.loc(o.Unit)
		if o.Unit < 0 {
			path, off = cqueue.Dir+"/"+Topic+"/0", o.QueueOff*rmq.CQUnitSize
		}
		base := scan.Finding{Path: path, Offset: off, MsgID: o.MsgID, Repair: scan.RepairNone,
			Details: map[string]any{"uniq_key": o.UniqKey, "real_topic": o.RealTopic, "deliver_ms": o.DeliverMs, "offset_py": o.OffsetPy,
				"timer_offset": o.Unit, "delivered_before": o.Before, "delivered_after": o.After}}
		switch o.Outcome {
		case OutcomeLost:
			f := base
			f.Code, f.Severity = CodeLost, scan.Error
			f.Repair = scan.RepairTruncate
			f.Message = "the broker's timer recovery will never deliver this timer message: its record is gone or its unit is unreachable (storectl salvage exports what is left of it)"
			s.add(f)
		case OutcomeDuplicate:
			f := base
			f.Code, f.Severity = CodeDuplicate, scan.Warning
			f.Message = fmt.Sprintf("the broker will deliver this timer message %d times in all (%d before the stop, %d after the restart)", o.Before+o.After, o.Before, o.After)
			if o.Why != "" {
				f.Message += ": " + o.Why
			}
			s.add(f)
		}
	}
}

// planFinding reports the recovery plan rc.
func (s *scanner) planFinding(rc *Recovery) {
	details := map[string]any{"begin_offset": rc.BeginOffset, "process_offset": rc.ProcessOffset, "curr_queue_offset": rc.CurrQueueOffset,
		"queue_offset_from": rc.QueueOffsetFrom, "curr_read_time_ms": rc.CurrReadTimeMs, "timer_cq_max": rc.TimerCQMax,
		"reenqueued": rc.Reenqueued, "restore": rc.Restore, "lost": rc.Lost, "duplicates": rc.Duplicates, "pending_roll": rc.PendingRoll}
	msg := fmt.Sprintf("next start: timer recovery keeps the timerlog up to %d, enqueues again from timer queue offset %d (%d entries) and reads the wheel from %d; %d messages restored, %d lost, %d duplicate deliveries, %d pending roll",
		rc.ProcessOffset, rc.CurrQueueOffset, rc.Reenqueued, rc.CurrReadTimeMs, rc.Restore, rc.Lost, rc.Duplicates, rc.PendingRoll)
	if len(rc.WaitsOn) > 0 {
		details["unknown_slots"], details["unknown_messages"], details["waits_on"] = rc.UnknownSlots, rc.UnknownMsgs, rc.WaitsOn
		msg += fmt.Sprintf("; %d messages on %d slots unknown (their chains run into timerlog bytes not read); the counts are of the units read, not of those in %s, which could not be read",
			rc.UnknownMsgs, rc.UnknownSlots, strings.Join(rc.WaitsOn, ", "))
	}
	s.add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: CheckFile, Repair: scan.RepairNone, Details: details, Message: msg})
}

// predictUnknown is the prediction when recovery's walk goes through
// timerlog bytes that could not be read (recUnknown): where it stops,
// hence the queue offset it enqueues from and the slots it revises, is
// unknown, so no message is called restored, lost or duplicated through
// them. The messages the 7-day TTL skips are lost whatever the walk does
// (the dequeue starts at the read time), and are reported as such.
//
// The same when the commitlog's recovery end is only a lower bound
// (Config.RecoveryEndUnknown): the timer consume queue is cut at that end,
// which says where the queue offset is clamped and what is enqueued
// again, and the pending units' records past it may be there or not.
func (s *scanner) predictUnknown(rc *Recovery) {
	rc.QueueOffsetFrom = "unknown"
	details := map[string]any{"begin_offset": rc.BeginOffset, "unknown": true}
	var waits, why string
	switch {
	case s.recUnknown != "":
		waits, details["process_offset_at_least"], details["curr_read_time_ms"] = s.recUnknown, rc.ProcessOffset, rc.CurrReadTimeMs
		why = fmt.Sprintf("timer recovery walks the timerlog from %d through %s, which could not be read, so where it stops (at or past %d), the timer queue offset it enqueues from and what it delivers are not predicted",
			rc.BeginOffset, s.recUnknown, rc.ProcessOffset)
	case s.cfg.RecoveryEndUnknown != "":
		waits, details["process_offset"], details["curr_read_time_ms"], details["recovery_end_at_least"] = s.cfg.RecoveryEndUnknown, rc.ProcessOffset, rc.CurrReadTimeMs, s.end
		bound := s.cfg.RecoveryEndUnknown + " could not be read in full"
		if s.cfg.RecoveryEndWhy != "" {
			bound = s.cfg.RecoveryEndWhy
		}
		why = fmt.Sprintf("the commitlog's recovery end is at least %d but not known (%s), so the timer consume queue's end after recovery, the queue offset the timer recovery enqueues from and what it delivers are not predicted",
			s.end, bound)
	default: // a file the prediction reads (predictWaits): the checkpoint or the wheel
		waits, details["process_offset"] = s.predictWaits, rc.ProcessOffset
		why = fmt.Sprintf("%s could not be read, and the timer recovery reads it, so what it restores, loses or delivers twice is not predicted", s.predictWaits)
	}
	rc.Unknown, rc.WaitsOn = true, []string{waits}
	s.expiredOutcomes(rc)
	s.messageFindings(rc)
	details["waits_on"], details["lost"] = rc.WaitsOn, rc.Lost
	ttl := fmt.Sprintf("%d messages the wheel's 7 days lose whatever it does", rc.Lost)
	if waits == CheckFile && s.recUnknown == "" && s.cfg.RecoveryEndUnknown == "" {
		ttl = "nor what the wheel's 7 days lose: they count from the checkpoint's read time"
	}
	s.add(scan.Finding{Code: CodeRecoveryPlan, Severity: scan.Info, Path: CheckFile, Repair: scan.RepairNone, Details: details,
		Message: "next start: unknown: " + why + " (" + ttl + ")"})
}

// dequeueScratch is dequeueSlot's storage, reused from slot to slot: a
// slot's chain is a unit or two, and the two maps and two slices it made
// per slot were about 1-2 ms of the 9-12 ms the dequeue of 12,139
// pending units takes on one goroutine.
type dequeueScratch struct {
	normal, dels []*pendingUnit
	seen         []int64        // the chain's offsets so far, while short
	seenMap      map[int64]bool // and once it is not
}

// visit reports whether the chain already passed offset off, and notes it.
func (d *dequeueScratch) visit(off int64) bool {
	if len(d.seenMap) > 0 { // the chain got long: the map holds all of it
		if d.seenMap[off] {
			return true
		}
		d.seenMap[off] = true
		return false
	}
	if slices.Contains(d.seen, off) {
		return true
	}
	if len(d.seen) < dequeueSeenList {
		d.seen = append(d.seen, off)
		return false
	}
	if d.seenMap == nil {
		d.seenMap = map[int64]bool{}
	}
	for _, o := range d.seen {
		d.seenMap[o] = true
	}
	d.seenMap[off] = true
	return false
}

// dequeueSeenList is how long a chain visit follows in a list.
const dequeueSeenList = 16
