package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// cqFile is one file of a consume queue dir.
type cqFile struct {
	name string
	path string
	rel  string
	base int64 // parsed name: byte offset in the queue stream; -1 when unparsable
	size int64
	// irregular: a dir, FIFO, socket or device under the file's name
	// (storefile.Irregular): listed so that the walk stops there and its
	// units are unknown, not missing; size 0.
	irregular bool
}

// queueState is one consume queue as found on disk and scanned.
type queueState struct {
	topic   string
	queueID int32
	rel     string // consumequeue/<topic>/<queueId>
	files   []cqFile
	exists  bool
	units   int64 // queue max offset: index of the first invalid unit
	minIdx  int64 // index of the first unit of the first file
	lastEnd int64 // offset+size of the last real unit (0 if none)
	real    int64 // real (non-placeholder) units
	// claim is what the collectors claimed of the queue (nil: every unit
	// is looked up); claimCut says its walk stopped before claimUpTo,
	// the first unit it did not reach.
	claim     *claimQueue
	claimCut  bool
	claimUpTo int64
	// unreadFile is the file the unit walk could not read ("" when it
	// read them all); the units from unreadFrom (a queue offset, that
	// file's first) on are unknown.
	unreadFile string
	unreadFrom int64
}

// listQueues reads consumequeue/<topic>/<queueId>/ into v.queues and
// picks the consume queue file size.
func (v *verifier) listQueues() error {
	root := filepath.Join(v.cfg.Root, "consumequeue")
	topics, err := storefile.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		qs, err := storefile.ReadDir(filepath.Join(root, t.Name()))
		if err != nil {
			return err
		}
		for _, q := range qs {
			qdir := filepath.Join(root, t.Name(), q.Name())
			id, err := strconv.ParseInt(q.Name(), 10, 32)
			if !q.IsDir() || err != nil || id < 0 {
				v.res.Add(scan.Finding{Code: CodeCQBadFileName, Severity: scan.Warning, Path: v.rel(qdir), Repair: scan.RepairNone,
					Message: "entry in a topic's consume queue dir is not a queue id directory; the broker ignores or fails on it"})
				continue
			}
			qs := &queueState{topic: t.Name(), queueID: int32(id), rel: v.rel(qdir), exists: true}
			if err := v.listQueueFiles(qs, qdir); err != nil {
				return err
			}
			v.queues[queueKey{qs.topic, qs.queueID}] = qs
		}
	}
	return nil
}

func (v *verifier) listQueueFiles(qs *queueState, qdir string) error {
	ents, err := storefile.ReadDir(qdir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !storefile.IsRegular(qdir, e) {
			if _, ok := storefile.Irregular(qdir, e); ok {
				if b, err := rmq.ParseFileName(e.Name()); err == nil {
					p := filepath.Join(qdir, e.Name())
					qs.files = append(qs.files, cqFile{name: e.Name(), path: p, rel: v.rel(p), base: b, irregular: true})
				}
			}
			continue
		}
		st, err := storefile.Info(qdir, e)
		if err != nil {
			return err
		}
		p := filepath.Join(qdir, e.Name())
		f := cqFile{name: e.Name(), path: p, rel: v.rel(p), size: st.Size(), base: -1}
		if b, err := rmq.ParseFileName(e.Name()); err == nil {
			f.base = b
		}
		qs.files = append(qs.files, f)
	}
	sort.Slice(qs.files, func(i, j int) bool {
		a, b := qs.files[i], qs.files[j]
		if a.base != b.base {
			return a.base < b.base
		}
		return a.name < b.name
	})
	return nil
}

// pickCQFileSize returns the consume queue mapped file size and where it
// came from: the config, the most common size of files that are not the
// last of their queue (those are full), or the broker default.
func (v *verifier) pickCQFileSize() (int64, string) {
	if v.cfg.CQFileSize > 0 {
		return v.cfg.CQFileSize, "config"
	}
	count := map[int64]int{}
	lastCount := map[int64]int{}
	for _, q := range v.queues {
		for i, f := range q.files {
			if f.size <= 0 || f.size%rmq.CQUnitSize != 0 {
				continue
			}
			if i < len(q.files)-1 {
				count[f.size]++
			} else {
				lastCount[f.size]++
			}
		}
	}
	if len(count) == 0 {
		count = lastCount
	}
	best, bestN := int64(0), 0
	for s, n := range count {
		if n > bestN || (n == bestN && s > best) {
			best, bestN = s, n
		}
	}
	if best == 0 {
		return rmq.DefaultCQFileSize, "default"
	}
	return best, "inferred"
}

