package rabbitmq

// Typed views of the two store tables dumped with ets:tab2file (§4.1,
// §4.2), and encoders that write them back in the broker's shape.

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// Table names in the info proplist.
const (
	MsgStoreIndexTable = "rabbit_msg_store_ets_index"
	FileSummaryTable   = "rabbit_msg_store_file_summary"
)

// MsgLocation is {msg_location, MsgId, RefCount, File, Offset, TotalSize}.
type MsgLocation struct {
	MsgID     [16]byte
	RefCount  int64
	File      int64 // .rdq number
	Offset    int64 // offset of the record's size field
	TotalSize int64 // Size + 9
}

// FileSummary is {file_summary, File, ValidTotalSize, Left, Right,
// FileSize, Locked, Readers}. Left, Right and Readers are file numbers and
// a reader count in ≤3.12 and 'undefined' in 3.13+; they are kept as terms
// so a rewrite reproduces them.
type FileSummary struct {
	File           int64
	ValidTotalSize int64
	Left, Right    etf.Term
	FileSize       int64
	Locked         bool
	Readers        etf.Term
}

// ReadMsgStoreIndex decodes msg_store_index.ets, with ReadETSFile's
// checks and errors, then the table name's, then each object's shape.
// The objects are decoded one at a time into the result (those of the
// usual shape without building terms: QuickMsgLocation), never all held
// as terms.
func ReadMsgStoreIndex(b []byte) ([]MsgLocation, error) {
	var out []MsgLocation
	var shapeErr error
	w, err := etsWalk(b,
		func(it []byte) bool {
			l, ok := QuickMsgLocation(it)
			if ok && shapeErr == nil {
				out = append(out, l)
			}
			return ok
		},
		func(t etf.Term, base int64) {
			l, ok := msgLocation(t)
			if !ok && shapeErr == nil {
				shapeErr = format.Corrupt(base, "msg_location", format.ErrInvalid)
			}
			if shapeErr == nil {
				out = append(out, l)
			}
		}, nil)
	if err != nil {
		return nil, err
	}
	if w.count >= 0 && w.count != int64(w.objects) {
		return nil, format.Corrupt(int64(len(b)), "count", format.ErrInvalid)
	}
	f := &ETSFile{Info: w.info}
	if n := f.InfoValue("name"); n != nil && n != etf.Atom(MsgStoreIndexTable) {
		return nil, format.Corrupt(etsHeaderLen+etsItemHead, "name", format.ErrInvalid)
	}
	if shapeErr != nil {
		return nil, shapeErr
	}
	return out, nil
}

// msgLocation decodes one msg_store_index.ets object.
func msgLocation(o etf.Term) (MsgLocation, bool) {
	t, ok := o.(etf.Tuple)
	var l MsgLocation
	var id etf.Binary
	if ok && len(t) == 6 && t[0] == etf.Atom("msg_location") {
		id, ok = t[1].(etf.Binary)
		ok = ok && len(id) == 16
		ok = etsInts(t[2:], &l.RefCount, &l.File, &l.Offset, &l.TotalSize) && ok
	} else {
		ok = false
	}
	if ok {
		l.MsgID = [16]byte(id)
	}
	return l, ok
}

// CheckMsgStoreIndex checks msg_store_index.ets as ReadMsgStoreIndex
// does, and fails with the same error, without keeping what it decodes
// (an index of millions of messages): one pass frames the items, a second
// decodes them one at a time. It returns whether the log was closed and
// how many objects it holds. reached, when not nil, is told the offset of
// each item as a pass reaches it: a caller that maps b a window at a time
// (fileview.Stream) lets go of what is behind.
func CheckMsgStoreIndex(b []byte, reached func(off int64)) (closed bool, objects int, err error) {
	var shapeErr error
	w, err := etsWalk(b,
		func(it []byte) bool { _, ok := QuickMsgLocation(it); return ok }, // an object of the usual shape
		func(t etf.Term, base int64) {
			if _, ok := msgLocation(t); !ok && shapeErr == nil {
				shapeErr = format.Corrupt(base, "msg_location", format.ErrInvalid)
			}
		}, reached)
	if err != nil {
		return false, 0, err
	}
	if w.count >= 0 && w.count != int64(w.objects) {
		return false, 0, format.Corrupt(int64(len(b)), "count", format.ErrInvalid)
	}
	f := &ETSFile{Info: w.info}
	if n := f.InfoValue("name"); n != nil && n != etf.Atom(MsgStoreIndexTable) {
		return false, 0, format.Corrupt(etsHeaderLen+etsItemHead, "name", format.ErrInvalid)
	}
	if shapeErr != nil {
		return false, 0, shapeErr
	}
	return w.closed, w.objects, nil
}

// ReadFileSummary decodes file_summary.ets.
func ReadFileSummary(b []byte) ([]FileSummary, error) {
	f, err := etsReadTable(b, FileSummaryTable)
	if err != nil {
		return nil, err
	}
	out := make([]FileSummary, 0, len(f.Objects))
	for i, o := range f.Objects {
		t, ok := o.(etf.Tuple)
		var s FileSummary
		if ok && len(t) == 8 && t[0] == etf.Atom("file_summary") {
			ok = etsInts([]etf.Term{t[1], t[2], t[5]}, &s.File, &s.ValidTotalSize, &s.FileSize)
			ok = ok && (t[6] == etf.Atom("true") || t[6] == etf.Atom("false"))
			s.Left, s.Right, s.Locked, s.Readers = t[3], t[4], t[6] == etf.Atom("true"), t[7]
		}
		if !ok {
			return nil, format.Corrupt(f.ObjOffs[i], "file_summary", format.ErrInvalid)
		}
		out = append(out, s)
	}
	return out, nil
}

