package rabbitmq

// verify: the evidence-based scan plus every cross-file check of a vhost
// (format: docs/formats/rabbitmq-classic.md §1.3, §4, §5, §6) and the
// prediction of what the broker's next start keeps and drops.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"

	"github.com/storectl/storectl/pkg/scan"
)

// Shutdown states of a message store (§1.3).
const (
	StateClean   = "clean"   // clean.dot and both .ets dumps present and readable
	StateUnclean = "unclean" // the next start rebuilds the index from scratch
)

// Drop reasons verify adds to the format package's (rfmt.Drop*, the .qs
// reasons of rfmt.QSDropReason).
const (
	DropMissing   = "missing"    // A: the shared-store message is in no .rdq
	DropOrphanDir = "orphan-dir" // the broker deletes the whole queue dir
	// DropScanner prefixes a hazard code: the configured broker version's
	// scanner loses the record during the dirty recovery.
	DropScanner = "scanner:"
)

// At-risk keys of scan.Queue.AtRisk: the versions with a known scanner bug.
var atRiskKeys = []string{VersionsGen1, VersionsGen2, VersionsOffByNine}

// atRiskKey maps a hazard code to its at-risk key.
func atRiskKey(code string) string {
	switch code {
	case CodeGen1Stop, CodeScannerCrash:
		return VersionsGen1
	case CodeZeroHoleMisread:
		return VersionsGen2
	case CodeOffByNine:
		return VersionsOffByNine
	}
	return ""
}

// EntryFate is what the next start does with one queue index entry.
type EntryFate struct {
	Entry  QueueEntry
	MsgID  string // Entry.MsgID, or the id inside a .qs/embedded body; "" if unknown
	Keep   bool
	Reason string  // drop reason when !Keep
	Record *Record // the shared-store record holding the message, when found
	// Unknown: no readable .rdq holds the message but some .rdq could not
	// be read (WaitsOn), so neither keep nor drop can be told.
	Unknown bool
}

// QueueFate is one queue's prediction: the contract's queue record plus
// the fate of every entry, in seq order.
type QueueFate struct {
	scan.Queue
	Path      string // the queue dir on disk
	OrphanWhy string // why no durable queue can own the dir; "" when one can
	Entries   []EntryFate
	// LastFound is the highest seq id of the queue's persistent
	// shared-store entries whose record was found (FoundAny: there is
	// one). The store appends a queue's writes in seq order and a crash
	// loses a suffix of them, so a missing record before LastFound was on
	// disk once (lost), one after it normally a publish never confirmed.
	LastFound uint64
	FoundAny  bool
	pending   int // missing records since LastFound (Unconfirmed when the queue ends)

}

// unconfirmed reports whether a missing record of seq id seq, after an
// unclean stop, is a publish never confirmed rather than a lost message.
func (qf *QueueFate) unconfirmed(seq uint64) bool { return !qf.FoundAny || seq > qf.LastFound }

// VHostVerify is one vhost's verify as it is assembled (verifyVHost).
type VHostVerify struct {
	Scan       *VHostScan
	State      string   // StateClean or StateUnclean
	StateFrom  []string // the files the state was decided from, and why
	ClientRefs int      // client_refs in clean.dot (-1 when unread)
	Queues     []*QueueFate
	Findings   []scan.Finding // the scan's, re-homed and de-duplicated, plus verify's
	Layout     map[string]any
}

// Verify runs the scan of every vhost dir of cfg (lean, one queue at a
// time, unless the store has a clean-shutdown index: verify_lean.go) and adds the cross-file
// checks and the next-start prediction (Result.Queues). Store dirs and
// single files given without a vhost get the plain scan: nothing can be
// cross-checked there. Like Scan, the error is for a verify that could not
// start; per-path failures mark the result Incomplete.
func Verify(ctx context.Context, cfg Config, opts scan.Options) (*scan.Result, error) {
	if _, err := parseVersion(cfg.BrokerVersion); err != nil {
		return nil, err
	}
	res := &scan.Result{Store: "rabbitmq", Layout: map[string]any{}}
	vhosts := []map[string]any{}
	for _, d := range cfg.VHostDirs {
		vv, err := verifyVHost(ctx, cfg.Root, d, VHostOptions{BrokerVersion: cfg.BrokerVersion, Options: opts, partialQueues: true,
			join: joinSpill{allow: true, keepRefs: true, budget: cfg.joinBudget, runLen: cfg.joinRun, fanIn: cfg.joinFanIn}})
		if err != nil {
			res.Fail(fmt.Errorf("%s: %w", scan.Rel(cfg.Root, d), err))
			continue
		}
		addFiles(res, vv.files)
		res.Take(vv.findings)
		vv.queues.addTo(res)
		for _, a := range vv.assumed {
			res.Assume(a)
		}
		for _, err := range vv.unread {
			res.Fail(err)
		}
		vhosts = append(vhosts, vv.layout)
	}
	if len(cfg.StoreDirs) > 0 || len(cfg.Files) > 0 {
		rest, err := Scan(ctx, Config{Root: cfg.Root, StoreDirs: cfg.StoreDirs, Files: cfg.Files,
			BrokerVersion: cfg.BrokerVersion}, opts)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, rest.Files...)
		res.Add(rest.Findings...)
		res.BytesScanned += rest.BytesScanned
		for _, a := range rest.Assumptions {
			res.Assume(a)
		}
		if rest.Incomplete {
			res.Incomplete = true
			res.Errors = append(res.Errors, rest.Errors...)
		}
	}
	res.Layout["vhosts"] = vhosts
	if len(vhosts) == 1 {
		for _, k := range []string{"shutdown", "cq_index", "versions"} {
			res.Layout[k] = vhosts[0][k]
		}
	}
	res.SortFindings()
	return res, ctx.Err()
}

