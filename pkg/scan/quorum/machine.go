package quorum

// A replay of rabbit_fifo, the state machine of a quorum queue, over the
// log entries after a snapshot: which Raft indexes (messages) are live
// after the last entry, and which would come back or go at the next start.
//
// Rules are those of rabbitmq-server deps/rabbit/src/rabbit_fifo.erl:
// machine version 2 (v3.10.8: apply/3 195-600, checkout_one 1932-1995,
// return_one 1756-1779, complete 1601-1641, increase_credit 1643-1653,
// update_or_remove_sub 2044-2064, maybe_enqueue 1525-1580) and versions
// 4-7 (v4.0.5 and v4.1.8: apply/3 233-665, checkout_one 2115-2184,
// return_one 1883-1909, incr_msg 3000, increase_credit 1791-1811,
// update_or_remove_con 2238-2268, rabbit_fifo_q). Message bodies are not
// needed: the machine keeps only [Index | Header] per message.
//
// What is not replayed exactly is recorded in Inexact (with a reason) so
// that the caller reports bounds instead of a number: wall-clock TTL
// expiry at the next start, at-least-once dead lettering, a return of
// more than 32 messages in one command at version 2 (Erlang map order),
// commands that did not decode, and machine version upgrades inside the
// replayed range.

import (
	"fmt"
	"sort"

	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
)

// machine is a rabbit_fifo state being replayed.
type machine struct {
	v   int64 // effective machine version
	st  *ra.FifoState
	ts  int64 // system_time of the command being applied
	idx int64 // its Raft index

	// Inexact lists why the replay's count may differ from the broker's.
	Inexact []string
	// Notes list why the identity of Uncertain messages may differ (the
	// count does not).
	Notes     []string
	Uncertain int
	inexact   map[string]bool
	// Applied counts commands by name.
	Applied    map[string]int
	restarting bool
	// Gone counts the messages that left the queue during the replay
	// (settled, discarded, dropped for the delivery limit or max length,
	// expired, purged, requeued at a new index); only the count is
	// reported, so no per-message record is kept.
	Gone int
}

// gone counts a message leaving the queue (why: for the reader).
func (m *machine) gone(_ int64, _ string) { m.Gone++ }

func newMachine(st *ra.FifoState, version int64) *machine {
	if st.Enqueuers == nil {
		st.Enqueuers = map[string]*ra.FifoEnqueuer{}
	}
	if st.Consumers == nil {
		st.Consumers = map[string]*ra.FifoConsumer{}
	}
	return &machine{v: version, st: st, inexact: map[string]bool{}, Applied: map[string]int{}}
}

// emptyState is rabbit_fifo:init/1 of a machine config map.
func emptyState(conf etf.Map) *ra.FifoState {
	st := &ra.FifoState{Enqueuers: map[string]*ra.FifoEnqueuer{}, Consumers: map[string]*ra.FifoConsumer{}}
	st.Cfg = ra.FifoConfig{MaxLength: -1, MaxBytes: -1, DeliveryLimit: -1, Expires: -1, MsgTTL: -1,
		Overflow: "drop_head", ConsumerStrategy: "competing"}
	applyConfig(&st.Cfg, conf)
	return st
}

// applyConfig is rabbit_fifo:update_config/2.
func applyConfig(c *ra.FifoConfig, conf etf.Map) {
	get := func(k string) (etf.Term, bool) { return ra.MapGet(conf, k) }
	num := func(k string) int64 {
		if v, ok := get(k); ok {
			if n, ok := v.(int64); ok {
				return n
			}
		}
		return -1
	}
	if v, ok := get("name"); ok {
		if a, ok := v.(etf.Atom); ok {
			c.Name = string(a)
		}
	}
	if v, ok := get("queue_resource"); ok {
		c.VHost, c.Queue, _ = ra.QueueResource(v)
	}
	c.DLH = ""
	if v, ok := get("dead_letter_handler"); ok {
		switch d := v.(type) {
		case etf.Atom:
			if d != "undefined" {
				c.DLH = string(d)
			}
		case etf.Tuple:
			if len(d) > 0 {
				if a, ok := d[0].(etf.Atom); ok {
					c.DLH = string(a)
				}
			}
		}
	}
	c.Overflow = "drop_head"
	if v, ok := get("overflow_strategy"); ok {
		if a, ok := v.(etf.Atom); ok {
			c.Overflow = string(a)
		}
	}
	c.MaxLength, c.MaxBytes = num("max_length"), num("max_bytes")
	c.DeliveryLimit = num("delivery_limit")
	c.Expires, c.MsgTTL = num("expires"), num("msg_ttl")
	c.ConsumerStrategy = "competing"
	if v, ok := get("single_active_consumer_on"); ok && v == etf.Atom("true") {
		c.ConsumerStrategy = "single_active"
	}
}

func (m *machine) v4() bool { return m.v >= 4 }

func (m *machine) mark(reason string) {
	if !m.inexact[reason] {
		m.inexact[reason] = true
		m.Inexact = append(m.Inexact, reason)
	}
}

// note records a rule the replay follows only as far as the count: k
// messages may be others than the replay says (the same number).
func (m *machine) note(reason string, k int) {
	m.Uncertain += k
	if !m.inexact["note:"+reason] {
		m.inexact["note:"+reason] = true
		m.Notes = append(m.Notes, reason)
	}
}

// --- queues ---

func (m *machine) ready() int { return m.st.Ready() }

// takeNext is take_next_msg: returns first, then the message queue
// (rabbit_fifo_q's weighted hi/no choice at v4).
func (m *machine) takeNext() (ra.FifoMsg, bool) {
	st := m.st
	if st.Returns.Len() > 0 {
		return st.Returns.PopFront()
	}
	if st.Hi.Len()+st.No.Len() == 0 {
		return ra.FifoMsg{}, false
	}
	if !m.v4() {
		return st.No.PopFront()
	}
	hi := m.nextIsHi()
	if st.DequeueCounter == 2 {
		st.DequeueCounter = 0
	} else {
		st.DequeueCounter++
	}
	if hi {
		return st.Hi.PopFront()
	}
	return st.No.PopFront()
}

