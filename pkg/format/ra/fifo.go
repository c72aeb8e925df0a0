package ra

// The commands of rabbit_fifo, the state machine of a quorum queue, as
// they appear in $usr entries (rabbitmq-server deps/rabbit/src/
// rabbit_fifo.erl: machine version 2 at v3.10.8, 5 at v4.0.5, 7 at
// v4.1.8). Records are tuples tagged with the record name:
//
//	{enqueue, Pid | undefined, Seq | undefined, Msg}            all versions
//	{e, Seq, Msg, {MetaSize, BodySize}}                           v4+ (the enqueuer is the pid of ReplyMode {notify, Corr, Pid})
//	{requeue, ConsumerKey, MsgId, OldIndex, Header, Msg}
//	{register_enqueuer, Pid}
//	{checkout, {Tag, Pid}, Spec, ConsumerMeta}
//	{settle | return | discard, ConsumerKey, [MsgId]}
//	{credit, ConsumerKey, Credit, DeliveryCount, Drain}
//	{modify, ConsumerKey, [MsgId], DeliveryFailed, UndeliverableHere, Annotations}   v4+
//	{purge}  {purge_nodes, [Node]}  {update_config, Config}  {garbage_collection}
//	{down, Pid, Reason}  {nodeup, Node}  {nodedown, Node}  {timeout, expire_msgs}
//	{dlx, ...}  {machine_version, From, To}
//
// ConsumerKey is the consumer id {Tag, Pid} (v2, and v4 when the client
// uses it) or, from v4 on, the Raft index of the consumer's checkout.
// MsgIds are consumer-scoped counters, not AMQP message ids.

import (
	"strconv"

	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/rabbitmq"
)

// rabbit_fifo command names.
const (
	CmdEnqueue          = "enqueue"
	CmdEnqueueV2        = "e"
	CmdRequeue          = "requeue"
	CmdRegisterEnqueuer = "register_enqueuer"
	CmdCheckout         = "checkout"
	CmdSettle           = "settle"
	CmdReturn           = "return"
	CmdDiscard          = "discard"
	CmdCredit           = "credit"
	CmdModify           = "modify"
	CmdPurge            = "purge"
	CmdPurgeNodes       = "purge_nodes"
	CmdUpdateConfig     = "update_config"
	CmdGC               = "garbage_collection"
	CmdDown             = "down"
	CmdNodeUp           = "nodeup"
	CmdNodeDown         = "nodedown"
	CmdTimeout          = "timeout"
	CmdDLX              = "dlx"
	CmdMachineVersion   = "machine_version"
)

// FifoCommand is a decoded rabbit_fifo command. Only the fields of its
// Name are set. OK is false when the command has the name of a known
// command but not its shape (rabbit_fifo ignores such a command as
// unhandled, or crashes on it).
type FifoCommand struct {
	Name string
	OK   bool
	Raw  etf.Term

	// enqueue, e, register_enqueuer, down: the process
	Pid etf.Term // an Opaque pid, or the atom undefined
	Seq int64    // -1 when undefined
	Msg etf.Term // the raw message term (#basic_message or #mc)
	// BodySize is the payload size the e command carries; -1 otherwise.
	BodySize int64

	// settle, return, discard, credit, modify, requeue, checkout
	Consumer ConsumerKey
	MsgIDs   []int64
	// requeue
	MsgID     int64
	OldIndex  int64
	OldHeader etf.Term
	// credit
	Credit, DeliveryCount int64
	Drain                 bool
	// modify
	DeliveryFailed, Undeliverable bool
	// checkout
	Spec         CheckoutSpec
	ConsumerMeta etf.Map
	// down
	Reason etf.Term
	// nodeup, nodedown, purge_nodes
	Nodes []string
	// update_config
	Config etf.Map
	// machine_version
	FromVersion, ToVersion int64
}

