// Package rabbitmq scans RabbitMQ's shared message store (.rdq files) and
// finds every message in it, including the ones RabbitMQ's own scanners
// lose (format: docs/formats/rabbitmq-classic.md §2–4; section numbers
// in comments refer to it).
//
// Every byte of a file is a possible record start, as in the broker's
// newest scanner, but a candidate is accepted only on evidence: Size ≥ 18,
// the frame fits, marker 0xFF, and the body is exactly one ETF term. The
// queue indexes then say whether a record is referenced, and the
// clean-shutdown index (msg_store_index.ets) whether it is where the
// broker thinks. Models of the broker's three scanner generations are run
// on every file that is not a gap-free run of records, and each record a
// generation would lose is reported with the versions that lose it.
//
// Entry points: Scan (findings, one scan.File per .rdq, records through
// scan.Options.Records), Verify, and ScanVHost, the same streaming scan of
// one vhost that hands each file's records to a per-file callback
// (VHostOptions.EachFile: truncate, rebuild-index, harden and salvage).
package rabbitmq

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/storectl/storectl/pkg/scan"
)

// Config says what Scan looks at.
type Config struct {
	Root      string   // data dir; every reported path is relative to it (scan.Rel)
	VHostDirs []string // vhost dirs (msg_store_persistent/ + queues/ inside)
	StoreDirs []string // message store dirs given without a vhost (no queue indexes known)
	Files     []string // single .rdq files
	// BrokerVersion, e.g. "3.13.7" or "4.0.2", selects which scanner
	// generations' hazards count: hazards of other generations become
	// info. Empty: every generation counts.
	BrokerVersion string
	// joinBudget, joinRun and joinFanIn tune the spilled join
	// (joinSpill.budget, runLen and fanIn): tests force it, with many
	// runs and merge passes.
	joinBudget, joinRun, joinFanIn int
}

// Scan scans everything cfg names. Result.Store is "rabbitmq"; Files has
// one entry per .rdq; Layout says which message terms (3.x/4.x), queue
// index versions and clean-shutdown files were seen. The error is for a
// scan that could not start (bad version); per-path failures mark the
// result Incomplete.
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	ver, err := parseVersion(cfg.BrokerVersion)
	if err != nil {
		return nil, err
	}
	res := &scan.Result{Store: "rabbitmq", Layout: map[string]any{}}
	var vhosts []map[string]any
	for _, d := range cfg.VHostDirs {
		v, err := ScanVHost(ctx, cfg.Root, d, VHostOptions{BrokerVersion: cfg.BrokerVersion, Options: opts, partialQueues: true,
			join: joinSpill{allow: true, budget: cfg.joinBudget, runLen: cfg.joinRun, fanIn: cfg.joinFanIn}})
		if err != nil {
			res.Fail(fmt.Errorf("%s: %w", scan.Rel(cfg.Root, d), err))
			continue
		}
		addFiles(res, v.Files)
		res.Take(v.Findings)
		for _, a := range v.Assumed {
			res.Assume(a)
		}
		for _, err := range unreadErrs(cfg.Root, v) {
			res.Fail(err)
		}
		vhosts = append(vhosts, v.Layout)
	}
	for _, d := range cfg.StoreDirs {
		s := newScanner(cfg.Root, ver, opts)
		s.dropVictims = true // the findings are made before s.free
		files, err := s.scanStore(ctx, d, filepath.Base(d) == "msg_store_transient")
		if err != nil {
			s.free()
			res.Fail(fmt.Errorf("%s: %w", scan.Rel(cfg.Root, d), err))
			continue
		}
		addFiles(res, files)
		v := ver // the same rule as a vhost's, over the same files
		res.Assume(v.infer(s.termCnt, "message store"))
		res.Assume("queue references unknown: " + scan.Rel(cfg.Root, d) + " was given without its vhost's queue indexes, so no record is called unreferenced and no queue's fate is predicted")
		for _, f := range files {
			res.Add(fileFindings(f, v, false)...)
		}
		s.free()
	}
	if len(cfg.Files) > 0 {
		s := newScanner(cfg.Root, ver, opts)
		s.dropVictims = true
		var fss []*FileScan
		for _, p := range cfg.Files {
			f := rdqFile{path: p, num: rdqNumber(p)}
			fs := s.scanFile(ctx, f, isCurrent(p, f.num), false)
			s.release(fs)
			fss = append(fss, fs)
		}
		v := ver
		res.Assume(v.infer(s.termCnt, "file given"))
		res.Assume("only the files given were read: the broker version is judged from their terms alone, and queue references are unknown (no record is called unreferenced)")
		for _, fs := range fss {
			addFiles(res, []*FileScan{fs})
			res.Add(fileFindings(fs, v, false)...)
		}
		s.free()
	}
	res.Layout["vhosts"] = vhosts
	res.SortFindings()
	return res, ctx.Err()
}

// isCurrent reports whether p is the highest-numbered .rdq of its dir (or
// has no number, when that cannot be told).
func isCurrent(p string, num int64) bool {
	if num < 0 {
		return true
	}
	files, err := listRDQ(filepath.Dir(p))
	if err != nil {
		return true
	}
	for _, f := range files {
		if f.num > num {
			return false
		}
	}
	return true
}

// AddTo adds v's files and findings to res (a plan's report of the scan
// it came from).
func (v *VHostScan) AddTo(res *scan.Result) {
	addFiles(res, v.Files)
	res.Findings = append(res.Findings, v.Findings...)
}

func addFiles(res *scan.Result, files []*FileScan) {
	for _, f := range files {
		n, first, last := recordSpan(f)
		sf := scan.File{Path: f.Path, Kind: "rdq", Size: f.Size, BytesScanned: f.Size,
			Records: n, FirstValid: first, LastValid: last, ValidEnd: f.ValidEnd, End: f.End}
		if f.Err != nil {
			sf.BytesScanned = 0
			res.Fail(fmt.Errorf("%s: %w", f.Path, f.Err))
		}
		res.BytesScanned += sf.BytesScanned
		res.Files = append(res.Files, sf)
	}
}
