package rabbitmq

// v2 part of ReadQueueDir: every <S>.qi with its <S>.qs, following
// rabbit_classic_queue_index_v2:recover_segments/5 and recover_segment/10
// (a dirty recovery) and queue_index_walker_segment/2 (ref counts).

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"

	"github.com/storectl/storectl/pkg/format"
)

func (q *QueueDir) readV2(qi, qs []uint64) ([]QueueEntry, error) {
	sort.Slice(qi, func(i, j int) bool { return qi[i] < qi[j] })
	hasQI := map[uint64]bool{}
	for _, s := range qi {
		hasQI[s] = true
	}
	hasQS := map[uint64]bool{}
	for _, s := range qs {
		hasQS[s] = true
		if !hasQI[s] {
			p := filepath.Join(q.Dir, strconv.FormatUint(s, 10)+".qs")
			q.anomaly(p, format.Corrupt(0, "file", fmt.Errorf("%w: .qs without .qi", format.ErrInvalid)), CodeQSOrphan)
		}
	}
	var out []QueueEntry
	for _, seg := range qi {
		es, err := q.readQISegment(seg, hasQS[seg])
		if err != nil {
			return nil, err
		}
		if q.seg != nil {
			if err := q.handSegment(es); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, es...)
	}
	return out, nil
}

// handSegment gives one segment's entries, in seq order, to q.seg, and
// drops the segment's walker references (the caller reads them with
// ReadVHostQueuesRefs when it needs them).
func (q *QueueDir) handSegment(es []QueueEntry) error {
	sort.SliceStable(es, func(i, j int) bool { return es[i].SeqID < es[j].SeqID })
	if len(es) > 0 {
		if q.segAny && es[0].SeqID < q.segMax {
			return ErrSegmentOrder
		}
		q.segMax, q.segAny = es[len(es)-1].SeqID, true
	}
	q.Refs = q.Refs[:0]
	if cap(es) > 0 {
		q.segOut = es[:0] // the next segment's entries are built here
	}
	return q.seg(q, es)
}

