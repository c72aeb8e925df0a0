package ra

// The rabbit_fifo machine state in a snapshot or checkpoint (the State of
// snapshot.dat). The record layout is the same at machine versions 2
// (3.10.8), 5 (4.0) and 7 (4.1) for the fields storectl reads
// (rabbit_fifo.hrl):
//
//	{rabbit_fifo, Cfg, Messages, MessagesTotal, Returns, EnqueueCount,
//	 Enqueuers, RaIndexes, ReleaseCursors|unused, Consumers, ServiceQueue,
//	 Dlx, MsgBytesEnqueue, MsgBytesCheckout, WaitingConsumers, LastActive,
//	 MsgCache, unused}
//
// Messages is an lqueue (v2) or a rabbit_fifo_q {rabbit_fifo_q, Hi, No,
// Len, DequeueCounter} (v4+); a message is the improper list
// [RaftIndex | Header], Header an integer size, [Size | Expiry] or a map
// with size, delivery_count, acquired_count, expiry.

import (
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// FifoMsg is one message in the state: its Raft index and header.
type FifoMsg struct {
	Index  int64
	Header FifoHeader
}

// FifoHeader is a message header.
type FifoHeader struct {
	Size          int64
	Expiry        int64 // ms since the epoch; -1 for none
	DeliveryCount int64
	AcquiredCount int64
}

// FifoConsumer is one consumer with what it holds.
type FifoConsumer struct {
	Key        ConsumerKey
	Tag        string
	Pid        string // PidKey of the consumer's pid
	Node       string
	Meta       etf.Map
	CreditMode string // simple_prefetch or credited
	ModeN      int64  // v4 {simple_prefetch, Max} or {credited, InitialDC}
	ModeV4     bool   // the mode is a v4 tuple
	Lifetime   string // once or auto
	Priority   int64
	Status     string // up, suspected_down, cancelled, quiescing, waiting
	NextMsgID  int64
	Checked    map[int64]FifoMsg
	Credit     int64
	DelivCount int64
}

// FifoEnqueuer is one enqueuer.
type FifoEnqueuer struct {
	Pid     string
	Node    string
	NextSeq int64
	Status  string
}

// FifoConfig is the cfg record.
type FifoConfig struct {
	Name             string
	VHost, Queue     string
	DLH              string // "" (none), "at_most_once", "at_least_once"
	Overflow         string
	MaxLength        int64 // -1 for none
	MaxBytes         int64
	ConsumerStrategy string // competing or single_active
	DeliveryLimit    int64  // -1 for none
	Expires          int64
	MsgTTL           int64
}

// FifoState is the decoded machine state.
type FifoState struct {
	Cfg FifoConfig
	// Hi and No are the ready messages in order (v2 keeps all in No).
	Hi, No         MsgQueue
	DequeueCounter int64
	Returns        MsgQueue
	MessagesTotal  int64
	EnqueueCount   int64
	Enqueuers      map[string]*FifoEnqueuer
	Consumers      map[string]*FifoConsumer // by ConsumerKey.String()
	// ServiceQueue holds consumer keys in service order, with priorities.
	ServiceQueue []ServiceEntry
	Waiting      []*FifoConsumer
	// DLX holds messages waiting for at-least-once dead lettering.
	DLX              []FifoMsg
	DLXCheckedOut    int
	MsgBytesEnqueue  int64
	MsgBytesCheckout int64
	LastActive       int64
}

// ServiceEntry is a consumer key waiting for service.
type ServiceEntry struct {
	Key      string
	Priority int64
}

// String is the key's map identity.
func (k ConsumerKey) String() string {
	if k.IsIndex {
		return "i" + itoa(k.Index)
	}
	return "c" + k.Tag + "\x00" + k.Pid
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// stateErr is a state that does not have rabbit_fifo's shape.
type stateErr struct{ field string }

func bad(field string) { panic(stateErr{field}) }

// DecodeFifoState decodes a rabbit_fifo state term. off is the file
// offset of the state, for errors (which name the record field).
func DecodeFifoState(t etf.Term, off int64) (st *FifoState, err error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(stateErr)
			if !ok {
				panic(r)
			}
			st, err = nil, format.Corrupt(off, "rabbit_fifo."+se.field, format.ErrInvalid)
		}
	}()
	tup, ok := t.(etf.Tuple)
	if !ok || len(tup) < 17 || tup[0] != etf.Atom("rabbit_fifo") {
		bad("record")
	}
	st = &FifoState{Enqueuers: map[string]*FifoEnqueuer{}, Consumers: map[string]*FifoConsumer{}}
	st.Cfg = fifoConfig(tup[1])
	st.decodeMessages(tup[2])
	st.MessagesTotal = mustInt(tup[3], "messages_total")
	st.Returns = NewMsgQueue(lqueueMsgs(tup[4], "returns"))
	st.EnqueueCount, _ = tup[5].(int64)
	enqs, ok := tup[6].(etf.Map)
	if !ok {
		bad("enqueuers")
	}
	for _, e := range enqs {
		st.Enqueuers[PidKey(e.Key)] = fifoEnqueuer(e.Key, e.Value)
	}
	cons, ok := tup[9].(etf.Map)
	if !ok {
		bad("consumers")
	}
	for _, e := range cons {
		k, ok := ConsumerKeyFromTerm(e.Key)
		if !ok {
			bad("consumers.key")
		}
		c := fifoConsumer(k, e.Value)
		st.Consumers[k.String()] = c
	}
	st.ServiceQueue = serviceQueue(tup[10])
	st.decodeDLX(tup[11])
	st.MsgBytesEnqueue, _ = tup[12].(int64)
	st.MsgBytesCheckout, _ = tup[13].(int64)
	if w, ok := etf.ProperList(tup[14]); ok {
		for _, e := range w {
			p, ok := e.(etf.Tuple)
			if !ok || len(p) != 2 {
				bad("waiting_consumers")
			}
			k, ok := ConsumerKeyFromTerm(p[0])
			if !ok {
				bad("waiting_consumers.key")
			}
			st.Waiting = append(st.Waiting, fifoConsumer(k, p[1]))
		}
	} else {
		bad("waiting_consumers")
	}
	st.LastActive, _ = tup[15].(int64)
	return st, nil
}

