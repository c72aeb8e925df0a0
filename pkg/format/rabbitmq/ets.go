package rabbitmq

// disk_log files written by ets:tab2file/3 (§1.4): msg_store_index.ets and
// file_summary.ets. Layout (erlang/otp lib/kernel/src/disk_log.hrl,
// disk_log_1.erl):
//
//	0   4   LOGMAGIC 01 02 03 04
//	4   4   status: 63 58 4D 0B closed | 06 07 08 09 opened (not closed)
//	8   ... items:
//	        Len:32, "bWLA" (62 57 4C 41), [MD5(<<Len:32>>):16 when Len >= 65528], Len bytes of ETF
//	        Len:32, 0C 21 2C 37 (old MAGICHEAD), Len bytes of ETF
//
// Item 1 is the table info proplist, then one item per object, then
// ['$end_of_table', [{count, N}]] when extended_info includes object_count.

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
	"github.com/storectl/storectl/pkg/format/etf"
)

// disk_log magic numbers.
var (
	etsLogMagic  = []byte{1, 2, 3, 4}
	etsClosed    = []byte{0x63, 0x58, 0x4D, 0x0B}
	etsOpened    = []byte{6, 7, 8, 9}
	etsBigMagic  = []byte{0x62, 0x57, 0x4C, 0x41}
	etsOldMagic  = []byte{0x0C, 0x21, 0x2C, 0x37}
	etsEndOfData = etf.Atom("$end_of_table")
)

const (
	etsHeaderLen = 8
	etsItemHead  = 8
	// etsMinMD5Term is disk_log's MIN_MD5_TERM: items this large carry an
	// MD5 of their size field after the magic.
	etsMinMD5Term = 65528
)

// MaxETSItemSize bounds one disk_log item. ets:tab2file writes one table
// object per item; the largest RabbitMQ object is a few dozen bytes, and
// info proplists are under 1 KiB, so 64 MiB rejects only corrupt lengths.
const MaxETSItemSize = 64 << 20

// ETSFile is a decoded ets:tab2file dump.
type ETSFile struct {
	Closed  bool   // status word says the log was closed properly
	InfoRaw []byte // ETF bytes of item 1, the table info proplist
	Info    etf.Term
	Objects []etf.Term // table objects in file order
	ObjOffs []int64    // file offset of each object's ETF bytes
	Count   int64      // count from the end-of-table marker, -1 if absent
}

// InfoValue returns the value of key in the info tuple (tab2file writes
// the proplist as a tuple of {Key, Value} pairs), or nil.
func (f *ETSFile) InfoValue(key string) etf.Term {
	elems, ok := f.Info.(etf.Tuple)
	if !ok {
		l, _ := etf.ProperList(f.Info)
		elems = l
	}
	for _, e := range elems {
		if t, ok := e.(etf.Tuple); ok && len(t) == 2 && t[0] == etf.Atom(key) {
			return t[1]
		}
	}
	return nil
}

// ReadETSItems splits a disk_log file into its item payloads (ETF bytes,
// aliasing b) and reports whether the log was closed. A torn last item is
// an ErrShort CorruptError at the item's offset.
func ReadETSItems(b []byte) (items [][]byte, closed bool, err error) {
	its, closed, err := etsItems(b)
	for _, it := range its {
		items = append(items, it.data)
	}
	return items, closed, err
}

// etsItem is one item payload and the file offset of its first ETF byte.
type etsItem struct {
	off  int64
	data []byte
}

func etsItems(b []byte) (items []etsItem, closed bool, err error) {
	closed, err = etsEachItem(b, func(it etsItem) { items = append(items, it) })
	return items, closed, err
}

// etsEachItem is etsItems handing each item to fn as it is framed; an
// error ends the walk (fn has then seen the items before it).
func etsEachItem(b []byte, fn func(etsItem)) (closed bool, err error) {
	return EachETSItem(b, func(data []byte, off int64) error { fn(etsItem{off, data}); return nil })
}

// EachETSItem frames a disk_log file item by item, with every check of
// ReadETSItems (log magic and status, item magic, size bound and MD5),
// and hands each item's payload (ETF bytes, aliasing b) and the offset of
// its first byte to fn as it is framed. It stops at the first framing
// error, returned as a CorruptError, or the first error of fn, returned
// as it is; fn has then seen the items before it. closed reports the
// header's status. The one framing reader of the .ets dumps: whoever
// wants the items without holding them (an index of millions of
// messages) walks them with it.
func EachETSItem(b []byte, fn func(data []byte, off int64) error) (closed bool, err error) {
	c := format.Cursor{B: b}
	if !bytes.Equal(c.Take("logMagic", 4), etsLogMagic) {
		c.FailAt(0, "logMagic", format.ErrMagic)
		return false, c.Err(0)
	}
	status := c.Take("status", 4)
	switch {
	case bytes.Equal(status, etsClosed):
		closed = true
	case bytes.Equal(status, etsOpened):
	default:
		c.FailAt(4, "status", format.ErrMagic)
		return false, c.Err(0)
	}
	for c.Remaining() > 0 {
		at := c.Off
		size := c.U32("itemSize")
		magic := c.Take("itemMagic", 4)
		if c.Failed() {
			break
		}
		big := bytes.Equal(magic, etsBigMagic)
		if !big && !bytes.Equal(magic, etsOldMagic) {
			c.FailAt(at+4, "itemMagic", format.ErrMagic)
			break
		}
		if size > MaxETSItemSize {
			c.FailAt(at, "itemSize", format.ErrTooLarge)
			break
		}
		if big && size >= etsMinMD5Term {
			sum := c.Take("itemMD5", md5.Size)
			want := md5.Sum(b[at : at+4])
			if sum != nil && !bytes.Equal(sum, want[:]) {
				c.FailAt(at+etsItemHead, "itemMD5", format.ErrChecksum)
				break
			}
		}
		if p := c.Take("item", int(size)); p != nil {
			if err := fn(p, int64(c.Off-len(p))); err != nil {
				return closed, err
			}
		}
	}
	return closed, c.Err(0)
}

