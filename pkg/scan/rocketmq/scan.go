package rocketmq

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/parallel"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// ScanCommitLog walks the commitlog files of cfg in offset order and
// checks every record. It returns an error only when it could not look
// at all (the commitlog dir can't be listed); I/O errors on single files
// mark the result Incomplete.
//
// Result.Store is "rocketmq", Result.Files has one entry per commitlog
// file, Result.RecoveryEnd is the physical offset where a correct
// recovery stops, and Result.Extra carries "mapped_file_size" and
// "prop_crc_verified". opts.Jobs files are scanned at once unless a
// record callback (opts.Records or cfg.OnMessage) is set, which makes the
// scan sequential so callbacks come in file order.
func ScanCommitLog(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	cfg.fill()
	lay, err := loadLayout(&cfg)
	if err != nil {
		return nil, err
	}
	res := &scan.Result{Store: "rocketmq", Findings: append([]scan.Finding(nil), lay.findings...),
		Layout: map[string]any{"commitlog_dir": cfg.rel(cfg.CommitLogDir), "mapped_file_size": lay.mapped}}
	perRecord := opts.Records != nil || cfg.OnMessage != nil || cfg.OnFile != nil
	st, clean := recoveryStart(&cfg, lay)
	crossStart := st.i
	if clean { // normalStart picks the start after the walk: no stop before the last file
		crossStart = len(lay.segs) - 1
	}
	cs := newCrossState(ctx, &cfg, len(lay.segs), crossStart)
	jobs := max(opts.Jobs, 1)
	if opts.Records != nil || cfg.OnMessage != nil {
		jobs = 1 // callbacks in file order from one goroutine
	}
	parallel.For(len(lay.segs), jobs, func(i int) {
		var hook FileHook
		if cfg.OnFile != nil {
			hook = cfg.OnFile(i, lay.segs[i].base)
		}
		var emit func(m *rmq.Message, seg *segment, pos int64) error
		var fr *fileResult
		if perRecord {
			emit = func(m *rmq.Message, seg *segment, pos int64) error {
				if p := m.PropCRC(); p.OK {
					fr.propCRC++
				}
				if cfg.OnMessage != nil {
					if err := cfg.OnMessage(m, seg.base+pos); err != nil {
						return err
					}
				}
				if hook.Message != nil {
					if err := hook.Message(m, seg.base+pos); err != nil {
						return err
					}
				}
				if opts.Records != nil {
					return opts.Records(NewRecord(m, seg.rel, seg.base, pos))
				}
				return nil
			}
		}
		if cfg.Tap != nil {
			if tap := cfg.Tap(i, lay.segs[i].base); tap != nil {
				inner := emit
				emit = func(m *rmq.Message, seg *segment, pos int64) error {
					tap(m, seg.base+pos)
					if inner != nil {
						return inner(m, seg, pos)
					}
					return nil
				}
			}
		}
		inPlace := !perRecord || cfg.hooksInPlace && opts.Records == nil && cfg.OnMessage == nil
		fr = scanFile(ctx, &cfg, lay, i, emit, opts.Progress, &fr, inPlace)
		fr.done = hook.Done
		cs.done(i, fr)
	})
	if clean {
		st = normalStart(&cfg, lay, cs.results)
	}
	if cfg.onStart != nil && len(lay.segs) > 0 {
		cfg.onStart(lay, st)
	}
	merge(lay, cs.results, res, st)
	if cs.err != nil {
		res.Fail(cs.err)
	}
	if perRecord {
		propCRC := 0
		for _, fr := range cs.results {
			propCRC += fr.propCRC
		}
		if res.Extra == nil {
			res.Extra = map[string]any{}
		}
		res.Extra["prop_crc_verified"] = propCRC
	}
	res.SortFindings()
	return res, ctx.Err()
}

// scanFile walks commitlog file i. With inPlace (nothing outside the scan
// sees its records but a Tap) the Reader takes its windows from the file's
// mapping (rmq.Slicer) instead of copying them out of the page cache.
func scanFile(ctx context.Context, cfg *Config, lay *layout, i int,
	emit func(*rmq.Message, *segment, int64) error, progress func(int64), out **fileResult, inPlace bool) (fr *fileResult) {
	seg := lay.segs[i]
	fr = &fileResult{seg: seg, file: scan.File{Path: seg.rel, Kind: "commitlog", Size: seg.size,
		FirstValid: -1, LastValid: -1}}
	*out = fr // emit counts into it
	f, err := fileview.Open(seg.path)
	if err != nil {
		fr.err = err
		return fr
	}
	defer f.Close()
	f.Progress = progress
	var ferr error
	defer func() {
		if ferr != nil {
			fr.err = fmt.Errorf("%s: %w", seg.rel, ferr)
		}
	}()
	defer fileview.Guard(&ferr)()
	size := f.Size()
	fr.seg.size, fr.file.Size = size, size
	fr.cf = newCrossFile(cfg, &fr.seg, 0, nil)
	wk := &walker{cfg: cfg, mapped: lay.mapped, isLast: i == len(lay.segs)-1, emit: emit, res: fr}
	if len(cfg.Files) > 0 {
		wk.mapped = cfg.MappedFileSize // a single-file scan can't infer the mapped size
	}
	r := rmq.NewReader(fileReaderAt(ctx, f, inPlace), size, seg.base, cfg.MaxMessageSize)
	if err := wk.run(r); err != nil {
		fr.err = fmt.Errorf("%s: %w", seg.rel, err)
	}
	fr.file.BytesScanned = r.MaxRead()
	return fr
}

// ctxReaderAt reads a store file for a rocketmq.Reader and stops the walk
// once ctx is done.
type ctxReaderAt struct {
	ctx context.Context
	f   io.ReaderAt
}

// DataExtent passes the file's data extents on (rmq.Extenter): the
// Reader skips a sparse file's holes.
func (c ctxReaderAt) DataExtent(off int64) (int64, int64, error) {
	if e, ok := c.f.(rmq.Extenter); ok {
		return e.DataExtent(off)
	}
	return off, math.MaxInt64, nil
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.ReadAt(p, off)
}

// readInPlace lets scanFile read from mappings (tests compare the two).
var readInPlace = true

// fileReaderAt is what a Reader of f reads through: f's mapping in place
// when inPlace and f is mapped, else f's reads.
func fileReaderAt(ctx context.Context, f *fileview.File, inPlace bool) io.ReaderAt {
	if inPlace && readInPlace && f.Mapped() {
		return ctxSlicer{ctxReaderAt{ctx, f}, f}
	}
	return ctxReaderAt{ctx, f}
}

// ctxSlicer is ctxReaderAt for a mapped file: the Reader takes its
// windows in place (rmq.Slicer; fileview.File.Slice populates the mapping
// ahead of the walk and lets it go behind, so memory stays flat). The
// slices live until the file is closed; the walk runs under
// fileview.Guard, so a file that shrinks under it is an error naming the
// file and offset.
type ctxSlicer struct {
	ctxReaderAt
	v *fileview.File
}

func (c ctxSlicer) Slice(off int64, n int) ([]byte, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return c.v.Slice(off, n)
}