// ConsumerKey is a consumer id {Tag, Pid} or a v4 integer key (IsIndex).
type ConsumerKey struct {
	IsIndex bool
	Index   int64
	Tag     string // the consumer tag bytes
	Pid     string // the pid's ETF encoding, a stable identity
}

// Valid reports whether the key was decoded.
func (k ConsumerKey) Valid() bool { return k.IsIndex || k.Pid != "" }

// CheckoutSpec is a checkout command's spec.
type CheckoutSpec struct {
	Kind string // "dequeue", "cancel", "remove", "once", "auto"
	// dequeue: "settled" or "unsettled"
	Settlement string
	// once/auto: the credit mode and its number
	CreditMode string // "simple_prefetch" or "credited"
	Credit     int64  // prefetch (simple_prefetch) or initial credit (v2 credited)
	// V4 is the {Life, Mode} form; false for {Life, N, Mode}.
	V4 bool
	// InitialDeliveryCount is the {credited, N} count of the v4 form.
	InitialDeliveryCount int64
}

// PidKey returns the identity string of a pid term ("" when t is not a
// pid): its ETF encoding, equal for equal pids.
func PidKey(t etf.Term) string {
	if o, ok := t.(etf.Opaque); ok && (o.Tag == etf.TagNewPid || o.Tag == etf.TagPid) {
		return string(o.Raw)
	}
	return ""
}

// PidNode returns the node name of a pid term.
func PidNode(t etf.Term) string {
	o, ok := t.(etf.Opaque)
	if !ok || len(o.Raw) < 3 {
		return ""
	}
	// tag, then the node atom
	at, _, err := etf.DecodeTerm(append([]byte{etf.Version}, o.Raw[1:]...))
	if err != nil {
		return ""
	}
	a, _ := at.(etf.Atom)
	return string(a)
}

// ConsumerKeyFromTerm decodes a consumer key.
func ConsumerKeyFromTerm(t etf.Term) (ConsumerKey, bool) {
	switch v := t.(type) {
	case int64:
		return ConsumerKey{IsIndex: true, Index: v}, true
	case etf.Tuple:
		if len(v) != 2 {
			return ConsumerKey{}, false
		}
		tag, ok := termBytes(v[0])
		pid := PidKey(v[1])
		if !ok || pid == "" {
			return ConsumerKey{}, false
		}
		return ConsumerKey{Tag: string(tag), Pid: pid}, true
	}
	return ConsumerKey{}, false
}

// termBytes returns the bytes of a binary or string term.
func termBytes(t etf.Term) ([]byte, bool) {
	switch v := t.(type) {
	case etf.Binary:
		return v, true
	case etf.String:
		return v, true
	case etf.Nil:
		return []byte{}, true
	}
	return nil, false
}

// intList decodes a list of non-negative integers (a STRING_EXT when all
// are below 256).
func intList(t etf.Term) ([]int64, bool) {
	switch v := t.(type) {
	case etf.Nil:
		return []int64{}, true
	case etf.String:
		out := make([]int64, len(v))
		for i, c := range v {
			out[i] = int64(c)
		}
		return out, true
	case etf.List:
		if _, ok := v.Tail.(etf.Nil); !ok {
			return nil, false
		}
		out := make([]int64, len(v.Elems))
		for i, e := range v.Elems {
			n, ok := e.(int64)
			if !ok {
				return nil, false
			}
			out[i] = n
		}
		return out, true
	}
	return nil, false
}

func isTrue(t etf.Term) bool { return t == etf.Atom("true") }

