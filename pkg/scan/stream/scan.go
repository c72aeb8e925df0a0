// Package stream scans RabbitMQ streams: the osiris segment and index
// files under a node's stream/ directory. Every chunk is decoded and its
// CRC checked, every index record is compared with the chunk it points
// at, and the checks across files (chunk ids and epochs, orphans, stray
// files) and the broker's next start are predicted per RabbitMQ version
// (rules.go). Every command uses this one pipeline: scan (records and
// findings), verify (plus the queue lines), truncate and rebuild-index
// (pkg/repair/stream, from the same findings), salvage (OnMessage).
package stream

import (
	"context"
	"fmt"
	"github.com/storectl/storectl/internal/storefile"
	"os"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/pkg/format/osiris"
	"github.com/storectl/storectl/pkg/scan"
)

// Config says what to scan. Paths in the result are relative to Root.
type Config struct {
	Root string
	// StreamRoots are stream/ dirs: every stream dir in them is scanned.
	StreamRoots []string
	// StreamDirs are single stream dirs.
	StreamDirs []string
	// Files are single segment or index files (scanned with their pair
	// partner when it is beside them).
	Files []string
	// BrokerVersion selects the recovery and read rules (RulesFor; ""
	// is DefaultVersion).
	BrokerVersion string
	// VHosts are the node's vhost names, to split stream dir names into
	// vhost and queue (nil: read from Root's msg_stores/vhosts/*/.vhost).
	VHosts []string
	// OnMessage, when set, receives every message of every user chunk in
	// file order (salvage). Message's slices are valid only during the call.
	OnMessage func(*Message) error
}

// Result is a stream scan: the generic result plus the streams.
type Result struct {
	*scan.Result
	Streams []*StreamScan
}

// Scan scans what cfg names. With opts.Records set it emits one Record per
// message in file order (streams one after the other).
func Scan(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	r, err := ScanStreams(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	return r.Result, nil
}

// ScanStreams is Scan with the per-stream detail (verify, repair, salvage).
func ScanStreams(ctx context.Context, cfg Config, opts scan.Options) (*Result, error) {
	rules, err := RulesFor(cfg.BrokerVersion)
	if err != nil {
		return nil, err
	}
	res := &Result{Result: &scan.Result{Store: scan.RabbitMQ, Layout: map[string]any{}}}
	dirs := append([]string(nil), cfg.StreamDirs...)
	for _, root := range cfg.StreamRoots {
		ds, err := StreamDirs(root)
		if err != nil {
			res.Fail(fmt.Errorf("%s: %w", scan.Rel(cfg.Root, root), err))
			continue
		}
		dirs = append(dirs, ds...)
		// files directly in stream/ are no stream's
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if !e.IsDir() {
				res.Add(scan.Finding{Code: CodeStrayFile, Severity: scan.Info, Path: scan.Rel(cfg.Root, filepath.Join(root, e.Name())),
					Repair: scan.RepairNone, Message: "a file directly in stream/, outside any stream dir: osiris ignores it"})
			}
		}
	}
	sort.Strings(dirs)
	if len(dirs)+len(cfg.Files) > 0 {
		res.Assume(VersionAssumption(cfg.Root, cfg.BrokerVersion))
	}
	sc := &scanCtx{root: cfg.Root, rules: rules, decode: opts.Records != nil || cfg.OnMessage != nil, progress: opts.Progress, vhosts: cfg.VHosts}
	if sc.vhosts == nil {
		sc.vhosts = VHostNames(cfg.Root)
	}
	sc.onMsg = func(m *Message) error {
		if opts.Records != nil {
			if err := opts.Records(NewRecord(m)); err != nil {
				return err
			}
		}
		if cfg.OnMessage != nil {
			return cfg.OnMessage(m)
		}
		return nil
	}
	if opts.Records == nil && cfg.OnMessage == nil {
		sc.onMsg = nil
	}
	jobs := max(opts.Jobs, 1)
	if jobs > 1 && sc.onMsg == nil {
		sc.tokens = make(chan struct{}, jobs)
	}
	var streams []map[string]any
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			res.Fail(err)
			break
		}
		st := scanStream(sc, d, jobs)
		res.Streams = append(res.Streams, st)
		res.absorb(st)
		streams = append(streams, map[string]any{"dir": st.Info.Dir, "vhost": st.Info.Name.VHost, "queue": st.Info.Name.Queue,
			"name_ambiguous": st.Info.Name.Ambiguous, "segments": st.Queue.Segments})
	}
	for _, f := range cfg.Files {
		st := scanFile(sc, f)
		res.Streams = append(res.Streams, st)
		res.absorb(st)
	}
	res.Layout["streams"] = streams
	res.Layout["stream_rules"] = rules
	res.SortFindings()
	return res, nil
}

func (r *Result) absorb(st *StreamScan) {
	r.Files = append(r.Files, st.files...)
	r.Take(st.findings)
	r.BytesScanned += st.bytes
	for _, e := range st.errs {
		r.Fail(e)
	}
}

// scanFile scans one segment or index file; a segment's index beside it
// (or an index's segment) is read as its pair.
func scanFile(sc *scanCtx, path string) *StreamScan {
	dir, base := filepath.Split(path)
	st := &StreamScan{abs: filepath.Clean(dir), rules: sc.rules}
	st.Info = StreamInfo{Dir: scan.Rel(sc.root, filepath.Clean(dir)), Name: ParseNameWith(filepath.Base(filepath.Clean(dir)), sc.vhosts)}
	c := *sc
	c.stream = &st.Info
	m := fileName.FindStringSubmatch(base)
	var p pair
	if m == nil {
		st.errs = append(st.errs, fmt.Errorf("%s: not an osiris segment or index name (20 digits .segment or .index)", scan.Rel(sc.root, path)))
		return st
	}
	p.name = m[1]
	fmt.Sscan(m[1], &p.first)
	seg, idx := filepath.Join(dir, m[1]+".segment"), filepath.Join(dir, m[1]+".index")
	if m[2] == "segment" || fileExists(seg) {
		p.segment = seg
	}
	if m[2] == "index" || fileExists(idx) {
		p.index = idx
	}
	if c.tokens != nil {
		c.tokens <- struct{}{}
		defer func() { <-c.tokens }()
	}
	s := scanSegment(&c, p, false, false)
	st.segs = []*segScan{s}
	st.bytes += s.bytes
	if s.readErr != nil {
		st.errs = append(st.errs, fmt.Errorf("%s: %w", s.rel, s.readErr))
	}
	if s.idxErr != nil {
		st.errs = append(st.errs, fmt.Errorf("%s: %w", s.relIdx, s.idxErr))
	}
	st.report(&c)
	return st
}

func fileExists(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }

// ChunkAt reads the chunk header at pos of a segment (for repair plans).
func ChunkAt(path string, pos int64) (osiris.ChunkHeader, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return osiris.ChunkHeader{}, err
	}
	defer f.Close()
	h, ok := headerAt(f, pos)
	if !ok {
		return h, fmt.Errorf("%s@%d: no chunk header", path, pos)
	}
	return h, nil
}
