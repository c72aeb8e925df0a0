package rocketmq

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/storectl/storectl/internal/runsort"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// The rebuild reads the commitlog once, in order, and keeps nothing that
// grows with it in memory: each record's consume queue unit goes to an
// external sort by queue (runsort: sorted runs in temp files, merged),
// which the consume queue builder reads back queue by queue (cq_build.go),
// and each record's index keys go to the index builder in batches as they
// come (indexfile_incr.go). What the plan reports of the records is
// counted per commitlog file, so that the records past the recovery end,
// known only when the scan ends, can be left out.

// rbRecord is what the index builder needs of one valid commitlog record.
type rbRecord struct {
	phy     int64
	storeTS int64
	keyEnd  uint32 // batch.keys[prev.keyEnd:keyEnd] are this record's index key hashes
}

// rbQueue names one consume queue.
type rbQueue struct {
	Topic   string
	QueueID int32
}

// cqEntry is one dispatched record on its way to its consume queue,
// sorted by queue (stable: within a queue, in commitlog order).
type cqEntry struct {
	queue       int32
	size        int32
	phy         int64
	queueOffset int64
	tagsCode    int64
}

var cqEntryCodec = runsort.Codec[cqEntry]{Size: 32,
	Append: func(b []byte, e cqEntry) []byte {
		le := binary.LittleEndian
		b = le.AppendUint32(b, uint32(e.queue))
		b = le.AppendUint32(b, uint32(e.size))
		b = le.AppendUint64(b, uint64(e.phy))
		b = le.AppendUint64(b, uint64(e.queueOffset))
		return le.AppendUint64(b, uint64(e.tagsCode))
	},
	Decode: func(b []byte) cqEntry {
		le := binary.LittleEndian
		return cqEntry{queue: int32(le.Uint32(b)), size: int32(le.Uint32(b[4:])), phy: int64(le.Uint64(b[8:])),
			queueOffset: int64(le.Uint64(b[16:])), tagsCode: int64(le.Uint64(b[24:]))}
	},
}

// rbFileSum is what the plan reports of one commitlog file's records.
type rbFileSum struct {
	base         int64 // the file's first physical offset
	last         int64 // phy of its last valid record
	records      int
	keys         int
	lastDispatch int64 // store time of its last record dispatched to a consume queue
	dispatched   bool
}

// rbData is what the builders and the report take from the commitlog.
type rbData struct {
	queues      []rbQueue // by id, in the order the records first name them
	cq          *runsort.Sorter[cqEntry]
	files       []rbFileSum
	recoveryEnd int64
	lmq         int // records carrying INNER_MULTI_DISPATCH (all the scan met, as before the cut)
	fedPast     bool
	scan        *scan.Result
}

// counts sums the files that hold records before the recovery end (all
// of a file's records are, but in the files past the one where recovery
// stops: fedPast says when there are such records, and a second scan then
// counts exactly).
func (d *rbData) counts() (records, keys int, lastDispatch int64, dispatched bool) {
	for _, f := range d.files {
		if f.records == 0 || f.last >= d.recoveryEnd {
			continue
		}
		records, keys = records+f.records, keys+f.keys
		if f.dispatched {
			lastDispatch, dispatched = f.lastDispatch, true
		}
	}
	return
}

// Close releases the consume queue sort's temp files.
func (d *rbData) Close() error {
	if d.cq == nil {
		return nil
	}
	return d.cq.Close()
}

// rbBatchLen is the records per batch handed to the index builder.
const rbBatchLen = 4096

// rbCollector turns the commitlog's records, in order, into consume queue
// entries, index batches and per-file counts.
type rbCollector struct {
	d     *rbData
	qidx  map[string]int32
	keys  rmq.IndexKeyHasher // index key hashes, the topic prefix hashed once per run
	qBuf  []byte
	feed  func(idxbBatch)
	cut   int64 // feed only records below it (a second pass); -1: feed all
	batch idxbBatch
	cur   *rbFileSum // the current commitlog file's counts
}

func newRBCollector(d *rbData, feed func(idxbBatch), cut int64) *rbCollector {
	return &rbCollector{d: d, qidx: map[string]int32{}, feed: feed, cut: cut}
}