// checkQueueFiles checks names and sizes of one queue's files and
// returns the files whose units can be read in stream order.
func (v *verifier) checkQueueFiles(qs *queueState, fileSize int64) []cqFile {
	var out []cqFile
	for i, f := range qs.files {
		last := i == len(qs.files)-1
		switch {
		case f.irregular: // its size is unknown: the walk's open fails there
		case f.base < 0 || f.base%rmq.CQUnitSize != 0 || f.base%fileSize != 0:
			v.add(qs.rel, scan.Finding{Code: CodeCQBadFileName, Severity: scan.Error, Path: f.rel, Repair: scan.RepairRebuildIndex,
				Expected: "20-digit multiple of " + fmtInt(fileSize), Actual: f.name, Evidence: map[string]string{"name": "fail"},
				Message: "consume queue file name is not a 20-digit multiple of the file size; the broker cannot place its units"})
			continue
		case last && f.size == 0 && len(qs.files) > 1:
			v.add(qs.rel, scan.Finding{Code: CodeCQEmptyLast, Severity: scan.Info, Path: f.rel, Repair: scan.RepairNone,
				Message: "zero-length last consume queue file; the broker deletes it at load"})
			continue
		case f.size != fileSize:
			v.add(qs.rel, scan.Finding{Code: CodeCQBadFileSize, Severity: scan.Error, Path: f.rel, Offset: min(f.size, fileSize),
				Length: abs(fileSize - f.size), Repair: scan.RepairRebuildIndex, Expected: fmtInt(fileSize), Actual: fmtInt(f.size),
				Evidence: map[string]string{"file_size": "fail"},
				Message:  "consume queue file size differs from the mapped file size; the broker refuses to load the store (\"length not matched\")"})
		}
		if n := len(out); n > 0 && f.base != out[n-1].base+fileSize {
			for b := out[n-1].base + fileSize; b < f.base && b-out[n-1].base <= 64*fileSize; b += fileSize {
				p := qs.rel + "/" + rmq.FormatFileName(b)
				if v.missingFiles[p] {
					continue
				}
				v.missingFiles[p] = true
				v.add(qs.rel, scan.Finding{Code: CodeCQMissing, Severity: scan.Error, Path: p, Repair: scan.RepairRebuildIndex,
					Evidence: map[string]string{"name_continuity": "fail"}, Details: map[string]any{"queue_offset": b / rmq.CQUnitSize, "state": "missing-file"},
					Message: fmt.Sprintf("consume queue file is missing between %s and %s; its units are lost", out[n-1].name, f.name)})
			}
		}
		out = append(out, f)
	}
	return out
}

// checkConsumeQueues runs every consume queue check (see verify_cq.go).
func (v *verifier) checkConsumeQueues(ctx context.Context) error {
	if v.rocksDBConsumeQueue() {
		return nil
	}
	if cl := v.claims; cl != nil {
		// Listed before the walk, for the claims: the same listing.
		v.queues = cl.listed
		v.res.Add(cl.listFindings...)
	} else if err := v.listQueues(); err != nil {
		return err
	}
	fileSize, src := v.pickCQFileSize()
	v.res.Layout["cq_file_size"], v.res.Layout["cq_file_size_source"] = fileSize, src
	keys := make([]queueKey, 0, len(v.queues))
	nfiles := 0
	for k, q := range v.queues {
		keys = append(keys, k)
		nfiles += len(q.files)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].queueID < keys[j].queueID
	})
	v.res.Layout["cq_queues"], v.res.Layout["cq_files"] = len(keys), nfiles
	useClaims := v.attachClaims(fileSize)
	bufs := make([]byte, min(len(keys), cqMergeQueues)*cqCursorBuf)
	scratch := make([]byte, cqScratch)
	for g := 0; g < len(keys); g += cqMergeQueues {
		if err := ctx.Err(); err != nil {
			return err
		}
		group := keys[g:min(g+cqMergeQueues, len(keys))]
		qs := make([]*queueState, len(group))
		files := make([][]cqFile, len(group))
		for i, k := range group {
			qs[i] = v.queues[k]
			files[i] = v.checkQueueFiles(qs[i], fileSize)
		}
		v.scanQueues(qs, files, fileSize, bufs, scratch)
	}
	if useClaims {
		v.cutClaims()
		if cqClaimsHook != nil {
			cqClaimsHook(v)
		}
		v.applyClaims()
	}
	v.redispatchFrom = v.dispatchFrom
	if v.abort {
		v.redispatchFrom = min(v.redispatchFrom, v.abnormalStart())
	}
	v.checkMissing(fileSize)
	return nil
}