func (q *QueueDir) readQISegment(seg uint64, hasQS bool) ([]QueueEntry, error) {
	name := strconv.FormatUint(seg, 10) + ".qi"
	path := filepath.Join(q.Dir, name)
	var qsBuf *[]byte // nil: read into a new buffer
	if q.refsOnly {
		// Nothing kept aliases the .qs bytes: read them into a recycled
		// buffer, given back on return. (A kept entry's Body aliases its
		// .qs, so the other modes do not.)
		qsBuf = segBufs.Get().(*[]byte)
		defer segBufs.Put(qsBuf)
	}
	// Nothing aliases the .qi bytes past this call (the records' Raw are
	// decoded into entries that do not keep it): the dir's one buffer.
	b, ok, err := q.readInto(name, &q.qiBuf)
	if err != nil || !ok {
		return nil, err
	}
	f := &q.qiScratch
	err = rfmt.ReadQIInto(f, b)
	if err != nil {
		// The broker deletes the .qi and its .qs: nothing is recovered.
		q.anomaly(path, err, CodeQIBadHeader)
		return nil, nil
	}
	for _, a := range f.Anomalies {
		code := CodeQIBadEntry
		if errors.Is(a, rfmt.ErrQITornEntry) {
			code = CodeQITorn
		}
		q.anomaly(path, a, code)
	}
	span := f.Header.ToSeqID - f.Header.FromSeqID
	if span == 0 || span > rfmt.QIMaxSegmentEntryCount {
		span = rfmt.QIDefaultSegmentEntryCount
	}
	if want := seg * span; f.Header.FromSeqID != want {
		q.anomaly(path, format.Corrupt(5, "fromSeqId", fmt.Errorf("%w: %d, file name says %d",
			format.ErrInvalid, f.Header.FromSeqID, want)), CodeQISeqMismatch)
	}
	// The broker numbers slots from the file name, not the header.
	base := seg * span
	first := len(q.Refs)
	for _, r := range f.WalkerRefs {
		ref := QueueRef{Path: path, Slot: r.Slot, SeqID: base + uint64(r.Slot), ID: r.MsgID}
		if q.hexIDs() {
			ref.MsgID = queuedirHex(r.MsgID)
		}
		q.Refs = append(q.Refs, ref)
	}
	if q.refFn != nil {
		// Handed over a segment at a time: a queue's references are
		// never all held.
		q.handed += len(q.Refs) - first
		q.refFn(q, q.Refs[first:])
		q.Refs = q.Refs[:first]
	}
	var qsFile []byte
	qsPath := filepath.Join(q.Dir, strconv.FormatUint(seg, 10)+".qs")
	if hasQS {
		if qsFile, ok, err = q.readInto(filepath.Base(qsPath), qsBuf); err != nil {
			return nil, err
		} else if !ok {
			hasQS = false
		}
	}
	if q.refsOnly {
		// Only the .qs checks matter (their anomalies); no entry is kept.
		for _, r := range f.Records {
			if r.LocType == rfmt.QILocQueueStore {
				e := QueueEntry{StoreOffset: r.StoreOffset, StoreSize: r.StoreSize, StorePath: qsPath}
				q.checkQS(&e, qsFile, hasQS)
			}
		}
		return nil, nil
	}
	var out []QueueEntry
	if q.seg != nil {
		// Handed over and forgotten (handSegment) before the next
		// segment is read: built in the dir's one slice.
		out = q.segOut[:0]
	}
	if cap(out) < len(f.Records) {
		out = make([]QueueEntry, 0, len(f.Records))
	}
	refs := slotHex{refs: q.Refs[first:]}
	for _, r := range f.Records {
		e := QueueEntry{SeqID: base + uint64(r.Slot), Persistent: r.Persistent, Size: r.Size,
			Expiry: r.Expiry, IndexVersion: 2, Path: path, Offset: r.Offset}
		switch r.LocType {
		case rfmt.QILocMemory:
			e.Location = LocationMemory
			e.Drop = DropOther
		case rfmt.QILocSharedStore:
			e.Location = LocationSharedStore
			e.ID, e.HasID = r.MsgID, true
			if q.hexIDs() {
				e.MsgID = refs.hex(r.Slot, r.MsgID)
			}
		case rfmt.QILocQueueStore:
			e.Location = LocationQueueStore
			e.StoreOffset, e.StoreSize, e.StorePath = r.StoreOffset, r.StoreSize, qsPath
			e.Drop = q.checkQS(&e, qsFile, hasQS)
		}
		if !e.Persistent {
			e.Drop = DropTransient
		}
		out = append(out, e)
	}
	return out, nil
}

// checkQS looks up a type-2 entry in its .qs as check_msg_on_disk/3 does,
// fills MsgID-independent fields and returns the drop reason.
func (q *QueueDir) checkQS(e *QueueEntry, qs []byte, exists bool) string {
	if !exists {
		err := format.Corrupt(0, "file", rfmt.ErrQSNoFile)
		q.anomaly(e.StorePath, err, CodeQSBadEntry)
		return rfmt.QSDropReason(err)
	}
	ent, err := rfmt.ReadQSEntry(qs, e.StoreOffset, e.StoreSize)
	if ent.Blob != nil {
		e.Body = ent.Blob
	}
	if err != nil {
		code := CodeQSBadEntry
		if errors.Is(err, format.ErrChecksum) {
			code = CodeQSCRC
		}
		q.anomaly(e.StorePath, err, code)
	}
	return rfmt.QSDropReason(err)
}

// slotHex hands out the hex msg id of a slot, reusing the string of the
// walker reference of the same slot (both lists are in slot order), so a
// referenced entry's id is encoded once.
type slotHex struct {
	refs []QueueRef
	i    int
}

func (h *slotHex) hex(slot int, id [16]byte) string {
	for h.i < len(h.refs) && h.refs[h.i].Slot < slot {
		h.i++
	}
	if h.i < len(h.refs) && h.refs[h.i].Slot == slot {
		var buf [32]byte
		hex.Encode(buf[:], id[:])
		if s := h.refs[h.i].MsgID; s == string(buf[:]) { // no allocation
			return s
		}
	}
	return queuedirHex(id)
}
