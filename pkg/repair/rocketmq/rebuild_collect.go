package rocketmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// rbRecord is what the rebuilder keeps of one valid commitlog record:
// about 56 bytes plus 4 per index key, so a store of N messages needs
// roughly 64*N bytes while planning.
type rbRecord struct {
	phy         int64
	storeTS     int64
	queueOffset int64
	tagsCode    int64
	size        int32
	queue       int32  // index into rbData.queues; -1 when not dispatched to a CQ
	keyEnd      uint32 // rbData.keys[prev.keyEnd:keyEnd] are this record's index key hashes
}

// rbQueue names one consume queue.
type rbQueue struct {
	Topic   string
	QueueID int32
}

// rbData is everything the builders need from the commitlog.
type rbData struct {
	recs        []rbRecord
	keys        []int32 // IndexKeyHash of topic#key, per record in order
	queues      []rbQueue
	recoveryEnd int64
	lmq         int // records carrying INNER_MULTI_DISPATCH
	scan        *scan.Result
}

// rbCollector turns the records of one commitlog file into rbRecords;
// files are collected in parallel and absorbed in offset order, so queue
// ids and key offsets are local to the file until then.
type rbCollector struct {
	d    rbData
	qidx map[string]int32
	keys rmq.IndexKeyHasher // index key hashes, the topic prefix hashed once per run
	qBuf []byte
}

// rbCollect scans the commitlog once (ScanCommitLog, jobs files at once)
// and keeps the records before the recovery end: records past it are
// never dispatched by a correct recovery.
//
// feed, when set, is given each commitlog file's records (and key hashes)
// once they are absorbed, in offset order, before the cut at the recovery
// end.
func rbCollect(ctx context.Context, cfg scanrmq.Config, jobs int, progress func(int64), feed func(idxbBatch)) (*rbData, error) {
	all := &rbCollector{qidx: map[string]int32{}}
	var tooMany error
	var mu sync.Mutex
	var free []*rbCollector // absorbed collectors, whose slices the next file reuses
	cfg.OnFile = func(int, int64) scanrmq.FileHook {
		mu.Lock()
		c := &rbCollector{qidx: map[string]int32{}}
		if n := len(free); n > 0 {
			c, free = free[n-1], free[:n-1]
		}
		mu.Unlock()
		return scanrmq.FileHook{Message: c.onMessage, Done: func() {
			from, keyFrom := len(all.d.recs), len(all.d.keys)
			if err := all.absorb(c); err != nil {
				if tooMany == nil {
					tooMany = err
				}
				return
			}
			if feed != nil && tooMany == nil {
				n, k := len(all.d.recs), len(all.d.keys)
				feed(idxbBatch{recs: all.d.recs[from:n:n], keys: all.d.keys[keyFrom:k:k], keyBase: uint32(keyFrom)})
			}
			mu.Lock()
			free = append(free, c)
			mu.Unlock()
		}}
	}
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	res, err := scanrmq.ScanCommitLog(ctx, cfg, scan.Options{Jobs: jobs, Progress: progress})
	if err != nil {
		return nil, err
	}
	if tooMany != nil {
		return nil, tooMany
	}
	if res.Incomplete {
		return nil, fmt.Errorf("commitlog scan incomplete, refusing to rebuild from it: %v", res.Errors)
	}
	if res.RecoveryEnd == nil {
		return nil, errors.New("commitlog scan gave no recovery end")
	}
	d := &all.d
	d.scan, d.recoveryEnd = res, *res.RecoveryEnd
	// Records arrive in offset order; cut those at or past the recovery end.
	n := sort.Search(len(d.recs), func(i int) bool { return d.recs[i].phy >= d.recoveryEnd })
	if n < len(d.recs) {
		if n > 0 {
			d.keys = d.keys[:d.recs[n-1].keyEnd]
		} else {
			d.keys = d.keys[:0]
		}
		d.recs = d.recs[:n]
	}
	return d, nil
}

// maxRecords bounds the records one plan keeps in memory (64 bytes each,
// so about 16 GiB): past it the plan fails instead of the process being
// killed for memory.
const maxRecords = 1 << 28

