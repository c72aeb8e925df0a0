package ra

// A ra log entry (the Data of a WAL record or a segment slot) is the ETF
// of one of (ra_server.erl, ra 2.2.0 to 2.16):
//
//	{'$usr', Meta, Command, ReplyMode}     a state machine command
//	{noop, Meta, MachineVersion}           written by every new leader
//	{'$ra_cluster_change', Meta, Cluster, ReplyMode}
//	undefined                              the entry at index 0
//
// Meta is a map with ts (the leader's system time in ms) and, for
// commands sent with a reply, from.

import (
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Entry kinds.
const (
	EntryUser          = "$usr"
	EntryNoop          = "noop"
	EntryClusterChange = "$ra_cluster_change"
	EntryUndefined     = "undefined"
)

// Entry is a decoded ra log entry.
type Entry struct {
	Kind string   // EntryUser, EntryNoop, EntryClusterChange, EntryUndefined, or the tag of another tuple
	Term etf.Term // the whole decoded term
	// Meta fields
	TS   int64 // meta ts: ms since the epoch; 0 when absent
	From etf.Term
	// $usr
	Command   etf.Term
	ReplyMode etf.Term
	// noop
	MachineVersion int64
	// $ra_cluster_change
	Cluster []ServerID
}

// CommandName is the tag of a $usr command: the first element of a tuple
// command, or the atom of an atom command; "" otherwise.
func (e *Entry) CommandName() string {
	switch c := e.Command.(type) {
	case etf.Tuple:
		if len(c) > 0 {
			if a, ok := c[0].(etf.Atom); ok {
				return string(a)
			}
		}
	case etf.Atom:
		return string(c)
	}
	return ""
}

// DecodeEntry decodes entry data (exactly one term) whose first byte is
// at file offset off.
func DecodeEntry(b []byte, off int64) (Entry, error) {
	t, n, err := etf.DecodeAt(b, off)
	if err != nil {
		return Entry{}, err
	}
	if n != len(b) {
		return Entry{}, format.Corrupt(off+int64(n), "entry", format.ErrInvalid)
	}
	return EntryFromTerm(t), nil
}

// EntryFromTerm classifies a decoded entry term. A term of an unknown
// shape gets the Kind of its tag (or "" when it has none) and no fields.
func EntryFromTerm(t etf.Term) Entry {
	e := Entry{Term: t}
	switch v := t.(type) {
	case etf.Atom:
		e.Kind = string(v)
		return e
	case etf.Tuple:
		if len(v) == 0 {
			return e
		}
		tag, _ := v[0].(etf.Atom)
		e.Kind = string(tag)
		if len(v) >= 2 {
			if m, ok := v[1].(etf.Map); ok {
				if ts, ok := MapGet(m, "ts"); ok {
					e.TS, _ = ts.(int64)
				}
				e.From, _ = MapGet(m, "from")
			}
		}
		switch {
		case e.Kind == EntryUser && len(v) == 4:
			e.Command, e.ReplyMode = v[2], v[3]
		case e.Kind == EntryNoop && len(v) == 3:
			e.MachineVersion, _ = v[2].(int64)
		case e.Kind == EntryClusterChange && len(v) == 4:
			e.Cluster = clusterIDs(v[2])
			e.ReplyMode = v[3]
		}
	}
	return e
}

// EncodeUserEntry encodes a $usr entry the way ra writes it.
func EncodeUserEntry(ts int64, cmd, replyMode etf.Term) ([]byte, error) {
	return etf.EncodeTerm(etf.Tuple{etf.Atom(EntryUser), etf.Map{{Key: etf.Atom("ts"), Value: ts}}, cmd, replyMode}, etf.AtomsUTF8)
}

// EncodeNoopEntry encodes {noop, #{ts => TS}, MachineVersion}.
func EncodeNoopEntry(ts, machineVersion int64) ([]byte, error) {
	return etf.EncodeTerm(etf.Tuple{etf.Atom(EntryNoop), etf.Map{{Key: etf.Atom("ts"), Value: ts}}, machineVersion}, etf.AtomsUTF8)
}

// PeekCommand reads only the head of an entry that does not decode as a
// whole (damaged further on): the command name of a $usr entry and the
// command's leading elements that still decode (for an enqueue: its
// sequence number and, when the damage is after it, the message). ok is
// false when even the name is damaged.
func PeekCommand(b []byte) (name string, args []etf.Term, ok bool) {
	// 131, a tuple of 4: '$usr', Meta, Command, ReplyMode
	if len(b) < 3 || b[0] != etf.Version || b[1] != etf.TagSmallTuple || b[2] != 4 {
		return "", nil, false
	}
	p := 3
	elem := func() (etf.Term, bool) {
		sub := append([]byte{etf.Version}, b[p:]...)
		t, n, err := etf.DecodeAt(sub, 0)
		if err != nil {
			return nil, false
		}
		p += n - 1
		return t, true
	}
	if tag, ok := elem(); !ok || tag != etf.Atom(EntryUser) {
		return "", nil, false
	}
	if _, ok := elem(); !ok { // the meta map
		return "", nil, false
	}
	// the command: a small tuple whose first element is its name
	if p+2 > len(b) || b[p] != etf.TagSmallTuple {
		return "", nil, false
	}
	arity := int(b[p+1])
	p += 2
	cmd, ok := elem()
	a, isAtom := cmd.(etf.Atom)
	if !ok || !isAtom {
		return "", nil, false
	}
	for i := 1; i < arity; i++ {
		t, ok := elem()
		if !ok {
			break
		}
		args = append(args, t)
	}
	return string(a), args, true
}
