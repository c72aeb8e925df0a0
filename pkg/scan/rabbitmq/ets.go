package rabbitmq

// Readers for the clean-shutdown dumps of the message store (§1.4):
// msg_store_index.ets and file_summary.ets, written by ets:tab2file as a
// disk_log "halt" log: an 8-byte header (LOGMAGIC 01020304 + CLOSED
// 63584D0B), then items <<Len:32, "bWLA", [MD5:16 when Len >= 65528],
// ETF:Len/binary>>. Item 1 is the table info, then one item per object.
// pkg/format/rabbitmq has no reader for them yet; this one only needs the
// objects.

import (
	"fmt"

	"github.com/storectl/storectl/pkg/format/etf"

	"github.com/storectl/storectl/pkg/format"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// etsMaxFile bounds how much of an .ets dump is read: one index object is
// about 60 bytes, so 1 GiB covers ~17 million messages, beyond any store
// this tool is meant for.
const etsMaxFile = 1 << 30

// IndexEntry is one {msg_location, MsgId, RefCount, File, Offset,
// TotalSize} object of msg_store_index.ets.
type IndexEntry struct {
	MsgID     [16]byte
	RefCount  int64
	File      int64
	Offset    int64
	TotalSize int64
}

// FileSummary is one {file_summary, File, ValidTotalSize, _, _, FileSize,
// Locked, _} object of file_summary.ets.
type FileSummary struct {
	File           int64
	ValidTotalSize int64
	FileSize       int64
}

// etsObjects decodes every object (items after the info item) of a dump.
func etsObjects(b []byte) ([]etf.Tuple, error) {
	var out []etf.Tuple
	err := etsEachObject(b, func(t etf.Tuple, _ int64) { out = append(out, t) })
	return out, err
}

// etsEachObject calls fn for every object of a dump that decodes to a
// tuple, with the offset of its first ETF byte, in order, up to the first
// item that does not decode (the error).
func etsEachObject(b []byte, fn func(etf.Tuple, int64)) error {
	return etsEachItem(b, objectsTo(fn))
}

// objectsTo is etsEachObject's item callback: it decodes an item and hands
// the objects (tuples after the info item) to fn.
func objectsTo(fn func(etf.Tuple, int64)) func(raw []byte, q int64, item int) error {
	return func(raw []byte, q int64, item int) error {
		t, err := etf.DecodeExactTerm(raw)
		if err != nil {
			return format.Corrupt(q, "item", fmt.Errorf("%w: %v", format.ErrInvalid, err))
		}
		if tup, ok := t.(etf.Tuple); ok && item > 0 {
			fn(tup, q)
		}
		return nil
	}
}

// etsEachItem calls fn with every item's ETF bytes, their offset and the
// item's number, in order, up to the first framing error or error of fn.
// The framing and its checks are the format's (rfmt.EachETSItem).
func etsEachItem(b []byte, fn func(raw []byte, q int64, item int) error) error {
	item := 0
	_, err := rfmt.EachETSItem(b, func(raw []byte, q int64) error {
		err := fn(raw, q, item)
		item++
		return err
	})
	return err
}

func etsInt(t etf.Term) (int64, bool) {
	v, ok := t.(int64)
	return v, ok
}

// ParseIndexETS decodes msg_store_index.ets.
func ParseIndexETS(b []byte) ([]IndexEntry, error) {
	var out []IndexEntry
	err := eachIndexEntry(b, func(e IndexEntry, _ int64) { out = append(out, e) })
	return out, err
}

// eachIndexEntry calls fn for every well-formed msg_location object of a
// msg_store_index.ets dump, in order, up to the first item that does not
// decode (the error); other objects are skipped. fn also gets the offset
// of the object's ETF bytes. Objects of the usual shape are decoded
// without building terms (rfmt.QuickMsgLocation).
func eachIndexEntry(b []byte, fn func(IndexEntry, int64)) error {
	full := objectsTo(func(o etf.Tuple, etsOff int64) {
		if len(o) != 6 || o[0] != etf.Atom("msg_location") {
			return
		}
		id, ok := o[1].(etf.Binary)
		rc, ok2 := etsInt(o[2])
		f, ok3 := etsInt(o[3])
		off, ok4 := etsInt(o[4])
		ts, ok5 := etsInt(o[5])
		if !ok || len(id) != 16 || !ok2 || !ok3 || !ok4 || !ok5 {
			return
		}
		e := IndexEntry{RefCount: rc, File: f, Offset: off, TotalSize: ts}
		copy(e.MsgID[:], id)
		fn(e, etsOff)
	})
	return etsEachItem(b, func(raw []byte, q int64, item int) error {
		if item > 0 {
			if l, ok := rfmt.QuickMsgLocation(raw); ok {
				fn(IndexEntry{MsgID: l.MsgID, RefCount: l.RefCount, File: l.File, Offset: l.Offset, TotalSize: l.TotalSize}, q)
				return nil
			}
		}
		return full(raw, q, item)
	})
}

// ParseFileSummaryETS decodes file_summary.ets.
func ParseFileSummaryETS(b []byte) ([]FileSummary, error) {
	objs, err := etsObjects(b)
	var out []FileSummary
	for _, o := range objs {
		if len(o) != 8 || o[0] != etf.Atom("file_summary") {
			continue
		}
		f, ok := etsInt(o[1])
		v, ok2 := etsInt(o[2])
		s, ok3 := etsInt(o[5])
		if ok && ok2 && ok3 {
			out = append(out, FileSummary{File: f, ValidTotalSize: v, FileSize: s})
		}
	}
	return out, err
}