// nextIsHi is rabbit_fifo_q:next/1.
func (m *machine) nextIsHi() bool {
	st := m.st
	switch {
	case st.Hi.Len() > 0 && st.No.Len() > 0 && st.DequeueCounter == 2:
		h, _ := st.Hi.Front()
		n, _ := st.No.Front()
		return h.Index < n.Index
	case st.Hi.Len() > 0:
		return true
	}
	return false
}

// peekNext is get_next_msg.
func (m *machine) peekNext() (ra.FifoMsg, bool) {
	st := m.st
	if st.Returns.Len() > 0 {
		return st.Returns.Front()
	}
	if st.Hi.Len()+st.No.Len() == 0 {
		return ra.FifoMsg{}, false
	}
	if m.v4() && m.nextIsHi() {
		return st.Hi.Front()
	}
	return st.No.Front()
}

// --- service queue (priority_queue) ---

func (m *machine) sqMember(key string) bool {
	for _, e := range m.st.ServiceQueue {
		if e.Key == key {
			return true
		}
	}
	return false
}

// sqIn is priority_queue:in/3: after every entry of the same or higher
// priority.
func (m *machine) sqIn(key string, prio int64) {
	sq := m.st.ServiceQueue
	i := len(sq)
	for i > 0 && sq[i-1].Priority < prio {
		i--
	}
	sq = append(sq, ra.ServiceEntry{})
	copy(sq[i+1:], sq[i:])
	sq[i] = ra.ServiceEntry{Key: key, Priority: prio}
	m.st.ServiceQueue = sq
}

func (m *machine) sqOut() (string, bool) {
	if len(m.st.ServiceQueue) == 0 {
		return "", false
	}
	k := m.st.ServiceQueue[0].Key
	m.st.ServiceQueue = m.st.ServiceQueue[1:]
	return k, true
}

// maybeQueue is maybe_queue_consumer / uniq_queue_in.
func (m *machine) maybeQueue(key string, c *ra.FifoConsumer) {
	if c.Credit > 0 && c.Status == "up" && !m.sqMember(key) {
		m.sqIn(key, c.Priority)
	}
}

// --- consumers ---

// increaseCredit is increase_credit/2.
func (m *machine) increaseCredit(c *ra.FifoConsumer, n int64) int64 {
	if c.Lifetime == "once" {
		return c.Credit
	}
	if c.CreditMode == "credited" {
		return c.Credit
	}
	if m.v4() && c.ModeV4 && c.CreditMode == "simple_prefetch" && c.ModeN > 0 {
		return min(c.ModeN, c.Credit+n)
	}
	return c.Credit + n
}

// updateOrRemove is update_or_remove_sub (v2) / update_or_remove_con (v4).
func (m *machine) updateOrRemove(key string, c *ra.FifoConsumer) {
	st := m.st
	switch {
	case c.Lifetime == "once" && c.Credit == 0:
		if len(c.Checked) == 0 {
			delete(st.Consumers, key)
			st.LastActive = m.ts
		} else {
			st.Consumers[key] = c
		}
	case m.v4() && c.Status == "quiescing" && len(c.Checked) == 0:
		c.Status = "up"
		delete(st.Consumers, key)
		m.addWaiting(c)
	default:
		st.Consumers[key] = c
		m.maybeQueue(key, c)
	}
}

// sortedKeys is the iteration order of an Erlang map of consumers: keys
// in term order (integers before tuples; tuples by tag then pid).
func (m *machine) sortedKeys() []string {
	keys := make([]string, 0, len(m.st.Consumers))
	for k := range m.st.Consumers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := m.st.Consumers[keys[i]].Key, m.st.Consumers[keys[j]].Key
		if a.IsIndex != b.IsIndex {
			return a.IsIndex
		}
		if a.IsIndex {
			return a.Index < b.Index
		}
		if a.Tag != b.Tag {
			return erlBinLess(a.Tag, b.Tag)
		}
		return a.Pid < b.Pid
	})
	return keys
}

// erlBinLess orders binaries as Erlang does: bytewise, a prefix first.
func erlBinLess(a, b string) bool { return a < b }

// findConsumer is find_consumer/2 (v4) or a plain lookup (v2).
func (m *machine) findConsumer(k ra.ConsumerKey) (string, *ra.FifoConsumer) {
	if c, ok := m.st.Consumers[k.String()]; ok {
		return k.String(), c
	}
	if m.v4() && !k.IsIndex {
		for _, key := range m.sortedKeys() {
			c := m.st.Consumers[key]
			if c.Tag == k.Tag && c.Pid == k.Pid {
				return key, c
			}
		}
	}
	return "", nil
}

// keyFromID is consumer_key_from_id/2.
func (m *machine) keyFromID(k ra.ConsumerKey) (string, bool) {
	if _, ok := m.st.Consumers[k.String()]; ok {
		return k.String(), true
	}
	for _, key := range m.sortedKeys() {
		c := m.st.Consumers[key]
		if c.Tag == k.Tag && c.Pid == k.Pid {
			return key, true
		}
	}
	for _, c := range m.st.Waiting {
		if c.Tag == k.Tag && c.Pid == k.Pid {
			return c.Key.String(), true
		}
	}
	return "", false
}

// --- message headers ---

func (m *machine) bytesReturn(h ra.FifoHeader) {
	m.st.MsgBytesCheckout -= h.Size
	m.st.MsgBytesEnqueue += h.Size
}

// --- apply ---