func mustInt(t etf.Term, field string) int64 {
	n, ok := t.(int64)
	if !ok {
		bad(field)
	}
	return n
}

func optInt(t etf.Term) int64 {
	if n, ok := t.(int64); ok {
		return n
	}
	return -1
}

func fifoConfig(t etf.Term) FifoConfig {
	c, ok := t.(etf.Tuple)
	if !ok || len(c) < 13 || c[0] != etf.Atom("cfg") {
		bad("cfg")
	}
	var cfg FifoConfig
	cfg.Name = textOf(c[1])
	cfg.VHost, cfg.Queue, _ = QueueResource(c[2])
	switch d := c[4].(type) {
	case etf.Atom:
		if d != "undefined" {
			cfg.DLH = string(d)
		}
	case etf.Tuple:
		if len(d) > 0 {
			cfg.DLH = textOf(d[0])
		}
	}
	cfg.Overflow = textOf(c[6])
	cfg.MaxLength = optInt(c[7])
	cfg.MaxBytes = optInt(c[8])
	cfg.ConsumerStrategy = textOf(c[9])
	cfg.DeliveryLimit = optInt(c[10])
	cfg.Expires = optInt(c[11])
	cfg.MsgTTL = optInt(c[12])
	return cfg
}

func (st *FifoState) decodeMessages(t etf.Term) {
	if q, ok := t.(etf.Tuple); ok && len(q) == 5 && q[0] == etf.Atom("rabbit_fifo_q") {
		st.Hi = NewMsgQueue(queueMsgs(q[1], "messages.hi"))
		st.No = NewMsgQueue(queueMsgs(q[2], "messages.no"))
		st.DequeueCounter, _ = q[4].(int64)
		return
	}
	st.No = NewMsgQueue(lqueueMsgs(t, "messages"))
}

// queueMsgs reads a {In, Out} pair (an Erlang queue): order = Out ++
// reverse(In).
func queueMsgs(t etf.Term, field string) []FifoMsg {
	p, ok := t.(etf.Tuple)
	if !ok || len(p) != 2 {
		bad(field)
	}
	return inOut(p[0], p[1], field)
}