// rbCollect scans the commitlog once, in order (ScanCommitLog with one
// job, so that the file hooks come in file order), sorting the consume queue units of every record and
// feeding the index builder as it goes. feed may be nil.
//
// The index build is speculative: the scan cannot know the recovery end
// before it ends, and the records past it (in the files after the one
// where recovery stops) are never dispatched by a correct recovery.
// d.fedPast says when such records were fed; the caller then builds the
// index again from a second scan that feeds only the records before it
// (rbRefeed). The consume queue entries past it are dropped when they
// are read back.
func rbCollect(ctx context.Context, cfg scanrmq.Config, progress func(int64), feed func(idxbBatch), runLen int) (*rbData, error) {
	d := &rbData{cq: &runsort.Sorter[cqEntry]{Compare: func(a, b cqEntry) int { return cmp.Compare(a.queue, b.queue) },
		Codec: cqEntryCodec, RunLen: runLen}}
	c := newRBCollector(d, feed, -1)
	cfg.OnFile = c.onFile
	res, err := scanrmq.ScanCommitLog(ctx, cfg, scan.Options{Jobs: 1, Progress: progress})
	c.flush()
	if err != nil {
		d.Close()
		return nil, err
	}
	if res.Incomplete {
		d.Close()
		return nil, fmt.Errorf("commitlog scan incomplete, refusing to rebuild from it: %v", res.Errors)
	}
	if res.RecoveryEnd == nil {
		d.Close()
		return nil, errors.New("commitlog scan gave no recovery end")
	}
	d.scan, d.recoveryEnd = res, *res.RecoveryEnd
	for _, f := range d.files {
		if f.records > 0 && f.last >= d.recoveryEnd {
			d.fedPast = true
		}
	}
	return d, nil
}

// rbRefeed scans the commitlog again and feeds the index builder only the
// records before d's recovery end; d's counts are then taken from them.
func rbRefeed(ctx context.Context, cfg scanrmq.Config, d *rbData, feed func(idxbBatch)) error {
	exact := &rbData{recoveryEnd: d.recoveryEnd}
	c := newRBCollector(exact, feed, d.recoveryEnd)
	cfg.OnFile = c.onFile
	res, err := scanrmq.ScanCommitLog(ctx, cfg, scan.Options{Jobs: 1})
	c.flush()
	if err == nil && res.Incomplete {
		err = fmt.Errorf("commitlog scan incomplete: %v", res.Errors)
	}
	d.files, d.fedPast = exact.files, false
	return err
}

// onFile starts the counts of commitlog file i (scanned with one job: its
// records come before the next file's hook).
func (c *rbCollector) onFile(i int, base int64) scanrmq.FileHook {
	c.d.files = append(c.d.files, rbFileSum{base: base})
	c.cur = &c.d.files[len(c.d.files)-1]
	return scanrmq.FileHook{Message: c.onMessage}
}

func (c *rbCollector) onMessage(m *rmq.Message, phy int64) error {
	if c.cut >= 0 && phy >= c.cut {
		return nil
	}
	f := c.cur
	f.records++
	f.last = phy
	// One walk of the properties for the four keys.
	var vals [len(rmq.DispatchProps)][]byte
	var found [len(rmq.DispatchProps)]bool
	rmq.LookupProperties(m.Properties, rmq.DispatchProps[:], vals[:], found[:])
	if m.Dispatched() { // NOT_TYPE or COMMIT
		e := cqEntry{queue: c.queue(m.Topic, m.QueueID), size: m.TotalSize, phy: phy, queueOffset: m.QueueOffset,
			tagsCode: rmq.DispatchTagsCode(m, vals[:], found[:])}
		if c.d.cq != nil {
			if err := c.d.cq.Add(e); err != nil {
				return err
			}
		}
		f.lastDispatch, f.dispatched = m.StoreTimestamp, true
		if found[rmq.DispatchMulti] {
			c.d.lmq++
		}
	}
	before := len(c.batch.keys)
	rmq.ForEachIndexKey(m, vals[:], found[:], func(k []byte) { c.batch.keys = append(c.batch.keys, c.keys.Hash(m.Topic, k)) })
	f.keys += len(c.batch.keys) - before
	c.batch.recs = append(c.batch.recs, rbRecord{phy: phy, storeTS: m.StoreTimestamp, keyEnd: uint32(len(c.batch.keys))})
	if len(c.batch.recs) >= rbBatchLen {
		c.flush()
	}
	return nil
}

// flush hands the current batch to the index builder.
func (c *rbCollector) flush() {
	if len(c.batch.recs) == 0 {
		return
	}
	if c.feed != nil {
		c.feed(c.batch)
	}
	c.batch = idxbBatch{}
}

// queue returns the id of (topic, queueID), adding it.
func (c *rbCollector) queue(topic []byte, queueID int32) int32 {
	c.qBuf = binary.BigEndian.AppendUint32(append(c.qBuf[:0], topic...), uint32(queueID))
	q, ok := c.qidx[string(c.qBuf)]
	if !ok {
		q = int32(len(c.d.queues))
		c.d.queues = append(c.d.queues, rbQueue{Topic: string(topic), QueueID: queueID})
		c.qidx[string(c.qBuf)] = q
	}
	return q
}