// maxKeys bounds the index key hashes one plan keeps (4 bytes each, so
// 16 GiB): a record's keyEnd is a uint32, and past it the key offsets
// would wrap and slicing the keys by them (keysOf, the incremental index
// build) would panic.
const maxKeys = 1<<32 - 1

// errTooManyKeys is the plan's failure past maxKeys.
var errTooManyKeys = fmt.Errorf("more than %d index keys: too many to rebuild in memory", int64(maxKeys))

func (c *rbCollector) onMessage(m *rmq.Message, phy int64) error {
	if len(c.d.recs) >= maxRecords {
		return fmt.Errorf("more than %d records: too many to rebuild in memory", maxRecords)
	}
	r := rbRecord{phy: phy, storeTS: m.StoreTimestamp, queueOffset: m.QueueOffset, size: m.TotalSize, queue: -1}
	// One walk of the properties for the four keys.
	var vals [len(rmq.DispatchProps)][]byte
	var found [len(rmq.DispatchProps)]bool
	rmq.LookupProperties(m.Properties, rmq.DispatchProps[:], vals[:], found[:])
	if m.Dispatched() { // NOT_TYPE or COMMIT
		r.tagsCode = rmq.DispatchTagsCode(m, vals[:], found[:])
		r.queue = c.queue(m.Topic, m.QueueID)
		if found[rmq.DispatchMulti] {
			c.d.lmq++
		}
	}
	rmq.ForEachIndexKey(m, vals[:], found[:], func(k []byte) { c.addKey(m.Topic, k) })
	if int64(len(c.d.keys)) > maxKeys {
		return errTooManyKeys
	}
	r.keyEnd = uint32(len(c.d.keys))
	c.d.recs = append(c.d.recs, r)
	return nil
}

// queue returns the index of (topic, queueID) in c.d.queues, adding it.
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

// absorb appends one file's records (collected by f) to c, mapping queue
// ids and key offsets, and frees them.
func (c *rbCollector) absorb(f *rbCollector) error {
	if len(c.d.recs)+len(f.d.recs) > maxRecords {
		return fmt.Errorf("more than %d records: too many to rebuild in memory", maxRecords)
	}
	if int64(len(c.d.keys))+int64(len(f.d.keys)) > maxKeys {
		return errTooManyKeys
	}
	ids := make([]int32, len(f.d.queues))
	for i, q := range f.d.queues {
		ids[i] = c.queue([]byte(q.Topic), q.QueueID)
	}
	off := uint32(len(c.d.keys))
	c.d.keys = append(growDouble(c.d.keys, len(f.d.keys)), f.d.keys...)
	c.d.recs = growDouble(c.d.recs, len(f.d.recs))
	for _, r := range f.d.recs {
		if r.queue >= 0 {
			r.queue = ids[r.queue]
		}
		r.keyEnd += off
		c.d.recs = append(c.d.recs, r)
	}
	c.d.lmq += f.d.lmq
	// Keep f's emptied slices (not its queue names: their ids are local
	// to one file) for the next file's collector.
	f.d = rbData{recs: f.d.recs[:0], keys: f.d.keys[:0]}
	clear(f.qidx)
	return nil
}

// growDouble makes room for n more elements, at least doubling the
// capacity when it grows: the store's record table is appended to file
// by file and append's 1.25x steps for large slices would copy it many
// times over.
func growDouble[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	out := make([]T, len(s), max(2*cap(s), len(s)+n))
	copy(out, s)
	return out
}

// addKey records IndexKeyHash(topic + "#" + key) (IndexService.buildKey).
// The hash code of topic + "#" is computed once per run of records of
// one topic and continued over each key.
func (c *rbCollector) addKey(topic, key []byte) {
	c.d.keys = append(c.d.keys, c.keys.Hash(topic, key))
}

// keysOf returns the index key hashes of record i.
func (d *rbData) keysOf(i int) []int32 {
	start := uint32(0)
	if i > 0 {
		start = d.recs[i-1].keyEnd
	}
	return d.keys[start:d.recs[i].keyEnd]
}