func inOut(in, out etf.Term, field string) []FifoMsg {
	ins, ok1 := etf.ProperList(in)
	outs, ok2 := etf.ProperList(out)
	if !ok1 || !ok2 {
		bad(field)
	}
	msgs := make([]FifoMsg, 0, len(ins)+len(outs))
	for _, m := range outs {
		msgs = append(msgs, fifoMsg(m, field))
	}
	for i := len(ins) - 1; i >= 0; i-- {
		msgs = append(msgs, fifoMsg(ins[i], field))
	}
	return msgs
}

// lqueueMsgs reads an lqueue {Len, In, Out} (or the older {Len, {In, Out}}).
func lqueueMsgs(t etf.Term, field string) []FifoMsg {
	q, ok := t.(etf.Tuple)
	switch {
	case ok && len(q) == 3:
		return inOut(q[1], q[2], field)
	case ok && len(q) == 2:
		return queueMsgs(q[1], field)
	}
	bad(field)
	return nil
}

// fifoMsg reads [Index | Header].
func fifoMsg(t etf.Term, field string) FifoMsg {
	l, ok := t.(etf.List)
	if !ok || len(l.Elems) != 1 {
		bad(field + ".msg")
	}
	idx, ok := l.Elems[0].(int64)
	if !ok {
		bad(field + ".msg.index")
	}
	return FifoMsg{Index: idx, Header: FifoHeaderFromTerm(l.Tail)}
}

// FifoHeaderFromTerm reads a message header: Size, [Size | Expiry] or a
// map.
func FifoHeaderFromTerm(t etf.Term) FifoHeader {
	h := FifoHeader{Expiry: -1}
	switch v := t.(type) {
	case int64:
		h.Size = v
	case etf.List:
		if len(v.Elems) == 1 {
			h.Size, _ = v.Elems[0].(int64)
			h.Expiry = optInt(v.Tail)
		}
	case etf.Map:
		for _, e := range v {
			a, _ := e.Key.(etf.Atom)
			n, _ := e.Value.(int64)
			switch a {
			case "size":
				h.Size = n
			case "expiry":
				h.Expiry = optInt(e.Value)
			case "delivery_count":
				h.DeliveryCount = n
			case "acquired_count":
				h.AcquiredCount = n
			}
		}
	}
	return h
}

func fifoEnqueuer(pid, t etf.Term) *FifoEnqueuer {
	e, ok := t.(etf.Tuple)
	if !ok || len(e) < 4 || e[0] != etf.Atom("enqueuer") {
		bad("enqueuer")
	}
	return &FifoEnqueuer{Pid: PidKey(pid), Node: PidNode(pid), NextSeq: mustInt(e[1], "enqueuer.next_seqno"), Status: textOf(e[3])}
}

func fifoConsumer(k ConsumerKey, t etf.Term) *FifoConsumer {
	c, ok := t.(etf.Tuple)
	if !ok || len(c) != 7 || c[0] != etf.Atom("consumer") {
		bad("consumer")
	}
	cfg, ok := c[1].(etf.Tuple)
	if !ok || len(cfg) != 7 || cfg[0] != etf.Atom("consumer_cfg") {
		bad("consumer_cfg")
	}
	fc := &FifoConsumer{Key: k, Checked: map[int64]FifoMsg{}}
	fc.Meta, _ = cfg[1].(etf.Map)
	fc.Pid, fc.Node = PidKey(cfg[2]), PidNode(cfg[2])
	if tag, ok := termBytes(cfg[3]); ok {
		fc.Tag = string(tag)
	}
	switch m := cfg[4].(type) {
	case etf.Atom:
		fc.CreditMode = string(m)
	case etf.Tuple:
		if len(m) == 2 {
			fc.CreditMode, fc.ModeN, fc.ModeV4 = textOf(m[0]), optInt(m[1]), true
		}
	}
	fc.Lifetime = textOf(cfg[5])
	fc.Priority, _ = cfg[6].(int64)
	fc.Status = textOf(c[2])
	fc.NextMsgID = mustInt(c[3], "consumer.next_msg_id")
	ch, ok := c[4].(etf.Map)
	if !ok {
		bad("consumer.checked_out")
	}
	for _, e := range ch {
		id, ok := e.Key.(int64)
		if !ok {
			bad("consumer.checked_out.key")
		}
		fc.Checked[id] = fifoMsg(e.Value, "consumer.checked_out")
	}
	fc.Credit, _ = c[5].(int64)
	fc.DelivCount, _ = c[6].(int64)
	return fc
}