// DecodeFifoCommand decodes the Command of a $usr entry with its
// ReplyMode (the v4 e command takes its enqueuer from it).
func DecodeFifoCommand(cmd, replyMode etf.Term) FifoCommand {
	c := FifoCommand{Raw: cmd, Seq: -1, BodySize: -1}
	tup, ok := cmd.(etf.Tuple)
	if !ok || len(tup) == 0 {
		if a, ok := cmd.(etf.Atom); ok {
			c.Name = string(a)
		}
		return c
	}
	name, _ := tup[0].(etf.Atom)
	c.Name = string(name)
	n := len(tup)
	switch c.Name {
	case CmdEnqueue:
		if n == 4 {
			c.Pid, c.Msg = tup[1], tup[3]
			if s, ok := tup[2].(int64); ok {
				c.Seq = s
			}
			c.OK = true
		}
	case CmdEnqueueV2:
		if n == 4 {
			if s, ok := tup[1].(int64); ok {
				c.Seq = s
			}
			c.Msg = tup[2]
			if sz, ok := tup[3].(etf.Tuple); ok && len(sz) == 2 {
				c.BodySize, _ = sz[1].(int64)
			}
			if rm, ok := replyMode.(etf.Tuple); ok && len(rm) == 3 && rm[0] == etf.Atom("notify") {
				c.Pid = rm[2]
				c.OK = true
			}
		}
	case CmdRequeue:
		if n == 6 {
			c.Consumer, c.OK = ConsumerKeyFromTerm(tup[1])
			c.MsgID, _ = tup[2].(int64)
			c.OldIndex, _ = tup[3].(int64)
			c.OldHeader, c.Msg = tup[4], tup[5]
		}
	case CmdRegisterEnqueuer:
		if n == 2 {
			c.Pid, c.OK = tup[1], PidKey(tup[1]) != ""
		}
	case CmdCheckout:
		if n == 4 {
			k, ok1 := ConsumerKeyFromTerm(tup[1])
			spec, ok2 := checkoutSpec(tup[2])
			c.Consumer, c.Spec = k, spec
			c.ConsumerMeta, _ = tup[3].(etf.Map)
			c.OK = ok1 && ok2 && !k.IsIndex
		}
	case CmdSettle, CmdReturn, CmdDiscard:
		if n == 3 {
			k, ok1 := ConsumerKeyFromTerm(tup[1])
			ids, ok2 := intList(tup[2])
			c.Consumer, c.MsgIDs, c.OK = k, ids, ok1 && ok2
		}
	case CmdCredit:
		if n == 5 {
			k, ok1 := ConsumerKeyFromTerm(tup[1])
			cr, ok2 := tup[2].(int64)
			dc, ok3 := tup[3].(int64)
			c.Consumer, c.Credit, c.DeliveryCount, c.Drain = k, cr, dc, isTrue(tup[4])
			c.OK = ok1 && ok2 && ok3
		}
	case CmdModify:
		if n == 6 {
			k, ok1 := ConsumerKeyFromTerm(tup[1])
			ids, ok2 := intList(tup[2])
			c.Consumer, c.MsgIDs = k, ids
			c.DeliveryFailed, c.Undeliverable = isTrue(tup[3]), isTrue(tup[4])
			c.OK = ok1 && ok2
		}
	case CmdPurge, CmdGC:
		c.OK = n == 1
	case CmdPurgeNodes:
		if n == 2 {
			c.Nodes, c.OK = atomList(tup[1])
		}
	case CmdUpdateConfig:
		if n == 2 {
			c.Config, c.OK = tup[1].(etf.Map)
		}
	case CmdDown:
		if n == 3 {
			c.Pid, c.Reason, c.OK = tup[1], tup[2], PidKey(tup[1]) != ""
		}
	case CmdNodeUp, CmdNodeDown:
		if n == 2 {
			if a, ok := tup[1].(etf.Atom); ok {
				c.Nodes, c.OK = []string{string(a)}, true
			}
		}
	case CmdTimeout:
		c.OK = n == 2 && tup[1] == etf.Atom("expire_msgs")
	case CmdDLX:
		c.OK = n == 2
	case CmdMachineVersion:
		if n == 3 {
			f, ok1 := tup[1].(int64)
			t, ok2 := tup[2].(int64)
			c.FromVersion, c.ToVersion, c.OK = f, t, ok1 && ok2
		}
	}
	return c
}

