// Package rocketmq scans a RocketMQ commitlog: it walks the files of a
// store in offset order, checks every record with all the evidence it has
// and computes where a correct recovery (with the stricter stored
// PHYSICALOFFSET == position check of rocketmq #10017) stops.
//
// Entry points: ScanCommitLog for the full walk with findings, Verify for
// the cross-file checks, OpenStore and Store.RecordAt for checking one
// record at a physical offset. The files and what the broker does with
// them: docs/formats/rocketmq.md (section numbers in comments refer to
// it).
package rocketmq

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// Config says what to scan.
type Config struct {
	Root           string   // data dir; paths in findings and records are relative to it
	CommitLogDir   string   // default Root/commitlog
	Files          []string // if set, scan only these commitlog files (single-file scan)
	MappedFileSize int64    // 0 = infer: the size of the first non-last file, else the file's size
	MaxMessageSize int      // largest record accepted; 0 = rmq.DefaultMaxRecordSize (4 MiB body + 64 KiB)
	// TimestampSlack is how far a store timestamp may go back before it is
	// reported; 0 = DefaultTimestampSlack.
	TimestampSlack time.Duration
	// OnMessage, when set, receives every valid record of each file's
	// primary walk in file order, with its physical offset. m and its
	// slices are only valid during the call. Setting it (or
	// scan.Options.Records) makes the scan sequential.
	OnMessage func(m *rmq.Message, phyOffset int64) error
	// OnFile, when set, is called for every commitlog file (index i in
	// offset order, first physical offset base) before it is scanned, from
	// the goroutine that scans it; files are scanned in parallel
	// (scan.Options.Jobs). The returned hook receives that file's valid
	// records like OnMessage; its Done is then called once per file in
	// offset order, never concurrently. Unlike OnMessage it does not make
	// the scan sequential: collect per file, merge in Done.
	OnFile func(i int, base int64) FileHook
	// Tap, when set, is called like OnFile for every commitlog file; the
	// function it returns (nil: none) receives that file's valid records
	// from the goroutine that scans it. It only watches: the scan and its
	// result are what they are without it (another scanner takes what it
	// needs of the records the walk reads anyway).
	Tap func(i int, base int64) func(m *rmq.Message, phyOffset int64)
	// hooksInPlace (Verify's collectors) says OnFile's hooks keep nothing
	// of a record past their call: without Records and OnMessage the walk
	// then reads in place, as with no callback.
	hooksInPlace bool
	// onStart (Verify) receives the recovery start the scan picked
	// (recoveryStart, normalStart), before merge.
	onStart func(lay *layout, st recStart)
}

// FileHook is what Config.OnFile returns for one file.
type FileHook struct {
	Message func(m *rmq.Message, phyOffset int64) error // may be nil
	Done    func()                                      // may be nil
}

// DefaultTimestampSlack tolerates small clock steps (NTP corrections)
// before a store timestamp going backwards is reported.
const DefaultTimestampSlack = time.Minute

// windowSize is the sequential read size (internal/fileview.View): large
// enough to amortise syscalls (2048 per GiB), small enough that the copy
// out of the page cache stays in the CPU's L2 cache for the CRC pass that
// follows it. Larger records get a window of their own size.
const windowSize = 512 << 10

// maxFindingsPerFile bounds the findings one damaged file can produce
// (e.g. a file full of stale records), so output stays readable.
const maxFindingsPerFile = 1000

// segment is one commitlog file in the layout.
type segment struct {
	path string // absolute
	rel  string // relative to Root, slash-separated
	base int64  // parsed from the name
	size int64
	// irregular: a dir, FIFO, socket or device under the file's name;
	// it is not read (its open fails) and its size is unknown (0).
	irregular bool
}

type layout struct {
	segs     []segment
	mapped   int64
	findings []scan.Finding
}

