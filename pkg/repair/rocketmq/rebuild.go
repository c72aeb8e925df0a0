package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// MaxCQFileSize bounds mappedFileSizeConsumeQueue: the broker keeps it in
// an int and maps a whole file; 1 GiB is 50x the default, and the builder
// holds one file in memory.
const MaxCQFileSize = 1 << 30

// RebuildConfig says what to rebuild and with which geometry. Sizes left
// zero come from Broker, then from the existing files, then the broker's
// defaults.
type RebuildConfig struct {
	DataDir        string
	CommitLogDir   string // default DataDir/commitlog
	MappedFileSize int64  // commitlog file size; 0 = inferred by the scanner
	MaxMessageSize int    // 0 = the scanner's default
	CQFileSize     int64  // mappedFileSizeConsumeQueue (rounded up to 20 bytes)
	IndexSlots     int64  // maxHashSlotNum
	IndexEntries   int64  // maxIndexNum
	Broker         *scanrmq.BrokerConf
	// SkipConsumeQueue and SkipIndex leave that part alone.
	SkipConsumeQueue, SkipIndex bool
	// StageDir is where the rebuilt files are written; it must not exist
	// and must not be inside DataDir. Default <parent>/.<base>.storectl-stage-<n>.
	StageDir string
	// KeepStage keeps the staged files after planning, for Apply (the plan's
	// actions point at them). Without it the stage is removed.
	KeepStage bool
	// Location names new index files (local time, as the broker); default time.Local.
	Location    *time.Location
	ToolVersion string
	Now         time.Time // plan creation time; default time.Now()
	// Jobs is kept for the callers: the rebuild reads the commitlog in
	// order, one file at a time (the index build needs its records in
	// order, and holding a file's records until its turn would make memory
	// grow with the file).
	Jobs int
	// Progress, when set, is told how many commitlog bytes were just read
	// (scan.Options.Progress; a rate limiter may sleep in it).
	Progress func(n int64)
	// runLen is the consume queue sort's records per run (0: the
	// default); tests set it small to force many runs.
	runLen int
}

// PlanRebuildIndex rebuilds consume queues, index files and the
// checkpoint's logics/index timestamps from the commitlog records before
// the recovery end into a staging dir, compares them with the store and
// returns the plan that makes the store equal to them: replace-file for
// every differing or missing file, remove-file for files that should not
// exist, write-range for the 16 checkpoint bytes. It never writes inside
// the data dir. A store that already matches gives an empty plan.
func PlanRebuildIndex(ctx context.Context, cfg RebuildConfig) (*repair.Plan, *RebuildReport, error) {
	if cfg.DataDir == "" {
		return nil, nil, errors.New("rebuild-index: no data dir")
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	cfg.DataDir = data
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	ex, err := rbListExisting(data)
	if err != nil {
		return nil, nil, err
	}
	rep := &RebuildReport{DataDir: data}
	if err := rbGeometry(&cfg, ex, rep); err != nil {
		return nil, nil, err
	}
	stage, err := rbMakeStage(&cfg, rep)
	if err != nil {
		return nil, nil, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(stage)
		}
	}()
	plan, err := rbPlan(ctx, &cfg, ex, stage, rep)
	if err != nil {
		return nil, nil, err
	}
	keep = cfg.KeepStage && len(plan.Actions) > 0
	if keep {
		rep.StageDir = stage
	}
	return plan, rep, nil
}

func rbPlan(ctx context.Context, cfg *RebuildConfig, ex *rbExisting, stage string, rep *RebuildReport) (*repair.Plan, error) {
	// The index files are built during the scan (idxbIncr), then hashed
	// while the consume queues are built and compared.
	var incr *idxbIncr
	var feed func(idxbBatch)
	if !cfg.SkipIndex {
		incr = startIdxbIncr(rep.IndexLayout, stage, cfg.KeepStage)
		feed = incr.feed
	}
	scfg := scanrmq.Config{Root: cfg.DataDir, CommitLogDir: cfg.CommitLogDir,
		MappedFileSize: cfg.MappedFileSize, MaxMessageSize: cfg.MaxMessageSize}
	d, err := rbCollect(ctx, scfg, cfg.Progress, feed, cfg.runLen)
	if err != nil {
		if incr != nil {
			incr.abort()
		}
		return nil, err
	}
	defer d.Close()
	if d.fedPast {
		// The scan fed the index records past the recovery end: build it
		// again from the records before it (and count them exactly).
		if incr != nil {
			incr.abort()
			incr = startIdxbIncr(rep.IndexLayout, stage, cfg.KeepStage)
			feed = incr.feed
		}
		if err := rbRefeed(ctx, scfg, d, feed); err != nil {
			if incr != nil {
				incr.abort()
			}
			return nil, err
		}
	}
	records, keys, lastDispatch, dispatched := d.counts()
	rep.RecoveryEnd, rep.Records, rep.LMQRecords = d.recoveryEnd, records, d.lmq
	rep.IndexKeys = keys
	rep.Scan = d.scan
	if d.lmq > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d records carry INNER_MULTI_DISPATCH (LMQ); they are dispatched to their own queue only, as with enableMultiDispatch=false; %%LMQ%% queues are left alone", d.lmq))
	}
	plan, err := repair.NewPlan(cfg.DataDir, cfg.ToolVersion, cfg.Now)
	if err != nil {
		if incr != nil {
			incr.abort()
		}
		return nil, err
	}
	if !cfg.KeepStage {
		plan.PrintOnly() // its staged files go when it has been printed
	}
	// The index files are finished (their own stage dir) while the consume
	// queues are built and compared.
	var idx []*idxbFile
	var idxErr error
	idxDone := make(chan struct{})
	if cfg.SkipIndex {
		close(idxDone)
	} else {
		go func() {
			defer close(idxDone)
			idx, _, idxErr = incr.finish()
		}()
	}
	defer func() { <-idxDone }() // never return (and remove the stage) under it
	if !cfg.SkipConsumeQueue {
		// Apply verifies the stage as a whole store (VerifyStaged), so it
		// gets every rebuilt file; a plan only printed gets the files that
		// differ, which its actions name.
		if err := rbCompareCQ(plan, cfg.DataDir, stage, cfg.KeepStage, d, ex, rep); err != nil {
			return nil, err
		}
	}
	<-idxDone
	if !cfg.SkipIndex {
		if idxErr != nil {
			return nil, idxErr
		}
		if err := rbNameIndexFiles(idx, ex, cfg.Location, rep); err != nil {
			return nil, err
		}
		if err := rbCompareIndex(plan, cfg.DataDir, idx, ex, rep); err != nil {
			return nil, err
		}
	}
	var logics *int64
	if dispatched {
		logics = &lastDispatch
	}
	if err := rbCheckpoint(plan, cfg, logics, idx, rep); err != nil {
		return nil, err
	}
	return plan, ctx.Err()
}