// applyEntry applies one log entry.
func (m *machine) applyEntry(idx int64, e ra.Entry) {
	m.idx, m.ts = idx, e.TS
	switch e.Kind {
	case ra.EntryUser:
		c := ra.DecodeFifoCommand(e.Command, e.ReplyMode)
		m.Applied[c.Name]++
		m.apply(c)
	case ra.EntryNoop:
		if e.MachineVersion > m.v {
			m.mark(fmt.Sprintf("machine version upgrade %d -> %d at index %d", m.v, e.MachineVersion, idx))
			m.v = e.MachineVersion
		}
	}
}

// damagedEntry applies an entry that does not decode as far as its head
// tells: an enqueue adds a message (its body unknown, its enqueuer's
// sequence not checked); anything else makes the replay inexact.
func (m *machine) damagedEntry(idx int64, b []byte, loc *EntryLoc) {
	m.idx = idx
	name, args, ok := ra.PeekCommand(b)
	if ok && (name == ra.CmdEnqueue || name == ra.CmdEnqueueV2) {
		m.Applied[name]++
		// the sequence number: {enqueue, Pid, Seq, Msg} / {e, Seq, Msg, Size}
		seq, seqAt := int64(-1), 0
		if name == ra.CmdEnqueue {
			seqAt = 1
		}
		if len(args) > seqAt {
			if n, ok := args[seqAt].(int64); ok {
				seq = n
			}
		}
		var pidOK bool
		if name == ra.CmdEnqueue && len(args) > 0 {
			if e, ok := m.st.Enqueuers[ra.PidKey(args[0])]; ok && e.NextSeq == seq {
				e.NextSeq++
				pidOK = true
			}
		}
		if !pidOK && seq >= 0 {
			// the enqueuer is the one expecting this sequence number
			var match []*ra.FifoEnqueuer
			for _, e := range m.st.Enqueuers {
				if e.NextSeq == seq {
					match = append(match, e)
				}
			}
			if len(match) == 1 {
				match[0].NextSeq++
				pidOK = true
			}
		}
		if !pidOK {
			m.mark(fmt.Sprintf("entry %d is a damaged enqueue whose enqueuer is not known", idx))
		}
		m.note(fmt.Sprintf("entry %d is damaged; its head says it enqueues a message, replayed as one", idx), 1)
		fm := ra.FifoMsg{Index: idx, Header: ra.FifoHeader{Size: int64(loc.Length), Expiry: -1}}
		m.st.MsgBytesEnqueue += fm.Header.Size
		m.st.EnqueueCount++
		m.st.MessagesTotal++
		m.st.No.PushBack(fm)
		m.checkout()
		return
	}
	what := "its command is unknown"
	if ok {
		what = "a " + name + " command"
	}
	m.mark(fmt.Sprintf("entry %d does not decode (%s)", idx, what))
}

func (m *machine) apply(c ra.FifoCommand) {
	if !c.OK {
		switch c.Name {
		case ra.CmdEnqueueV2:
			// without a notify reply mode rabbit_fifo has no clause for it:
			// "unhandled command"
			return
		case "":
			return
		}
		if isFifoCommand(c.Name) {
			m.mark("a " + c.Name + " command that did not decode")
		}
		return
	}
	switch c.Name {
	case ra.CmdEnqueue, ra.CmdEnqueueV2:
		m.enqueue(c)
	case ra.CmdRegisterEnqueuer:
		if _, ok := m.st.Enqueuers[ra.PidKey(c.Pid)]; !ok {
			m.st.Enqueuers[ra.PidKey(c.Pid)] = &ra.FifoEnqueuer{Pid: ra.PidKey(c.Pid), Node: ra.PidNode(c.Pid), NextSeq: 1, Status: "up"}
		}
	case ra.CmdSettle:
		if key, con := m.findConsumer(c.Consumer); con != nil {
			m.complete(key, con, c.MsgIDs, "settled")
			if m.v4() {
				m.activateNext()
			}
			m.checkout()
		}
	case ra.CmdDiscard:
		if key, con := m.findConsumer(c.Consumer); con != nil {
			m.discard(key, con, c.MsgIDs, true)
		}
	case ra.CmdReturn:
		if key, con := m.findConsumer(c.Consumer); con != nil {
			m.returnMsgs(key, con, c.MsgIDs, false)
		}
	case ra.CmdModify:
		if !m.v4() {
			return
		}
		if key, con := m.findConsumer(c.Consumer); con != nil {
			if c.Undeliverable {
				m.discard(key, con, c.MsgIDs, c.DeliveryFailed)
			} else {
				m.returnMsgs(key, con, c.MsgIDs, c.DeliveryFailed)
			}
		}
	case ra.CmdRequeue:
		m.requeue(c)
	case ra.CmdCredit:
		m.credit(c)
	case ra.CmdCheckout:
		m.checkoutCmd(c)
	case ra.CmdPurge:
		m.purge()
	case ra.CmdDown:
		m.down(c)
	case ra.CmdNodeUp:
		m.nodeUp(c.Nodes[0])
	case ra.CmdPurgeNodes:
		for _, n := range c.Nodes {
			for _, p := range m.pidsOn(n) {
				m.handleDown(p)
			}
		}
	case ra.CmdUpdateConfig:
		old := m.st.Cfg.DLH
		applyConfig(&m.st.Cfg, c.Config)
		if m.st.Cfg.DLH == "at_least_once" || old == "at_least_once" {
			m.note("at-least-once dead lettering: discarded messages wait for the dead-letter worker (not counted)", 0)
		}
		m.checkout()
	case ra.CmdTimeout:
		m.checkout()
	case ra.CmdDLX:
		m.note("at-least-once dead lettering: discarded messages wait for the dead-letter worker (not counted)", 0)
		m.checkout()
	case ra.CmdMachineVersion:
		if c.ToVersion != m.v {
			m.mark(fmt.Sprintf("machine version conversion %d -> %d", c.FromVersion, c.ToVersion))
			m.v = c.ToVersion
		}
	}
}