func (cfg *Config) fill() {
	if cfg.CommitLogDir == "" {
		cfg.CommitLogDir = filepath.Join(cfg.Root, "commitlog")
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = rmq.DefaultMaxRecordSize
	}
	if cfg.TimestampSlack <= 0 {
		cfg.TimestampSlack = DefaultTimestampSlack
	}
}

func (cfg *Config) rel(p string) string {
	if cfg.Root != "" {
		if r, err := filepath.Rel(cfg.Root, p); err == nil {
			return filepath.ToSlash(r)
		}
	}
	return filepath.ToSlash(p)
}

// loadLayout lists the commitlog files, in offset order.
func loadLayout(cfg *Config) (*layout, error) {
	lay := &layout{}
	var paths []string
	if len(cfg.Files) > 0 {
		paths = append(paths, cfg.Files...)
	} else {
		ents, err := storefile.ReadDir(cfg.CommitLogDir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if storefile.IsRegular(cfg.CommitLogDir, e) {
				paths = append(paths, filepath.Join(cfg.CommitLogDir, e.Name()))
				continue
			}
			// A dir, FIFO, socket or device under a commitlog file's name
			// holds what the broker kept at those offsets: unread, not
			// absent (its open fails and the walk stops there unknowing).
			if _, ok := storefile.Irregular(cfg.CommitLogDir, e); ok {
				if base, err := rmq.ParseFileName(e.Name()); err == nil {
					p := filepath.Join(cfg.CommitLogDir, e.Name())
					lay.segs = append(lay.segs, segment{path: p, rel: cfg.rel(p), base: base, irregular: true})
				}
			}
		}
	}
	for _, p := range paths {
		rel := cfg.rel(p)
		base, err := rmq.ParseFileName(filepath.Base(p))
		if err != nil {
			lay.findings = append(lay.findings, scan.Finding{
				Code: CodeBadFileName, Severity: scan.Warning, Path: rel, Repair: scan.RepairNone,
				Evidence: map[string]string{"name": "fail"},
				Message:  "file in the commitlog dir is not named by a 20-digit offset; the broker would refuse to load it",
				Details:  map[string]any{"error": err.Error()},
			})
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		lay.segs = append(lay.segs, segment{path: p, rel: rel, base: base, size: st.Size()})
	}
	sort.Slice(lay.segs, func(i, j int) bool { return lay.segs[i].base < lay.segs[j].base })
	// A zero-length last file is deleted by MappedFileQueue.doLoad.
	if n := len(lay.segs); n > 1 && lay.segs[n-1].size == 0 && !lay.segs[n-1].irregular && len(cfg.Files) == 0 {
		s := lay.segs[n-1]
		lay.findings = append(lay.findings, scan.Finding{Code: CodeEmptyLastFile, Severity: scan.Info, Path: s.rel,
			Repair: scan.RepairNone, Message: "zero-length last commitlog file; the broker deletes it at load",
			Details: map[string]any{"phy_offset": s.base}})
		lay.segs = lay.segs[:n-1]
	}
	lay.mapped = cfg.MappedFileSize
	if lay.mapped <= 0 {
		for _, s := range lay.segs {
			if !s.irregular { // the size of what could not be read says nothing
				lay.mapped = s.size
				break
			}
		}
	}
	for i := 1; i < len(lay.segs) && len(cfg.Files) == 0; i++ {
		prev, s := lay.segs[i-1], lay.segs[i]
		if s.base != prev.base+lay.mapped {
			lay.findings = append(lay.findings, scan.Finding{Code: CodeOffsetGap, Severity: scan.Error, Path: s.rel,
				Repair: scan.RepairNone, Expected: rmq.FormatFileName(prev.base + lay.mapped), Actual: rmq.FormatFileName(s.base),
				Evidence: map[string]string{"name_continuity": "fail"},
				Message:  fmt.Sprintf("commitlog file does not follow its predecessor (expected %s)", rmq.FormatFileName(prev.base+lay.mapped)),
				Details:  map[string]any{"phy_offset": s.base}})
		}
	}
	return lay, nil
}