// rbGeometry settles the CQ file size and the index layout.
func rbGeometry(cfg *RebuildConfig, ex *rbExisting, rep *RebuildReport) error {
	cq, slots, entries := cfg.CQFileSize, cfg.IndexSlots, cfg.IndexEntries
	if b := cfg.Broker; b != nil {
		cq = cmpOr(cq, b.MappedFileSizeConsumeQueue)
		slots = cmpOr(slots, b.MaxHashSlotNum)
		entries = cmpOr(entries, b.MaxIndexNum)
	}
	rep.CQFileSizeFrom = "config"
	if cq <= 0 && ex.cqSize > 0 {
		cq, rep.CQFileSizeFrom = ex.cqSize, "existing files"
	}
	if cq <= 0 {
		rep.CQFileSizeFrom = "default"
	}
	rep.CQFileSize = rmq.CQFileSizeFor(cq)
	if rep.CQFileSize > MaxCQFileSize {
		return fmt.Errorf("consume queue file size %d exceeds %d", rep.CQFileSize, MaxCQFileSize)
	}
	rep.IndexLayoutFrom = "config"
	if (slots <= 0 || entries <= 0) && ex.indexSize > 0 {
		if lay, err := rmq.IndexLayoutFromSize(ex.indexSize, max(slots, 0)); err == nil && (entries <= 0 || lay.Entries == entries) {
			slots, entries, rep.IndexLayoutFrom = lay.Slots, lay.Entries, "existing files"
		}
	}
	if slots <= 0 || entries <= 0 {
		rep.IndexLayoutFrom = "default"
		slots, entries = cmpOr(slots, rmq.DefaultIndexSlots), cmpOr(entries, rmq.DefaultIndexEntries)
	}
	rep.IndexLayout = rmq.IndexLayout{Slots: slots, Entries: entries}
	if slots > rmq.MaxIndexSlots || entries < 2 || entries > 4*rmq.MaxIndexSlots || rep.IndexLayout.Size() > repair.MaxNewSize {
		return fmt.Errorf("index layout %d slots x %d entries is out of range", slots, entries)
	}
	return nil
}

func cmpOr(a, b int64) int64 {
	if a > 0 {
		return a
	}
	return b
}

// rbMakeStage creates the staging dir beside the data dir (same
// filesystem, so the staged files are as durable as the store), never
// inside it: the broker would load stray files. A dry run keeps nothing
// (KeepStage false): its stage is a temp dir (scan.TempDir: --tmp-dir,
// else $TMPDIR), so the dry run writes nothing beside the data dir and
// works where that is not writable (a read-only copy, another user's
// store).
func rbMakeStage(cfg *RebuildConfig, rep *RebuildReport) (string, error) {
	if cfg.StageDir == "" && !cfg.KeepStage {
		return os.MkdirTemp(scan.TempDir(), "storectl-rebuild-stage-")
	}
	if cfg.StageDir != "" {
		abs, err := filepath.Abs(cfg.StageDir)
		if err != nil {
			return "", err
		}
		if rel, err := filepath.Rel(cfg.DataDir, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("stage dir %s is inside the data dir", abs)
		}
		return abs, os.Mkdir(abs, 0o700)
	}
	p, err := repair.NewStageDir(cfg.DataDir)
	if err != nil {
		return "", err
	}
	if !repair.SameDevice(cfg.DataDir, p) {
		rep.Notes = append(rep.Notes, "the stage dir is on another filesystem than the data dir (mount point)")
	}
	return p, nil
}

// RemoveStage removes the staging dir a kept plan points at (after Apply,
// or when the plan is abandoned).
func (r *RebuildReport) RemoveStage() error {
	if r == nil {
		return nil
	}
	return repair.RemoveStage(&r.StageDir)
}