func isFifoCommand(name string) bool {
	switch name {
	case ra.CmdEnqueue, ra.CmdRequeue, ra.CmdRegisterEnqueuer, ra.CmdCheckout, ra.CmdSettle, ra.CmdReturn,
		ra.CmdDiscard, ra.CmdCredit, ra.CmdModify, ra.CmdPurge, ra.CmdPurgeNodes, ra.CmdUpdateConfig,
		ra.CmdDown, ra.CmdNodeUp, ra.CmdMachineVersion:
		return true
	}
	return false
}

// enqueue is apply_enqueue / maybe_enqueue.
func (m *machine) enqueue(c ra.FifoCommand) {
	st := m.st
	pid := ra.PidKey(c.Pid)
	if pid == "" && c.Seq >= 0 {
		pid = "undefined"
	}
	if pid != "" {
		e, ok := st.Enqueuers[pid]
		if !ok {
			e = &ra.FifoEnqueuer{Pid: pid, Node: ra.PidNode(c.Pid), NextSeq: 1, Status: "up"}
			st.Enqueuers[pid] = e
		}
		switch {
		case c.Seq == e.NextSeq:
			e.NextSeq++
		case c.Seq > e.NextSeq:
			return // out_of_sequence: not enqueued
		default:
			return // duplicate
		}
	}
	msg, err := ra.DecodeEnqueueMessage(c.Msg)
	size := c.BodySize
	if size < 0 {
		size = msg.PayloadSize
	}
	if err != nil && size < 0 {
		size = 0
	}
	h := ra.FifoHeader{Size: size, Expiry: -1}
	// min(QueueTTL, MessageTTL) where undefined is larger than any number
	ttl := st.Cfg.MsgTTL
	if msg.TTL >= 0 && (ttl < 0 || msg.TTL < ttl) {
		ttl = msg.TTL
	}
	if ttl == 0 {
		h.Expiry = m.ts + 1
	} else if ttl > 0 {
		h.Expiry = m.ts + ttl
	}
	if m.v4() && msg.DeliveryCount >= 0 {
		h.DeliveryCount = msg.DeliveryCount
	}
	fm := ra.FifoMsg{Index: m.idx, Header: h}
	st.MsgBytesEnqueue += size
	st.EnqueueCount++
	st.MessagesTotal++
	if m.v4() && msg.Priority > 4 {
		st.Hi.PushBack(fm)
	} else {
		st.No.PushBack(fm)
	}
	m.checkout()
}

// complete removes settled (or discarded) messages from a consumer.
func (m *machine) complete(key string, con *ra.FifoConsumer, ids []int64, why string) {
	n := int64(0)
	for _, id := range ids {
		msg, ok := con.Checked[id]
		if !ok {
			continue
		}
		delete(con.Checked, id)
		m.st.MsgBytesCheckout -= msg.Header.Size
		m.gone(msg.Index, why)
		n++
	}
	con.Credit = m.increaseCredit(con, n)
	m.st.MessagesTotal -= n
	m.updateOrRemove(key, con)
}

// discard is the discard clause (v2) / discard/7 (v4): at most once
// (or no dead letter handler) the messages are gone.
func (m *machine) discard(key string, con *ra.FifoConsumer, ids []int64, delFailed bool) {
	if m.st.Cfg.DLH == "at_least_once" {
		m.note("at-least-once dead lettering: discarded messages wait for the dead-letter worker (not counted)", 0)
	}
	m.complete(key, con, ids, "discarded")
	if m.v4() {
		m.activateNext()
	}
	m.checkout()
}

// returnOne is return_one: the message goes back to the returns queue, or
// is dropped when it is over the delivery limit.
func (m *machine) returnOne(key string, con *ra.FifoConsumer, id int64, delFailed bool) {
	msg := con.Checked[id]
	var over bool
	if m.v4() {
		msg.Header.AcquiredCount++
		if delFailed {
			msg.Header.DeliveryCount++
		}
		over = m.st.Cfg.DeliveryLimit >= 0 && msg.Header.AcquiredCount > m.st.Cfg.DeliveryLimit
	} else {
		msg.Header.DeliveryCount++
		over = m.st.Cfg.DeliveryLimit >= 0 && msg.Header.DeliveryCount > m.st.Cfg.DeliveryLimit
	}
	if over {
		con.Checked[id] = msg
		m.complete(key, con, []int64{id}, "dropped: delivery limit")
		return
	}
	delete(con.Checked, id)
	if m.v4() {
		con.Credit = m.increaseCredit(con, 1)
	}
	m.st.Consumers[key] = con
	m.st.Returns.PushBack(msg)
	m.bytesReturn(msg.Header)
}

// returnMsgs is return/5 (v2) and return/8 (v4).
func (m *machine) returnMsgs(key string, con *ra.FifoConsumer, ids []int64, delFailed bool) {
	if m.v4() {
		for _, id := range ids {
			if _, ok := con.Checked[id]; ok {
				m.returnOne(key, con, id, delFailed)
			}
		}
	} else {
		// maps:fold over maps:with(MsgIds, Checked): key order for small maps
		var sel []int64
		seen := map[int64]bool{}
		for _, id := range ids {
			if _, ok := con.Checked[id]; ok && !seen[id] {
				sel = append(sel, id)
				seen[id] = true
			}
		}
		if len(sel) > 32 {
			m.note("a return of more than 32 messages at machine version 2 (Erlang map order)", len(sel))
		}
		sort.Slice(sel, func(i, j int) bool { return sel[i] < sel[j] })
		for _, id := range sel {
			m.returnOne(key, con, id, true)
		}
		if c, ok := m.st.Consumers[key]; ok {
			c.Credit = m.increaseCredit(c, int64(len(sel)))
		}
	}
	if c, ok := m.st.Consumers[key]; ok {
		m.updateOrRemove(key, c)
	}
	if m.v >= 7 {
		m.activateNext()
	}
	m.checkout()
}