// ReadETSFile decodes a whole tab2file dump: info, objects and the
// end-of-table count. Error offsets are absolute within b.
func ReadETSFile(b []byte) (*ETSFile, error) {
	f := &ETSFile{}
	w, err := etsWalk(b, nil, func(t etf.Term, base int64) {
		f.Objects = append(f.Objects, t)
		f.ObjOffs = append(f.ObjOffs, base)
	}, nil)
	if err != nil {
		return nil, err
	}
	f.Closed, f.Info, f.InfoRaw, f.Count = w.closed, w.info, w.infoRaw, w.count
	if f.Count >= 0 && f.Count != int64(len(f.Objects)) {
		return f, format.Corrupt(int64(len(b)), "count", format.ErrInvalid)
	}
	return f, nil
}

// ReadETSInfo is ReadETSFile without keeping the objects (Objects and
// ObjOffs stay empty): the same checks and errors, every object decoded
// and let go, for a caller that needs the header, the info and the count
// of a dump of millions of objects.
func ReadETSInfo(b []byte) (*ETSFile, error) {
	w, err := etsWalk(b, nil, func(etf.Term, int64) {}, nil)
	if err != nil {
		return nil, err
	}
	f := &ETSFile{Closed: w.closed, Info: w.info, InfoRaw: w.infoRaw, Count: w.count}
	if f.Count >= 0 && f.Count != int64(w.objects) {
		return f, format.Corrupt(int64(len(b)), "count", format.ErrInvalid)
	}
	return f, nil
}

// etsWalked is what etsWalk saw of a dump besides its objects.
type etsWalked struct {
	closed  bool
	info    etf.Term
	infoRaw []byte
	count   int64 // the end-of-table count; -1 when absent
	objects int
}

// etsWalk reads a tab2file dump for ReadETSFile and CheckMsgStoreIndex,
// keeping none of the items: a first pass frames them all (a framing
// error wins over a decode error), a second decodes them in order: the
// info, the objects, and an end of table that must be the last item.
// quick, when set, may accept an object's payload without a decode (obj
// is then not called for it); obj gets every other object. The count is
// left to the caller to check against the objects. reached, when set, is
// told each item's offset in both passes.
func etsWalk(b []byte, quick func(it []byte) bool, obj func(t etf.Term, base int64), reached func(off int64)) (w etsWalked, err error) {
	if reached == nil {
		reached = func(int64) {}
	}
	items := 0
	if w.closed, err = etsEachItem(b, func(it etsItem) { items++; reached(it.off) }); err != nil {
		return etsWalked{}, err
	}
	if items == 0 {
		return etsWalked{}, format.Corrupt(int64(len(b)), "info", format.ErrShort)
	}
	w.count = -1
	i := 0
	_, _ = etsEachItem(b, func(item etsItem) { // framed above: no error
		if err != nil {
			return
		}
		it, base := item.data, item.off
		reached(base)
		if i > 0 && quick != nil && quick(it) {
			w.objects++
			i++
			return
		}
		t, n, derr := etf.DecodeAt(it, base)
		if derr == nil && n != len(it) {
			derr = format.Corrupt(base+int64(n), "item", format.ErrInvalid)
		}
		switch {
		case derr != nil:
			err = derr
		case i == 0:
			w.infoRaw, w.info = it, t
		case etsIsEnd(t):
			w.count = etsEndCount(t)
			if i != items-1 {
				err = format.Corrupt(base, "$end_of_table", format.ErrInvalid)
			}
		default:
			w.objects++
			obj(t, base)
		}
		i++
	})
	if err != nil {
		return etsWalked{}, err
	}
	return w, nil
}

func etsIsEnd(t etf.Term) bool {
	l, ok := t.(etf.List)
	return ok && len(l.Elems) == 2 && l.Elems[0] == etsEndOfData
}

// etsEndCount reads N from ['$end_of_table', [{count, N}]]; -1 if absent.
func etsEndCount(t etf.Term) int64 {
	props, _ := etf.ProperList(t.(etf.List).Elems[1])
	for _, p := range props {
		if tup, ok := p.(etf.Tuple); ok && len(tup) == 2 && tup[0] == etf.Atom("count") {
			if n, ok := tup[1].(int64); ok {
				return n
			}
		}
	}
	return -1
}

// etsAppendItem frames one ETF payload as a disk_log item.
func etsAppendItem(out, etf []byte) []byte {
	out = binary.BigEndian.AppendUint32(out, uint32(len(etf)))
	out = append(out, etsBigMagic...)
	if len(etf) >= etsMinMD5Term {
		sum := md5.Sum(out[len(out)-8 : len(out)-4])
		out = append(out, sum[:]...)
	}
	return append(out, etf...)
}
