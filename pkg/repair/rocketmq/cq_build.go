package rocketmq

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// cqbQueue is one rebuilt consume queue: units[i] is the unit with queue
// offset first+i. Placeholders (fillPreBlank) are included.
type cqbQueue struct {
	rbQueue
	first   int64
	units   []rmq.CQUnit
	records int64 // real (non-placeholder) units
}

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
func cqbBuild(d *rbData, fileSize int64) ([]*cqbQueue, []DispatchWarning, error) {
	qs := make([]*cqbQueue, len(d.queues))
	var warns []DispatchWarning
	maxPhy := make([]int64, len(d.queues))
	perFile := fileSize / rmq.CQUnitSize
	for _, r := range d.recs {
		if r.queue < 0 {
			continue
		}
		qi := d.queues[r.queue]
		warn := func(what string) {
			warns = append(warns, DispatchWarning{qi.Topic, qi.QueueID, r.phy, r.queueOffset, what})
		}
		if !cqbSafeTopic(qi.Topic) || qi.QueueID < 0 || r.queueOffset < 0 || r.queueOffset > (1<<62)/rmq.CQUnitSize {
			warn("topic, queue id or queue offset cannot be a consume queue position; record not dispatched")
			continue
		}
		q := qs[r.queue]
		unit := rmq.CQUnit{CommitLogOffset: r.phy, Size: r.size, TagsCode: r.tagsCode}
		if q == nil {
			q = &cqbQueue{rbQueue: qi}
			q.first = r.queueOffset / perFile * perFile // file boundary; fillPreBlank before it
			for i := q.first; i < r.queueOffset; i++ {
				q.units = append(q.units, rmq.CQUnit{Size: rmq.CQPlaceholderSize})
			}
			qs[r.queue] = q
		}
		if r.phy+int64(r.size) <= maxPhy[r.queue] {
			warn("offset+size not beyond the queue's max physical offset; skipped like the broker (build repeatedly)")
			continue
		}
		next := q.first + int64(len(q.units))
		switch {
		case r.queueOffset < next:
			warn("queue offset below the write position; skipped like the broker (build repeatedly)")
			continue
		case r.queueOffset > next:
			if r.queueOffset-next > perFile {
				return nil, warns, fmt.Errorf("consume queue %s/%d: queue offset jumps from %d to %d at phy offset %d; refusing to fill the gap",
					qi.Topic, qi.QueueID, next, r.queueOffset, r.phy)
			}
			warn(fmt.Sprintf("queue offset gap from %d; filled with placeholders", next))
			for i := next; i < r.queueOffset; i++ {
				q.units = append(q.units, rmq.CQUnit{Size: rmq.CQPlaceholderSize})
			}
		}
		q.units = append(q.units, unit)
		q.records++
		maxPhy[r.queue] = r.phy + int64(r.size)
	}
	out := qs[:0]
	for _, q := range qs {
		if q != nil {
			out = append(out, q)
		}
	}
	return out, warns, nil
}

// cqbDir is the queue's dir relative to the data dir.
func cqbDir(t string, qid int32) string {
	return filepath.Join("consumequeue", t, strconv.Itoa(int(qid)))
}

// files lists the files (relative paths) the rebuilt queue occupies.
func (q *cqbQueue) files(fileSize int64) []string {
	var out []string
	perFile := fileSize / rmq.CQUnitSize
	for i := int64(0); i < int64(len(q.units)); i += perFile {
		base := (q.first + i) * rmq.CQUnitSize
		out = append(out, filepath.Join(cqbDir(q.Topic, q.QueueID), rmq.FormatFileName(base)))
	}
	return out
}

// unitAt returns the rebuilt unit with queue offset idx (zero past the end).
func (q *cqbQueue) unitAt(idx int64) rmq.CQUnit {
	if i := idx - q.first; i >= 0 && i < int64(len(q.units)) {
		return q.units[i]
	}
	return rmq.CQUnit{}
}

// fileBytes appends to buf the units of the queue's fi-th file (the
// file's bytes up to its last unit: the rest of the file is zeros).
func (q *cqbQueue) fileBytes(fi int, fileSize int64, buf []byte) []byte {
	perFile := fileSize / rmq.CQUnitSize
	lo := int64(fi) * perFile
	for _, u := range q.units[lo:min(lo+perFile, int64(len(q.units)))] {
		buf = rmq.AppendCQUnit(buf, u)
	}
	return buf
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
	return writeSized(p, b, fileSize)
}

// writeSized creates path with b followed by zeros up to size bytes.
func writeSized(path string, b []byte, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