// returnAll is return_all: every checked-out message, in msg id order.
func (m *machine) returnAll(key string, con *ra.FifoConsumer, delFailed bool) {
	m.st.Consumers[key] = con
	ids := make([]int64, 0, len(con.Checked))
	for id := range con.Checked {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c, ok := m.st.Consumers[key]
		if !ok {
			break
		}
		if _, ok := c.Checked[id]; ok {
			m.returnOne(key, c, id, delFailed || !m.v4())
		}
	}
}

func (m *machine) requeue(c ra.FifoCommand) {
	key := c.Consumer.String()
	con, ok := m.st.Consumers[key]
	if !ok {
		return
	}
	old, ok := con.Checked[c.MsgID]
	if !ok {
		return
	}
	h := ra.FifoHeaderFromTerm(c.OldHeader)
	if m.v4() {
		h.AcquiredCount++
	} else {
		h.DeliveryCount++
	}
	m.bytesReturn(h)
	delete(con.Checked, c.MsgID)
	con.Credit = m.increaseCredit(con, 1)
	m.gone(old.Index, "requeued at a new index")
	m.st.No.PushBack(ra.FifoMsg{Index: m.idx, Header: h})
	m.st.EnqueueCount++
	m.updateOrRemove(key, con)
	m.checkout()
}

func (m *machine) credit(c ra.FifoCommand) {
	key := c.Consumer.String()
	con, ok := m.st.Consumers[key]
	if !ok {
		for _, w := range m.st.Waiting {
			if w.Key.String() == key {
				w.Credit = linkCredit(c, w)
				return
			}
		}
		return
	}
	con.Credit = linkCredit(c, con)
	m.maybeQueue(key, con)
	m.checkout()
	if con, ok := m.st.Consumers[key]; ok && c.Drain {
		// the outstanding credit is added to the delivery count
		con.DelivCount += con.Credit
		if con.ModeV4 && con.CreditMode == "credited" {
			con.DelivCount &= 0xffffffff
		}
		con.Credit = 0
	}
}

// linkCredit is link_credit_snd: the receiver's delivery count plus its
// credit minus the sender's delivery count, not below 0 (serial number
// arithmetic for the v4 credit API).
func linkCredit(c ra.FifoCommand, con *ra.FifoConsumer) int64 {
	if con.ModeV4 && con.CreditMode == "credited" {
		d := int64(int32(uint32(c.DeliveryCount + c.Credit - con.DelivCount)))
		return max(0, d)
	}
	return max(0, c.DeliveryCount+c.Credit-con.DelivCount)
}

func (m *machine) checkoutCmd(c ra.FifoCommand) {
	st := m.st
	switch c.Spec.Kind {
	case "dequeue":
		if st.Cfg.ConsumerStrategy == "single_active" {
			return
		}
		st.LastActive = m.ts
		if m.ready() == 0 {
			return
		}
		if m.v4() {
			if key, _ := m.findConsumer(c.Consumer); key != "" {
				return
			}
		} else if _, ok := st.Consumers[c.Consumer.String()]; ok {
			return
		}
		key := c.Consumer.String()
		con := &ra.FifoConsumer{Key: c.Consumer, Tag: c.Consumer.Tag, Pid: c.Consumer.Pid, Lifetime: "once",
			CreditMode: "simple_prefetch", Credit: 1, Status: "up", Checked: map[int64]ra.FifoMsg{}, Meta: c.ConsumerMeta}
		if m.v4() {
			con.ModeV4, con.ModeN = true, 1
		}
		m.updateOrRemove(key, con)
		_, id, ok := m.checkoutOne()
		if !ok {
			if con, ok := st.Consumers[key]; ok && len(con.Checked) == 0 {
				delete(st.Consumers, key)
			}
			m.evaluateLimit()
			return
		}
		if c.Spec.Settlement == "settled" {
			// make_settle(ConsumerId, [MsgId]) on the dequeue consumer
			if key2, con := m.findConsumer(c.Consumer); con != nil {
				m.complete(key2, con, []int64{id}, "settled")
				if m.v4() {
					m.activateNext()
				}
				m.checkout()
			}
		}
		m.evaluateLimit()
	case "cancel", "remove":
		var key string
		if m.v4() {
			k, ok := m.keyFromID(c.Consumer)
			if !ok {
				return
			}
			key = k
		} else {
			key = c.Consumer.String()
		}
		m.cancelConsumer(key, c.Spec.Kind)
		if m.v4() {
			m.activateNext()
		}
		m.checkout()
	default:
		m.newConsumer(c)
	}
}

