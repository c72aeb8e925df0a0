package ra

// ra snapshot and checkpoint files (ra_log_snapshot.erl, same in ra
// 2.2.0, 2.14.0 and 2.16.13), <dir>/snapshot.dat:
//
//	"RASN" | Version:8 (= 1) | CRC:32 | MetaLen:32 | Meta (ETF) | State (ETF)
//
// CRC is the IEEE CRC-32 of everything from offset 9 to end of file. Meta
// is a map with index, term, cluster and machine_version; State is the
// machine state term (for a quorum queue, the rabbit_fifo record).

import (
	"encoding/binary"

	"github.com/storectl/storectl/internal/crc32x"
	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Snapshot file constants.
const (
	SnapshotMagic     = "RASN"
	SnapshotVersion   = 1
	SnapshotHeaderLen = 13 // magic, version, CRC, MetaLen
	SnapshotFile      = "snapshot.dat"
)

// ServerID is a ra server id {Name, Node}.
type ServerID struct {
	Name string
	Node string
}

func (s ServerID) String() string { return s.Name + "@" + s.Node }

// SnapshotMeta is the decoded meta map.
type SnapshotMeta struct {
	Index          uint64
	Term           uint64
	MachineVersion int64
	Cluster        []ServerID
}

// Snapshot is a decoded snapshot.dat. Meta and State alias the input.
type Snapshot struct {
	CRC      uint32 // as stored; 0 for a snapshot whose install did not complete
	CRCOK    bool   // the stored CRC matches the data
	Meta     SnapshotMeta
	MetaTerm etf.Term
	// StateOff is the file offset of State.
	StateOff int64
	State    []byte
}

// DecodeSnapshotHeader checks the first 13 bytes and returns the stored
// CRC and the meta length. A wrong version is ErrUnsupported (ra:
// invalid_version), a wrong magic ErrMagic (ra: invalid_format).
func DecodeSnapshotHeader(b []byte) (crc uint32, metaLen uint32, err error) {
	if len(b) < SnapshotHeaderLen {
		return 0, 0, format.Corrupt(int64(len(b)), "header", format.ErrShort)
	}
	if string(b[:4]) != SnapshotMagic {
		return 0, 0, format.Corrupt(0, "magic", format.ErrMagic)
	}
	if b[4] != SnapshotVersion {
		return 0, 0, format.Corrupt(4, "version", format.ErrUnsupported)
	}
	return binary.BigEndian.Uint32(b[5:9]), binary.BigEndian.Uint32(b[9:13]), nil
}

// DecodeSnapshot decodes a whole snapshot.dat. A CRC mismatch is not an
// error (Snapshot.CRCOK is false: ra skips such a snapshot, and removes
// such a checkpoint); a meta or state that does not decode is.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	crc, metaLen, err := DecodeSnapshotHeader(b)
	if err != nil {
		return s, err
	}
	s.CRC = crc
	s.CRCOK = crc32x.ChecksumIEEE(b[9:]) == crc
	if int64(metaLen) > int64(len(b)-SnapshotHeaderLen) {
		return s, format.Corrupt(9, "meta_len", format.ErrShort)
	}
	meta := b[SnapshotHeaderLen : SnapshotHeaderLen+int(metaLen)]
	t, n, err := etf.DecodeAt(meta, SnapshotHeaderLen)
	if err != nil {
		return s, err
	}
	if n != len(meta) {
		return s, format.Corrupt(SnapshotHeaderLen+int64(n), "meta", format.ErrInvalid)
	}
	s.MetaTerm = t
	if s.Meta, err = snapshotMeta(t); err != nil {
		return s, err
	}
	s.StateOff = SnapshotHeaderLen + int64(metaLen)
	s.State = b[s.StateOff:]
	if _, err := etf.SkipAt(s.State, s.StateOff); err != nil {
		return s, err
	}
	return s, nil
}

// snapshotMeta reads #{index, term, cluster, machine_version}.
func snapshotMeta(t etf.Term) (SnapshotMeta, error) {
	var m SnapshotMeta
	mp, ok := t.(etf.Map)
	if !ok {
		return m, format.Corrupt(SnapshotHeaderLen, "meta", format.ErrInvalid)
	}
	idx, ok1 := MapGet(mp, "index")
	term, ok2 := MapGet(mp, "term")
	i, ok3 := idx.(int64)
	tm, ok4 := term.(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || i < 0 || tm < 0 {
		return m, format.Corrupt(SnapshotHeaderLen, "meta", format.ErrInvalid)
	}
	m.Index, m.Term = uint64(i), uint64(tm)
	if v, ok := MapGet(mp, "machine_version"); ok {
		m.MachineVersion, _ = v.(int64)
	}
	if c, ok := MapGet(mp, "cluster"); ok {
		m.Cluster = clusterIDs(c)
	}
	return m, nil
}

// clusterIDs reads the server ids of a cluster: a map keyed by id (ra 2.x)
// or a list of ids.
func clusterIDs(t etf.Term) []ServerID {
	var out []ServerID
	switch v := t.(type) {
	case etf.Map:
		for _, e := range v {
			if id, ok := ServerIDFromTerm(e.Key); ok {
				out = append(out, id)
			}
		}
	case etf.List:
		for _, e := range v.Elems {
			if id, ok := ServerIDFromTerm(e); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// ServerIDFromTerm reads {Name, Node} with two atoms.
func ServerIDFromTerm(t etf.Term) (ServerID, bool) {
	tup, ok := t.(etf.Tuple)
	if !ok || len(tup) != 2 {
		return ServerID{}, false
	}
	n, ok1 := tup[0].(etf.Atom)
	d, ok2 := tup[1].(etf.Atom)
	return ServerID{Name: string(n), Node: string(d)}, ok1 && ok2
}

// MapGet returns the value of the atom key k in m.
func MapGet(m etf.Map, k string) (etf.Term, bool) {
	for _, e := range m {
		if a, ok := e.Key.(etf.Atom); ok && string(a) == k {
			return e.Value, true
		}
	}
	return nil, false
}

// AppendSnapshot encodes a snapshot.dat from an ETF meta and state, with
// the CRC ra computes.
func AppendSnapshot(b []byte, meta, state []byte) []byte {
	start := len(b)
	b = append(b, SnapshotMagic...)
	b = append(b, SnapshotVersion, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	b = append(b, state...)
	binary.BigEndian.PutUint32(b[start+5:], crc32x.ChecksumIEEE(b[start+9:]))
	return b
}
