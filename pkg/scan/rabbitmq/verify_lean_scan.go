package rabbitmq

// scanVHostKeep is ScanVHost that also returns its scanner: verify
// decides queue entries from the scanner's id map (seen, paths, lrefs),
// which the scan keeps instead of the records.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/scan"
)

// scanVHostKeep is ScanVHost returning the scanner as well (see above).
func scanVHostKeep(ctx context.Context, root, vhostDir string, o VHostOptions) (*VHostScan, *scanner, error) {
	ver, err := parseVersion(o.BrokerVersion)
	if err != nil {
		return nil, nil, err
	}
	s := newScanner(root, ver, o.Options)
	s.dropVictims = o.dropVictims
	v := &VHostScan{Dir: scan.Rel(root, vhostDir), Layout: map[string]any{}}
	if o.EachFile != nil {
		// The records go to the callback, file by file, and are released.
		// The index is joined entry by entry from the start: a digest
		// that disagreed would scan again and hand the files over twice.
		o.exactIndex = true
		s.each = func(f *FileScan) error { return o.EachFile(v, f) }
	}
	store := filepath.Join(vhostDir, "msg_store_persistent")
	// The join may spill (joinspill.go) only for a caller that needs
	// nothing of the id table afterwards, on an unclean store: the clean
	// index is read first to know.
	join := joinSpill{}
	cleanRead := false
	_, statErr := os.Stat(filepath.Join(vhostDir, "queues"))
	hasQueues := statErr == nil
	if o.join.allow {
		v.Clean, s.lidx, s.cdig, err = readClean(store, useCleanDigest(o, hasQueues))
		if err != nil {
			s.free()
			return nil, nil, err
		}
		cleanRead = true
		if v.Clean == nil && s.lidx == nil && s.cdig == nil {
			join = o.join
			join.parts = joinParts(s.opts.Jobs)
		}
	}
	type pendingJoin struct {
		j     *spilledJoin
		index []int32
		names []string
	}
	var pending *pendingJoin
	// The queue indexes are read while the first .rdq files are walked;
	// statuses wait for them (scanner.prepare).
	var qerr error
	qdone := make(chan struct{})
	if hasQueues {
		go func() {
			defer close(qdone)
			var refs leanRefsBuilder
			refs.files, refs.maxSize = rdqShape(filepath.Join(vhostDir, "msg_store_persistent"))
			refs.join = join
			// References become id slots as they are read, a .qi segment
			// at a time: they are never all held as QueueRefs.
			q, err := ReadVHostQueuesRefsFunc(vhostDir, refs.take)
			if err == nil && len(q.Unreadable) > 0 && !o.partialQueues {
				err = fmt.Errorf("%s: %w", q.Unreadable[0].Path, q.Unreadable[0].Err)
			}
			if err != nil {
				qerr = err
				return
			}
			v.Queues, v.VHost, v.RefsKnown = q, q.VHost, true
			if refs.sorter != nil {
				p := &pendingJoin{}
				s.lrefs, p.j, p.index, p.names = refs.buildSpill(q)
				pending = p
			} else {
				s.lrefs = refs.build(q, s.seen)
			}
		}()
	} else {
		close(qdone)
		if b, err := storefile.ReadFile(filepath.Join(vhostDir, ".vhost")); err == nil {
			v.VHost = string(b)
		}
	}
	s.ready = func() { <-qdone }
	if !cleanRead {
		v.Clean, s.lidx, s.cdig, err = readClean(store, useCleanDigest(o, hasQueues))
		if err != nil {
			<-qdone
			s.free()
			return nil, nil, err
		}
	}
	s.clean = v.Clean
	if join.allow && hasQueues {
		// A spilled join needs every reference before its prepass.
		<-qdone
		if pending != nil {
			defer func() {
				if s.sj == nil {
					pending.j.close() // not handed to the scanner: an error
				}
			}()
		}
		if qerr == nil && pending != nil {
			recs, err := s.prepass(ctx, pending.j, store)
			if err != nil {
				s.free()
				return nil, nil, err
			}
			s.sj = pending.j
			if s.sj.cfg.keepRefs {
				s.startVictimFeed()
			}
			if err := s.join(s.sj, recs, pending.index, pending.names); err != nil {
				s.free()
				return nil, nil, err
			}
		}
	}
	files, err := s.scanStore(ctx, store, false)
	<-qdone
	if qerr != nil {
		s.free()
		return nil, nil, qerr
	}
	if s.joinErr != nil && ctx.Err() == nil {
		s.free()
		return nil, nil, s.joinErr
	}
	if s.eachErr != nil {
		s.free()
		return nil, nil, s.eachErr
	}
	if err == nil && s.cdig != nil && (s.lrefs == nil || s.lidx == nil || !s.cdig.agrees(s.seen, s.lidx)) {
		// The index is not exactly the store's referenced first copies:
		// scan again, joining entry by entry, for findings that say which
		// entries are wrong (clean_digest.go). An interrupted scan's
		// digests say nothing: it stops here.
		s.free()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		o.exactIndex = true
		return scanVHostKeep(ctx, root, vhostDir, o)
	}
	if err == nil {
		v.Files = files
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.free()
		return nil, nil, err
	}
	if tf, err := s.scanStore(ctx, filepath.Join(vhostDir, "msg_store_transient"), true); err == nil {
		v.Files = append(v.Files, tf...)
	}
	if s.eachErr != nil {
		s.free()
		return nil, nil, s.eachErr
	}
	if a := ver.infer(s.termCnt, "message store"); a != "" {
		v.Assumed = append(v.Assumed, a)
	}
	if !hasQueues {
		where := v.Dir + "/"
		if v.Dir == "." {
			where = "the vhost dir"
		}
		v.Assumed = append(v.Assumed, "queue references unknown: "+where+" has no queues/ dir, so no record is called unreferenced and no queue's fate is predicted")
	}
	n := 0
	for _, f := range v.Files {
		n += len(f.lean.pre) + 1 + len(f.Hazards)
	}
	v.Findings = make([]scan.Finding, 0, n) // sized once: findings can be most of the heap
	for _, f := range v.Files {
		v.Findings = append(v.Findings, fileFindings(f, ver, v.RefsKnown)...)
	}
	v.Findings = append(v.Findings, s.missing(v)...)
	v.Findings = append(v.Findings, s.indexFindings(v)...)
	v.Findings = append(v.Findings, queueFindings(root, v.Queues)...)
	v.Findings = append(v.Findings, unreadQueueFindings(root, v)...)
	v.Layout = s.layout(v)
	return v, s, nil
}