// etsReadTable reads a dump and checks the table name when present.
func etsReadTable(b []byte, name string) (*ETSFile, error) {
	f, err := ReadETSFile(b)
	if err != nil {
		return nil, err
	}
	if n := f.InfoValue("name"); n != nil && n != etf.Atom(name) {
		return nil, format.Corrupt(etsHeaderLen+etsItemHead, "name", format.ErrInvalid)
	}
	return f, nil
}

// etsInts stores each term into its int64 destination.
func etsInts(ts []etf.Term, dst ...*int64) bool {
	for i, t := range ts {
		v, ok := t.(int64)
		if !ok {
			return false
		}
		*dst[i] = v
	}
	return true
}

// ETSEncodeOptions controls how a table dump is written.
type ETSEncodeOptions struct {
	// Info is the info tuple to write (e.g. ETSFile.Info of the dump being
	// replaced); its size entry is set to the object count. Nil builds one
	// with the same keys and order as OTP 25/27 tab2file writes.
	Info etf.Term
	// Node names the node for a built info (node, and the node of the
	// placeholder id reference and owner pid). Default "rabbit@localhost".
	Node string
	// Atoms is the atom encoding: AtomsLatin1 for OTP ≤25 (RabbitMQ ≤3.12),
	// AtomsUTF8 for OTP 26+.
	Atoms etf.AtomEncoding
}

// EncodeMsgStoreIndex writes a closed msg_store_index.ets.
func EncodeMsgStoreIndex(locs []MsgLocation, o ETSEncodeOptions) ([]byte, error) {
	objs := make([]etf.Term, 0, len(locs))
	for _, l := range locs {
		objs = append(objs, etf.Tuple{etf.Atom("msg_location"), etf.Binary(l.MsgID[:]), l.RefCount, l.File, l.Offset, l.TotalSize})
	}
	return etsEncode(MsgStoreIndexTable, "set", objs, o)
}

// EncodeFileSummary writes a closed file_summary.ets. The table is an
// ordered_set, so callers should pass summaries sorted by File.
func EncodeFileSummary(sums []FileSummary, o ETSEncodeOptions) ([]byte, error) {
	objs := make([]etf.Term, 0, len(sums))
	for _, s := range sums {
		locked := etf.Atom("false")
		if s.Locked {
			locked = "true"
		}
		objs = append(objs, etf.Tuple{etf.Atom("file_summary"), s.File, s.ValidTotalSize, etsUndef(s.Left), etsUndef(s.Right),
			s.FileSize, locked, etsUndef(s.Readers)})
	}
	return etsEncode(FileSummaryTable, "ordered_set", objs, o)
}

func etsUndef(t etf.Term) etf.Term {
	if t == nil {
		return etf.Atom("undefined")
	}
	return t
}

// QuickMsgLocation decodes one msg_store_index.ets object's ETF bytes (an
// item's payload) when it has the shape ets:tab2file writes for the
// broker's entries: a 6-tuple of the atom msg_location (any of the four
// atom encodings), a 16-byte binary and four small or 32-bit integers, and
// nothing after it. It allocates nothing. ok is false for any other shape,
// which the full decoder (DecodeTerm) must then judge: whenever ok is
// true, the full decoder gives the same location (FuzzQuickMsgLocation).
func QuickMsgLocation(b []byte) (l MsgLocation, ok bool) {
	if len(b) < 3 || b[0] != etf.Version || b[1] != etf.TagSmallTuple || b[2] != 6 {
		return l, false
	}
	p := 3
	const name = "msg_location"
	switch {
	case p+2 <= len(b) && (b[p] == etf.TagSmallAtom || b[p] == etf.TagSmallAtomUTF8) && int(b[p+1]) == len(name):
		p += 2
	case p+3 <= len(b) && (b[p] == etf.TagAtom || b[p] == etf.TagAtomUTF8) && b[p+1] == 0 && int(b[p+2]) == len(name):
		p += 3
	default:
		return l, false
	}
	if p+len(name) > len(b) || string(b[p:p+len(name)]) != name {
		return l, false
	}
	p += len(name)
	if p+5+16 > len(b) || b[p] != etf.TagBinary || binary.BigEndian.Uint32(b[p+1:]) != 16 {
		return l, false
	}
	copy(l.MsgID[:], b[p+5:p+21])
	p += 21
	for _, dst := range []*int64{&l.RefCount, &l.File, &l.Offset, &l.TotalSize} {
		switch {
		case p+2 <= len(b) && b[p] == etf.TagSmallInteger:
			*dst = int64(b[p+1])
			p += 2
		case p+5 <= len(b) && b[p] == etf.TagInteger:
			*dst = int64(int32(binary.BigEndian.Uint32(b[p+1:])))
			p += 5
		default:
			return l, false
		}
	}
	return l, p == len(b)
}