// startVerify is where verify starts from a vhost's scan: the
// scan's findings that verify does not rebuild, and the clean-shutdown
// state cs read from the store (its findings added). With inPlace the list
// is filtered in v.Findings' own array and v.Findings is cleared: for a
// caller that reads the scan's findings no more.
func startVerify(v *VHostScan, cs *cleanState, inPlace bool) *VHostVerify {
	vv := &VHostVerify{Scan: v, ClientRefs: -1}
	src := v.Findings
	if inPlace {
		vv.Findings, v.Findings = src[:0], nil
	}
	for _, f := range src {
		if !rebuiltCodes[f.Code] {
			vv.Findings = append(vv.Findings, f)
		}
	}
	vv.State, vv.StateFrom, vv.ClientRefs = cs.state, cs.from, cs.clientRefs
	vv.Findings = append(vv.Findings, cs.findings...)
	return vv
}

// rebuiltCodes are the scan's queue-side and index finding codes that
// verify rebuilds with exact entry offsets (message-missing at the
// .qi/.idx/journal entry, index.mismatch at the .ets object, the queue
// index anomalies), so each surfaces once.
var rebuiltCodes = func() map[string]bool {
	m := map[string]bool{CodeMessageMissing: true, CodeMessageUnknown: true, CodeIndexMismatch: true}
	for _, c := range anomalyCodes {
		m[c] = true
	}
	return m
}()

// anomalyCodes are the format package's queue index anomaly codes.
var anomalyCodes = []string{CodeQIBadHeader, CodeQITorn, CodeQIBadEntry, CodeQISeqMismatch,
	CodeQSCRC, CodeQSBadEntry, CodeQSOrphan, CodeIDXBadRecord, CodeIDXAllZero,
	CodeIDXUnknownSeq, CodeJournalTail, CodeJournalConflict, CodeQueueName,
	CodeVHostConfig, CodeFileTooLarge}

// dedupe merges findings with the same code, path, offset and msg id (a
// missing .qs is reported by every entry that points into it); the merged
// finding counts them in Details["occurrences"].
func dedupe(fs []scan.Finding) []scan.Finding {
	type key struct {
		code, path, id string
		off            int64
	}
	// Keyed by a hash of the key (a collision probes the next value), the
	// map costs a fraction of one keyed by the strings; out is built in
	// fs's own array (it never gets ahead of the reading).
	at := make(map[uint64]int32, len(fs))
	out := fs[:0]
	var hs maphash.Hash
	for _, f := range fs {
		k := key{f.Code, f.Path, f.MsgID, f.Offset}
		hs.Reset()
		hs.WriteString(k.code)
		hs.WriteByte(0)
		hs.WriteString(k.path)
		hs.WriteByte(0)
		hs.WriteString(k.id)
		hs.WriteByte(0)
		var ob [8]byte
		binary.LittleEndian.PutUint64(ob[:], uint64(k.off))
		hs.Write(ob[:])
		h := hs.Sum64()
		i, ok := int32(-1), false
		for {
			j, found := at[h]
			if !found {
				break
			}
			if g := &out[j]; g.Code == k.code && g.Path == k.path && g.MsgID == k.id && g.Offset == k.off {
				i, ok = j, true
				break
			}
			h++
		}
		if !ok {
			at[h] = int32(len(out))
			out = append(out, f)
			continue
		}
		g := &out[i]
		if g.Details == nil {
			g.Details = map[string]any{}
		}
		n, _ := g.Details["occurrences"].(int)
		g.Details["occurrences"] = max(n, 1) + 1
		g.Severity = max(g.Severity, f.Severity)
	}
	return out
}