// newConsumer is the checkout clause for {Life, ...} specs.
func (m *machine) newConsumer(c ra.FifoCommand) {
	st := m.st
	spec := c.Spec
	prio := consumerPriority(c.ConsumerMeta, m.v4())
	var key string
	var ck ra.ConsumerKey
	if m.v4() {
		if k, ok := m.keyFromID(c.Consumer); ok {
			key = k
			if con, ok := st.Consumers[k]; ok {
				ck = con.Key
			} else {
				for _, w := range st.Waiting {
					if w.Key.String() == k {
						ck = w.Key
					}
				}
			}
		} else if spec.V4 {
			ck = ra.ConsumerKey{IsIndex: true, Index: m.idx}
			key = ck.String()
		} else {
			ck = c.Consumer
			key = ck.String()
		}
	} else {
		ck = c.Consumer
		key = ck.String()
	}
	// the consumer's credit mode, credit and delivery count
	mode, modeN, modeV4 := spec.CreditMode, int64(0), false
	credit, delivCount := spec.Credit, int64(0)
	if m.v4() {
		switch {
		case mode == "simple_prefetch":
			// {Life, {simple_prefetch, N}}; {Life, N, simple_prefetch} normalises to it
			modeN, modeV4 = spec.Credit, true
		case spec.V4 && mode == "credited" && spec.CreditMode == "credited" && spec.InitialDeliveryCount >= 0 && specIsTuple(c):
			// {Life, {credited, DeliveryCount}}: credit API v2
			modeN, modeV4, credit, delivCount = spec.InitialDeliveryCount, true, 0, spec.InitialDeliveryCount
		default:
			// credited (atom): no credit until a credit command
			credit = 0
		}
	}
	merge := func(con *ra.FifoConsumer) *ra.FifoConsumer {
		con.Priority, con.Meta, con.CreditMode, con.ModeN, con.ModeV4, con.Lifetime = prio, c.ConsumerMeta, mode, modeN, modeV4, spec.Kind
		con.Status = "up"
		con.Credit = max(0, credit-int64(len(con.Checked)))
		if modeV4 && mode == "credited" {
			con.ModeN = modeN
		}
		return con
	}
	fresh := func() *ra.FifoConsumer {
		return &ra.FifoConsumer{Key: ck, Tag: c.Consumer.Tag, Pid: c.Consumer.Pid, Node: pidNodeOf(c.Raw),
			Meta: c.ConsumerMeta, CreditMode: mode, ModeN: modeN, ModeV4: modeV4, Lifetime: spec.Kind,
			Priority: prio, Status: "up", Checked: map[int64]ra.FifoMsg{}, Credit: credit, DelivCount: delivCount}
	}
	if st.Cfg.ConsumerStrategy != "single_active" {
		if con, ok := st.Consumers[key]; ok {
			m.updateOrRemove(key, merge(con))
		} else {
			m.updateOrRemove(key, fresh())
		}
	} else {
		activeKey, active := m.activeConsumer()
		switch {
		case active != nil && activeKey == key && active.Status == "up":
			m.updateOrRemove(key, merge(active))
		case active == nil && st.Consumers[key] != nil:
			m.updateOrRemove(key, merge(st.Consumers[key]))
		default:
			m.addWaiting(fresh())
		}
	}
	m.activateNext()
	m.checkout()
}

// specIsTuple reports a checkout spec whose mode is {credited, N}.
func specIsTuple(c ra.FifoCommand) bool {
	t, ok := c.Raw.(etf.Tuple)
	if !ok || len(t) != 4 {
		return false
	}
	spec, ok := t[2].(etf.Tuple)
	if !ok || len(spec) != 2 {
		return false
	}
	_, ok = spec[1].(etf.Tuple)
	return ok
}

func pidNodeOf(raw etf.Term) string {
	t, ok := raw.(etf.Tuple)
	if !ok || len(t) < 2 {
		return ""
	}
	id, ok := t[1].(etf.Tuple)
	if !ok || len(id) != 2 {
		return ""
	}
	return ra.PidNode(id[1])
}

// consumerPriority is get_priority (v4) / get_priority_from_args (v2):
// the priority key of the consumer meta, or its x-priority argument.
func consumerPriority(meta etf.Map, v4 bool) int64 {
	if v4 {
		if p, ok := ra.MapGet(meta, "priority"); ok {
			if n, ok := p.(int64); ok {
				return n
			}
		}
	}
	args, ok := ra.MapGet(meta, "args")
	if !ok {
		return 0
	}
	l, ok := args.(etf.List)
	if !ok {
		return 0
	}
	for _, e := range l.Elems {
		t, ok := e.(etf.Tuple)
		if !ok || len(t) != 3 {
			continue
		}
		if k, ok := t[0].(etf.Binary); ok && string(k) == "x-priority" {
			if n, ok := t[2].(int64); ok {
				return n
			}
		}
	}
	return 0
}

// cancelConsumer is cancel_consumer/5 with reason cancel (consumer_cancel
// at v2), remove or down.
func (m *machine) cancelConsumer(key, reason string) {
	st := m.st
	if st.Cfg.ConsumerStrategy == "single_active" && len(st.Waiting) > 0 {
		if _, ok := st.Consumers[key]; !ok {
			for i, w := range st.Waiting {
				if w.Key.String() == key {
					st.Waiting = append(st.Waiting[:i:i], st.Waiting[i+1:]...)
					break
				}
			}
			return
		}
	}
	con, ok := st.Consumers[key]
	if !ok {
		return
	}
	if reason == "cancel" {
		con.Lifetime, con.Credit, con.Status = "once", 0, "cancelled"
		m.updateOrRemove(key, con)
	} else {
		m.returnAll(key, con, reason == "down")
		delete(st.Consumers, key)
		st.LastActive = m.ts
	}
	if !m.v4() && st.Cfg.ConsumerStrategy == "single_active" && len(st.Waiting) > 0 {
		m.activateNext()
	}
}

func (m *machine) purge() {
	st := m.st
	n := int64(m.ready())
	for _, q := range []*ra.MsgQueue{&st.Returns, &st.Hi, &st.No} {
		for msg := range q.All() {
			m.gone(msg.Index, "purged")
		}
		q.Reset()
	}
	st.MessagesTotal -= n
	st.MsgBytesEnqueue = 0
	m.evaluateLimit()
}

