package rocketmq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// trMaxCQFile bounds the consume queue file read into memory: the broker
// default is 6,000,000 bytes (300000 units); 256 MiB allows a forty-fold
// larger mappedFileSizeConsumeQueue and still refuses a hostile size.
const trMaxCQFile = 256 << 20

// trCQFile is one file of a consume queue.
type trCQFile struct {
	name string // 20-digit name
	rel  string // relative to the data dir, OS separators
	base int64
}

// consumeQueues applies ConsumeQueue.truncateDirtyLogicFiles(end) to every
// consume queue under consumequeue/<topic>/<queueId>/.
func (t *trPlanner) consumeQueues() error {
	dir := filepath.Join(t.root, "consumequeue")
	topics, err := storefile.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range []string{"consumequeue_ext", "batchconsumequeue"} {
		if ents, err := storefile.ReadDir(filepath.Join(t.root, name)); err == nil && len(ents) > 0 {
			t.note("%s/ is present and is not truncated by this plan; its units past the end are dropped by the broker's own recovery", name)
		}
	}
	for _, tp := range topics {
		if !tp.IsDir() {
			continue
		}
		queues, err := storefile.ReadDir(filepath.Join(dir, tp.Name()))
		if err != nil {
			return err
		}
		for _, q := range queues {
			qid, err := strconv.Atoi(q.Name())
			if !q.IsDir() || err != nil {
				continue
			}
			if err := t.consumeQueue(tp.Name(), qid); err != nil {
				return err
			}
		}
	}
	return nil
}

// cqFiles lists the files of one consume queue in offset order.
func (t *trPlanner) cqFiles(relDir string) ([]trCQFile, error) {
	ents, err := storefile.ReadDir(filepath.Join(t.root, relDir))
	if err != nil {
		return nil, err
	}
	var out []trCQFile
	for _, e := range ents {
		base, err := rmq.ParseFileName(e.Name())
		if err != nil || !storefile.IsRegular(filepath.Join(t.root, relDir), e) {
			continue
		}
		out = append(out, trCQFile{name: e.Name(), rel: filepath.Join(relDir, e.Name()), base: base})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out, nil
}

func (t *trPlanner) readCQ(f trCQFile) ([]byte, error) {
	p := filepath.Join(t.root, f.rel)
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.Size() > trMaxCQFile {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a consume queue file may have", f.rel, st.Size(), trMaxCQFile)
	}
	return storefile.ReadFile(p)
}

// consumeQueue mirrors truncateDirtyLogicFiles on one queue: while the
// last file's first unit points at or past the end, remove that file;
// then in the new last file keep units while offset >= 0 && size > 0 &&
// offset < end, and zero every unit from the first one at or past the end.
func (t *trPlanner) consumeQueue(topic string, qid int) error {
	relDir := filepath.Join("consumequeue", topic, strconv.Itoa(qid))
	files, err := t.cqFiles(relDir)
	if err != nil {
		return err
	}
	cq := TruncateCQ{Dir: filepath.ToSlash(relDir), Topic: topic, QueueID: qid}
	bufs := make([][]byte, len(files))
	for i, f := range files {
		if bufs[i], err = t.readCQ(f); err != nil {
			return err
		}
	}
	cq.UnitsBefore = trCountValid(bufs)
	for i := len(files) - 1; i >= 0; i-- {
		b := bufs[i]
		if len(b) < rmq.CQUnitSize {
			t.note("%s is shorter than one unit; the broker refuses to load it; not repaired here", filepath.ToSlash(files[i].rel))
			break
		}
		u0, _ := rmq.DecodeCQUnit(b, 0)
		if u0.CommitLogOffset >= t.end {
			if err := t.removeCQFile(&cq, files[i], b); err != nil {
				return err
			}
			continue
		}
		if err := t.cutCQFile(&cq, files[i], b); err != nil {
			return err
		}
		break
	}
	if cq.UnitsDropped > 0 || len(cq.RemovedFiles) > 0 {
		t.rep.ConsumeQueues = append(t.rep.ConsumeQueues, cq)
	}
	return nil
}

func (t *trPlanner) removeCQFile(cq *TruncateCQ, f trCQFile, b []byte) error {
	n, ids := t.cqLost(b, 0)
	note := fmt.Sprintf("consume queue file whose first unit points at or past the recovery end %d: %d units dropped (their messages are counted in the commitlog actions)", t.end, n)
	a := repair.Action{Op: repair.OpRemoveFile, Path: f.rel, Reason: scanrmq.CodeCQBeyondRecovery, Lost: trLoss(int64(n), ids, note)}
	if err := t.add(a, false); err != nil {
		return err
	}
	cq.UnitsDropped += n
	cq.RemovedFiles = append(cq.RemovedFiles, f.name)
	return nil
}

// cutCQFile finds the first unit at or past the end after the run of
// valid units and zeroes it and every non-zero unit after it.
func (t *trPlanner) cutCQFile(cq *TruncateCQ, f trCQFile, b []byte) error {
	cut := -1
	for off := rmq.CQUnitSize; off+rmq.CQUnitSize <= len(b); off += rmq.CQUnitSize {
		u, _ := rmq.DecodeCQUnit(b[off:], int64(off))
		if !u.Valid() {
			break
		}
		if u.CommitLogOffset >= t.end {
			cut = off
			break
		}
	}
	if cut < 0 {
		return nil
	}
	last := len(b) - 1
	for last >= cut && b[last] == 0 {
		last--
	}
	end := cut + ((last-cut)/rmq.CQUnitSize+1)*rmq.CQUnitSize
	end = min(end, len(b))
	n, ids := t.cqLost(b[:end], cut)
	note := fmt.Sprintf("%d consume queue units from queue offset %d point at or past the recovery end %d (their messages are counted in the commitlog actions)",
		n, (f.base+int64(cut))/rmq.CQUnitSize, t.end)
	a := repair.Action{Op: repair.OpZeroRange, Path: f.rel, Offset: int64(cut), Length: int64(end - cut),
		Reason: scanrmq.CodeCQBeyondRecovery, Lost: trLoss(int64(n), ids, note)}
	if err := t.add(a, false); err != nil {
		return err
	}
	cq.UnitsDropped += n
	return nil
}

// cqLost counts the valid units of b from offset from and names the
// messages they point at when the commitlog still holds a decodable
// record there.
func (t *trPlanner) cqLost(b []byte, from int) (int, []string) {
	n := 0
	var ids []string
	for off := from; off+rmq.CQUnitSize <= len(b); off += rmq.CQUnitSize {
		u, _ := rmq.DecodeCQUnit(b[off:], int64(off))
		if !u.Valid() {
			continue
		}
		n++
		if u.IsPlaceholder() || len(ids) > TruncateMaxLostIDs {
			continue
		}
		if m, err := t.st.RecordAt(u.CommitLogOffset); m.Raw != nil && !m.IsBlank() && (err == nil || m.TotalSize == u.Size) {
			ids = append(ids, m.MsgID())
		}
	}
	return n, ids
}

// trCountValid counts the units a CQ recovery reads: valid units from the
// first file on, up to the first invalid one.
func trCountValid(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		for off := 0; off+rmq.CQUnitSize <= len(b); off += rmq.CQUnitSize {
			u, _ := rmq.DecodeCQUnit(b[off:], int64(off))
			if !u.Valid() {
				return n
			}
			n++
		}
	}
	return n
}