func atomList(t etf.Term) ([]string, bool) {
	switch v := t.(type) {
	case etf.Nil:
		return nil, true
	case etf.List:
		var out []string
		for _, e := range v.Elems {
			a, ok := e.(etf.Atom)
			if !ok {
				return nil, false
			}
			out = append(out, string(a))
		}
		return out, true
	}
	return nil, false
}

// checkoutSpec decodes {dequeue, S}, cancel, remove, {Life, N, Mode} or
// {Life, Mode} with Mode {simple_prefetch, N} | {credited, DC} | credited.
func checkoutSpec(t etf.Term) (CheckoutSpec, bool) {
	var s CheckoutSpec
	switch v := t.(type) {
	case etf.Atom:
		s.Kind = string(v)
		return s, v == "cancel" || v == "remove"
	case etf.Tuple:
		if len(v) < 2 {
			return s, false
		}
		k, _ := v[0].(etf.Atom)
		s.Kind = string(k)
		switch {
		case k == "dequeue" && len(v) == 2:
			a, _ := v[1].(etf.Atom)
			s.Settlement = string(a)
			return s, a == "settled" || a == "unsettled"
		case (k == "once" || k == "auto") && len(v) == 3:
			s.Credit, _ = v[1].(int64)
			m, _ := v[2].(etf.Atom)
			s.CreditMode = string(m)
			return s, m == "simple_prefetch" || m == "credited"
		case (k == "once" || k == "auto") && len(v) == 2:
			s.V4 = true
			switch m := v[1].(type) {
			case etf.Atom:
				s.CreditMode = string(m)
				return s, m == "credited"
			case etf.Tuple:
				if len(m) != 2 {
					return s, false
				}
				a, _ := m[0].(etf.Atom)
				n, ok := m[1].(int64)
				s.CreditMode = string(a)
				if a == "simple_prefetch" {
					s.Credit = n
				} else {
					s.InitialDeliveryCount = n
				}
				return s, ok && (a == "simple_prefetch" || a == "credited")
			}
		}
	}
	return s, false
}

// EnqueueMessage is what an enqueue command says about its message.
type EnqueueMessage struct {
	rabbitmq.Message
	// Priority is the mc p annotation or the 0-9-1 priority property; -1
	// when unset.
	Priority int64
	// TTL is the mc ttl annotation (4.x) or the expiration property
	// (3.x), in ms; -1 when unset.
	TTL int64
	// DeliveryCount is the mc delivery_count annotation; -1 when unset.
	DeliveryCount int64
}

// DecodeEnqueueMessage decodes the Msg of an enqueue command: a
// #basic_message (RabbitMQ 3.x) or an #mc (3.13+).
func DecodeEnqueueMessage(msg etf.Term) (EnqueueMessage, error) {
	m, err := rabbitmq.MessageFromTerm(msg)
	em := EnqueueMessage{Message: m, Priority: -1, TTL: -1, DeliveryCount: -1}
	if err != nil {
		return em, err
	}
	if m.Annotations != nil {
		if v, ok := MapGet(m.Annotations, "p"); ok {
			em.Priority, _ = v.(int64)
		}
		if v, ok := MapGet(m.Annotations, "ttl"); ok {
			if n, ok := v.(int64); ok {
				em.TTL = n
			}
		}
		if v, ok := MapGet(m.Annotations, "delivery_count"); ok {
			if n, ok := v.(int64); ok {
				em.DeliveryCount = n
			}
		}
	}
	if m.Properties != nil {
		if em.Priority < 0 && m.Properties.Priority != nil {
			em.Priority = int64(*m.Properties.Priority)
		}
		// 3.x: the expiration property (RabbitMQ keeps the properties
		// decoded exactly when it is set, for rabbit_fifo to read)
		if em.TTL < 0 && m.Properties.Expiration != nil {
			if n, err := strconv.ParseInt(*m.Properties.Expiration, 10, 64); err == nil && n >= 0 {
				em.TTL = n
			}
		}
	}
	return em, nil
}