// down is the {down, Pid, Reason} clauses.
func (m *machine) down(c ra.FifoCommand) {
	pid := ra.PidKey(c.Pid)
	if c.Reason != etf.Atom("noconnection") {
		m.handleDown(pid)
		if m.v4() {
			m.activateNext()
		}
		m.checkout()
		return
	}
	node := ra.PidNode(c.Pid)
	st := m.st
	if st.Cfg.ConsumerStrategy == "single_active" {
		for _, key := range m.sortedKeys() {
			con := st.Consumers[key]
			if con.Node != node {
				continue
			}
			if !m.v4() {
				con.Credit = m.increaseCredit(con, int64(len(con.Checked)))
			}
			m.returnAll(key, con, true)
			if cc, ok := st.Consumers[key]; ok {
				delete(st.Consumers, key)
				cc.Status = "suspected_down"
				m.addWaiting(cc)
			}
			st.LastActive = m.ts
		}
		for _, w := range st.Waiting {
			if w.Node == node && w.Status != "cancelled" {
				w.Status = "suspected_down"
			}
		}
		m.sortWaiting()
		m.activateNext()
	} else {
		for _, key := range m.sortedKeys() {
			con := st.Consumers[key]
			if con.Node != node || con.Status != "up" {
				continue
			}
			if !m.v4() {
				con.Credit = m.increaseCredit(con, int64(len(con.Checked)))
			}
			con.Status = "suspected_down"
			m.returnAll(key, con, true)
		}
		st.LastActive = m.ts
	}
	for _, e := range st.Enqueuers {
		if e.Node == node {
			e.Status = "suspected_down"
		}
	}
	m.checkout()
}

// handleDown is handle_down/3: the enqueuer goes, the pid's consumers are
// cancelled with reason down (their messages return).
func (m *machine) handleDown(pid string) {
	st := m.st
	delete(st.Enqueuers, pid)
	if st.Cfg.ConsumerStrategy == "single_active" {
		var keep []*ra.FifoConsumer
		for _, w := range st.Waiting {
			if w.Pid != pid {
				keep = append(keep, w)
			}
		}
		st.Waiting = keep
	}
	var keys []string
	holding := 0
	for _, key := range m.sortedKeys() {
		if c := st.Consumers[key]; c.Pid == pid {
			keys = append(keys, key)
			if len(c.Checked) > 0 {
				holding++
			}
		}
	}
	if holding > 1 && len(st.Consumers) > 32 && !m.restarting {
		k := 0
		for _, key := range keys {
			k += len(st.Consumers[key].Checked)
		}
		m.note("a process with several consumers holding messages went down among more than 32 consumers: the order of the returns (Erlang map order) is not replayed", k)
	}
	for _, key := range keys {
		m.cancelConsumer(key, "down")
	}
}

func (m *machine) pidsOn(node string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p, n string) {
		if n == node && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, e := range m.st.Enqueuers {
		add(e.Pid, e.Node)
	}
	for _, key := range m.sortedKeys() {
		c := m.st.Consumers[key]
		add(c.Pid, c.Node)
	}
	for _, w := range m.st.Waiting {
		add(w.Pid, w.Node)
	}
	sort.Strings(out)
	return out
}

func (m *machine) nodeUp(node string) {
	st := m.st
	for _, e := range st.Enqueuers {
		if e.Node == node {
			e.Status = "up"
		}
	}
	for _, key := range m.sortedKeys() {
		c := st.Consumers[key]
		if c.Node == node && c.Status != "cancelled" {
			c.Status = "up"
			m.updateOrRemove(key, c)
		}
	}
	for _, w := range st.Waiting {
		if w.Node == node && w.Status != "cancelled" {
			w.Status = "up"
		}
	}
	m.sortWaiting()
	m.activateNext()
	m.checkout()
}

// --- single active consumer ---

func (m *machine) activeConsumer() (string, *ra.FifoConsumer) {
	if len(m.st.Consumers) > 32 {
		m.note("single active consumer among more than 32 consumers: Erlang map order not replayed", 0)
	}
	for _, key := range m.sortedKeys() {
		c := m.st.Consumers[key]
		if c.Status == "up" || (m.v4() && c.Status == "quiescing") {
			return key, c
		}
	}
	return "", nil
}

func (m *machine) addWaiting(c *ra.FifoConsumer) {
	key := c.Key.String()
	for i, w := range m.st.Waiting {
		if w.Key.String() == key {
			m.st.Waiting[i] = c
			m.sortWaiting()
			return
		}
	}
	m.st.Waiting = append(m.st.Waiting, c)
	m.sortWaiting()
}

// sortWaiting is sort_waiting/1 (v4); v2 keeps arrival order.
func (m *machine) sortWaiting() {
	if !m.v4() {
		return
	}
	w := m.st.Waiting
	sort.SliceStable(w, func(i, j int) bool {
		a, b := w[i], w[j]
		if (a.Status == "up") != (b.Status == "up") {
			return a.Status == "up"
		}
		if a.Status != "up" {
			return false
		}
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Credit != b.Credit {
			return a.Credit > b.Credit
		}
		return a.Key.String() < b.Key.String()
	})
}

// activateNext is activate_next_consumer.
func (m *machine) activateNext() {
	st := m.st
	if st.Cfg.ConsumerStrategy != "single_active" {
		return
	}
	activeKey, active := m.activeConsumer()
	var next *ra.FifoConsumer
	nextAt := -1
	for i, w := range st.Waiting {
		if w.Status == "up" {
			next, nextAt = w, i
			break
		}
		if m.v4() {
			break // v4: only the head, and only when it is up
		}
	}
	if next == nil {
		return
	}
	nk := next.Key.String()
	switch {
	case active == nil:
		st.Waiting = append(st.Waiting[:nextAt:nextAt], st.Waiting[nextAt+1:]...)
		c := next
		if ex, ok := st.Consumers[nk]; ok {
			ex.CreditMode, ex.ModeN, ex.ModeV4, ex.Lifetime, ex.Priority, ex.Meta = next.CreditMode, next.ModeN, next.ModeV4, next.Lifetime, next.Priority, next.Meta
			c = ex
		}
		st.Consumers[nk] = c
		m.maybeQueue(nk, c)
	case m.v4() && next.Priority > active.Priority && len(active.Checked) == 0:
		st.Waiting = append(st.Waiting[:nextAt:nextAt], st.Waiting[nextAt+1:]...)
		st.Consumers[nk] = next
		m.maybeQueue(nk, next)
		delete(st.Consumers, activeKey)
		m.addWaiting(active)
	case m.v4() && next.Priority > active.Priority:
		active.Status = "quiescing"
	}
}

