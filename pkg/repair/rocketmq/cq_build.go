package rocketmq

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/sparse"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// DispatchWarning is an anomaly met while dispatching a record to its
// consume queue (a skipped or gap-filled unit), for the report.
type DispatchWarning struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queue_id"`
	PhyOffset   int64  `json:"phy_offset"`
	QueueOffset int64  `json:"queue_offset"`
	What        string `json:"what"`
}

// cqbSafeTopic reports whether a topic can be a directory name: the broker
// only allows [%|a-zA-Z0-9_-]; anything that could leave the queue dir is
// refused.
func cqbSafeTopic(t string) bool {
	return t != "" && t != "." && t != ".." && !strings.ContainsAny(t, "/\\\x00") && len(t) <= 255
}

// cqbFile is one rebuilt consume queue file: its path relative to the
// data dir and its units up to the last (the rest of the file is zeros).
type cqbFile struct {
	rel   string
	bytes []byte
}

// cqbBuild dispatches the records of d to consume queues the way
// ConsumeQueue.putMessagePositionInfo does on an empty consumequeue dir:
// the first unit of a queue whose queue offset is not 0 gets its file
// created at the file boundary below it and pre-blank placeholders before
// it; a unit whose queue offset is below the write position is skipped
// ("build consume queue repeatedly"), as is one whose phyOffset+size does
// not pass the queue's max physical offset. Where the broker would append
// a unit after a queue-offset gap at the write position ("[BUG]logic queue
// order maybe wrong"), we keep unit index == queue offset and fill the
// gap with placeholders, up to one file of units; a larger gap fails.
//
// It reads the units back from d's sort, queue by queue in the order the
// records first name them, and hands each queue's files to file in order
// as they fill (one file's bytes in memory at a time, valid during the
// call), then its real unit count to done. Warnings come in commitlog
// order. A gap too large fails the plan with the first such record in
// commitlog order; the queues are still all walked to find it, without
// calling file.
func cqbBuild(d *rbData, fileSize int64, file func(q rbQueue, f cqbFile) error, done func(q rbQueue, records int64)) ([]DispatchWarning, error) {
	it, err := d.cq.Iter()
	if err != nil {
		return nil, err
	}
	perFile := fileSize / rmq.CQUnitSize
	var warns []DispatchWarning
	var gapErr error
	gapPhy := int64(-1)
	buf := make([]byte, 0, min(fileSize, 1<<20))
	var (
		q            rbQueue
		qi           = int32(-1)
		started      bool  // the queue has its first unit
		first, next  int64 // queue offset of the first unit of the queue, of the next unit
		fileBase     int64 // queue offset of buf's first unit
		maxPhy       int64
		records      int64
		failed       bool // a gap too large: stop building this queue
		emitDisabled bool // some queue failed: build nothing more
	)
	emit := func() error {
		if len(buf) == 0 {
			return nil
		}
		defer func() { buf = buf[:0] }()
		if emitDisabled {
			return nil
		}
		return file(q, cqbFile{rel: filepath.Join(cqbDir(q.Topic, q.QueueID), rmq.FormatFileName(fileBase*rmq.CQUnitSize)), bytes: buf})
	}
	// put appends a unit at queue offset next, starting a new file at
	// each file boundary.
	put := func(u rmq.CQUnit) error {
		if next-fileBase == perFile {
			if err := emit(); err != nil {
				return err
			}
			fileBase = next
		}
		buf = rmq.AppendCQUnit(buf, u)
		next++
		return nil
	}
	end := func() error {
		if qi < 0 {
			return nil
		}
		if err := emit(); err != nil {
			return err
		}
		if started && !emitDisabled {
			done(q, records)
		}
		return nil
	}
	for it.Next() {
		e := it.Record()
		if e.phy >= d.recoveryEnd {
			continue // never dispatched by a correct recovery
		}
		if e.queue != qi {
			if err := end(); err != nil {
				return warns, err
			}
			qi, q, started, failed, maxPhy, records = e.queue, d.queues[e.queue], false, false, 0, 0
		}
		warn := func(what string) {
			warns = append(warns, DispatchWarning{q.Topic, q.QueueID, e.phy, e.queueOffset, what})
		}
		if failed {
			continue
		}
		if !cqbSafeTopic(q.Topic) || q.QueueID < 0 || e.queueOffset < 0 || e.queueOffset > (1<<62)/rmq.CQUnitSize {
			warn("topic, queue id or queue offset cannot be a consume queue position; record not dispatched")
			continue
		}
		unit := rmq.CQUnit{CommitLogOffset: e.phy, Size: e.size, TagsCode: e.tagsCode}
		if !started {
			started = true
			first = e.queueOffset / perFile * perFile // file boundary; fillPreBlank before it
			next, fileBase = first, first
			for next < e.queueOffset {
				if err := put(rmq.CQUnit{Size: rmq.CQPlaceholderSize}); err != nil {
					return warns, err
				}
			}
		}
		if e.phy+int64(e.size) <= maxPhy {
			warn("offset+size not beyond the queue's max physical offset; skipped like the broker (build repeatedly)")
			continue
		}
		switch {
		case e.queueOffset < next:
			warn("queue offset below the write position; skipped like the broker (build repeatedly)")
			continue
		case e.queueOffset > next:
			if e.queueOffset-next > perFile {
				if gapPhy < 0 || e.phy < gapPhy {
					gapPhy = e.phy
					gapErr = fmt.Errorf("consume queue %s/%d: queue offset jumps from %d to %d at phy offset %d; refusing to fill the gap",
						q.Topic, q.QueueID, next, e.queueOffset, e.phy)
				}
				failed, emitDisabled = true, true
				continue
			}
			warn(fmt.Sprintf("queue offset gap from %d; filled with placeholders", next))
			for next < e.queueOffset {
				if err := put(rmq.CQUnit{Size: rmq.CQPlaceholderSize}); err != nil {
					return warns, err
				}
			}
		}
		if err := put(unit); err != nil {
			return warns, err
		}
		records++
		maxPhy = e.phy + int64(e.size)
	}
	if err := it.Err(); err != nil {
		return warns, err
	}
	if err := end(); err != nil {
		return warns, err
	}
	sort.SliceStable(warns, func(i, j int) bool { return warns[i].PhyOffset < warns[j].PhyOffset })
	if gapErr != nil {
		// The plan fails with the first gap in commitlog order, and the
		// warnings the dispatch met before it.
		n := sort.Search(len(warns), func(i int) bool { return warns[i].PhyOffset >= gapPhy })
		return warns[:n], gapErr
	}
	return warns, nil
}

// cqbDir is the queue's dir relative to the data dir.
func cqbDir(t string, qid int32) string {
	return filepath.Join("consumequeue", t, strconv.Itoa(int(qid)))
}

// stageFile writes one of the queue's files, b then zeros up to fileSize,
// at stage/rel. The zero tail (most of a queue's last file) is left a
// hole: the staged file reads and hashes the same, and staging a store's
// queues does not write megabytes of zeros per queue.
func stageFile(stage, rel string, b []byte, fileSize int64) error {
	p := filepath.Join(stage, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return sparse.WriteFile(p, b, fileSize)
}