// serviceQueue reads a priority_queue: {queue, In, Out, Len} (all at
// priority 0) or {pqueue, [{-Priority, Queue}]} (highest first).
func serviceQueue(t etf.Term) []ServiceEntry {
	q, ok := t.(etf.Tuple)
	if !ok || len(q) == 0 {
		bad("service_queue")
	}
	keys := func(in, out etf.Term, prio int64) []ServiceEntry {
		ins, ok1 := etf.ProperList(in)
		outs, ok2 := etf.ProperList(out)
		if !ok1 || !ok2 {
			bad("service_queue")
		}
		var es []ServiceEntry
		add := func(e etf.Term) {
			k, ok := ConsumerKeyFromTerm(e)
			if !ok {
				bad("service_queue.key")
			}
			es = append(es, ServiceEntry{Key: k.String(), Priority: prio})
		}
		for _, e := range outs {
			add(e)
		}
		for i := len(ins) - 1; i >= 0; i-- {
			add(ins[i])
		}
		return es
	}
	switch {
	case q[0] == etf.Atom("queue") && len(q) == 4:
		return keys(q[1], q[2], 0)
	case q[0] == etf.Atom("pqueue") && len(q) == 2:
		groups, ok := etf.ProperList(q[1])
		if !ok {
			bad("service_queue")
		}
		var out []ServiceEntry
		for _, g := range groups {
			p, ok := g.(etf.Tuple)
			if !ok || len(p) != 2 {
				bad("service_queue")
			}
			negp, _ := p[0].(int64)
			inner, ok := p[1].(etf.Tuple)
			if !ok || len(inner) != 4 {
				bad("service_queue")
			}
			out = append(out, keys(inner[1], inner[2], -negp)...)
		}
		return out
	}
	bad("service_queue")
	return nil
}

func (st *FifoState) decodeDLX(t etf.Term) {
	d, ok := t.(etf.Tuple)
	if !ok || len(d) < 3 || d[0] != etf.Atom("rabbit_fifo_dlx") {
		bad("dlx")
	}
	q, ok := d[2].(etf.Tuple)
	if !ok || len(q) != 3 {
		bad("dlx.discards")
	}
	ins, ok1 := etf.ProperList(q[1])
	outs, ok2 := etf.ProperList(q[2])
	if !ok1 || !ok2 {
		bad("dlx.discards")
	}
	add := func(e etf.Term) {
		// ?TUPLE(Reason, Msg) = [Reason | Msg], or {Reason, Msg}
		switch v := e.(type) {
		case etf.List:
			if len(v.Elems) == 1 {
				st.DLX = append(st.DLX, fifoMsg(v.Tail, "dlx.discard"))
				return
			}
		case etf.Tuple:
			if len(v) == 2 {
				st.DLX = append(st.DLX, fifoMsg(v[1], "dlx.discard"))
				return
			}
		}
		bad("dlx.discard")
	}
	for _, e := range outs {
		add(e)
	}
	for i := len(ins) - 1; i >= 0; i-- {
		add(ins[i])
	}
	if c, ok := d[1].(etf.Tuple); ok && len(c) >= 3 {
		if m, ok := c[2].(etf.Map); ok {
			st.DLXCheckedOut = len(m)
		}
	}
}

// Ready is the number of ready messages.
func (st *FifoState) Ready() int { return st.Hi.Len() + st.No.Len() + st.Returns.Len() }

// CheckedOut is the number of messages checked out to consumers.
func (st *FifoState) CheckedOut() int {
	n := 0
	for _, c := range st.Consumers {
		n += len(c.Checked)
	}
	return n
}