// --- checkout loop ---

// checkout is checkout/4: deliver while a consumer has credit, then the
// length limits.
func (m *machine) checkout() {
	for {
		if _, _, ok := m.checkoutOne(); !ok {
			break
		}
	}
	m.evaluateLimit()
}

// checkoutOne is checkout_one/4: expire the head, then give the next
// message to the next consumer of the service queue.
func (m *machine) checkoutOne() (string, int64, bool) {
	m.expire()
	st := m.st
	for len(st.ServiceQueue) > 0 {
		key := st.ServiceQueue[0].Key
		con, ok := st.Consumers[key]
		if !ok {
			m.sqOut()
			continue
		}
		if m.ready() == 0 {
			// nochange: the consumer stays at the head of the queue
			return "", 0, false
		}
		m.sqOut()
		skip := con.Credit == 0
		if m.v4() {
			skip = skip || con.Status != "up"
		} else {
			skip = skip || con.Status == "cancelled" || con.Status == "suspected_down"
		}
		if skip {
			continue
		}
		msg, _ := m.takeNext()
		id := con.NextMsgID
		con.Checked[id] = msg
		con.NextMsgID++
		con.Credit--
		con.DelivCount++
		if con.ModeV4 && con.CreditMode == "credited" {
			con.DelivCount &= 0xffffffff
		}
		st.MsgBytesCheckout += msg.Header.Size
		st.MsgBytesEnqueue -= msg.Header.Size
		m.updateOrRemove(key, con)
		return key, id, true
	}
	return "", 0, false
}

// expire is expire_msgs: drop head messages whose expiry is at or before
// the command's time.
func (m *machine) expire() {
	for {
		msg, ok := m.peekNext()
		if !ok || msg.Header.Expiry < 0 || m.ts < msg.Header.Expiry {
			return
		}
		m.takeNext()
		m.st.MessagesTotal--
		m.st.MsgBytesEnqueue -= msg.Header.Size
		m.gone(msg.Index, "expired")
		if m.st.Cfg.DLH == "at_least_once" {
			m.note("at-least-once dead lettering: discarded messages wait for the dead-letter worker (not counted)", 0)
		}
	}
}

// evaluateLimit is evaluate_limit: drop-head while over max-length or
// max-bytes (reject_publish does not drop).
func (m *machine) evaluateLimit() {
	cfg := m.st.Cfg
	if cfg.MaxLength < 0 && cfg.MaxBytes < 0 {
		return
	}
	for m.overLimit() && cfg.Overflow == "drop_head" {
		msg, ok := m.takeNext()
		if !ok {
			return
		}
		m.st.MessagesTotal--
		m.st.MsgBytesEnqueue -= msg.Header.Size
		m.gone(msg.Index, "dropped: max length")
	}
}

func (m *machine) overLimit() bool {
	cfg := m.st.Cfg
	n := int64(m.ready() + len(m.st.DLX))
	return (cfg.MaxLength >= 0 && n > cfg.MaxLength) || (cfg.MaxBytes >= 0 && m.st.MsgBytesEnqueue > cfg.MaxBytes)
}

// --- the next start ---

// restart applies what the next start does to the consumers of the old
// node: their processes are gone, so each gets a down (noproc) and its
// checked-out messages return, one over the delivery limit is dropped.
// Consumers on other nodes are treated the same way and counted in
// remote, since they may still be alive when this node comes back.
func (m *machine) restart(localNode string) (remote int) {
	m.restarting = true
	pids := map[string]bool{}
	var order []string
	for _, key := range m.sortedKeys() {
		c := m.st.Consumers[key]
		if !pids[c.Pid] {
			pids[c.Pid] = true
			order = append(order, c.Pid)
			if c.Node != localNode {
				remote++
			}
		}
	}
	for _, w := range m.st.Waiting {
		if !pids[w.Pid] {
			pids[w.Pid] = true
			order = append(order, w.Pid)
		}
	}
	for _, p := range order {
		m.handleDown(p)
		if m.v4() {
			m.activateNext()
		}
		m.checkout()
	}
	return remote
}

// eachLive calls fn with the Raft index of every message in the queue:
// ready ones in delivery order, then the checked-out ones by consumer and
// msg id.
func (m *machine) eachLive(fn func(int64)) {
	st := m.st
	for msg := range st.Returns.All() {
		fn(msg.Index)
	}
	// the delivery order of hi/no at v4 depends on later dequeues; list
	// hi then no
	for msg := range st.Hi.All() {
		fn(msg.Index)
	}
	for msg := range st.No.All() {
		fn(msg.Index)
	}
	for _, key := range m.sortedKeys() {
		c := st.Consumers[key]
		ids := make([]int64, 0, len(c.Checked))
		for id := range c.Checked {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			fn(c.Checked[id].Index)
		}
	}
}

// expiring counts live messages with an expiry (they may be gone by the
// time the node starts: wall-clock TTL).
func (m *machine) expiring() int {
	n := 0
	count := func(q *ra.MsgQueue) {
		for msg := range q.All() {
			if msg.Header.Expiry >= 0 {
				n++
			}
		}
	}
	count(&m.st.Returns)
	count(&m.st.Hi)
	count(&m.st.No)
	for _, c := range m.st.Consumers {
		for _, msg := range c.Checked {
			if msg.Header.Expiry >= 0 {
				n++
			}
		}
	}
	return n
}
