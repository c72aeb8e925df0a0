package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

type queueKey struct {
	topic   string
	queueID int32
}

// crossState runs the cross-file checks (cross.go) on per-file results
// as they complete, in file order: a file's own checks stand when the
// files before it agree with what they assumed, else the file is checked
// again from their state.
type crossState struct {
	ctx     context.Context
	cfg     *Config
	results []*fileResult
	n       int // results[:n] are checked
	stopped bool
	next    map[queueKey]int64
	maxTS   int64
	start   int   // the recovery walks from results[start] (recoveryStart)
	err     error // a recheck could not read its file
	mu      sync.Mutex
}

func newCrossState(ctx context.Context, cfg *Config, n, start int) *crossState {
	return &crossState{ctx: ctx, cfg: cfg, results: make([]*fileResult, n), next: map[queueKey]int64{}, start: start}
}

// done stores the result of file i and checks every file whose
// predecessors are all done. Safe for concurrent use.
func (cs *crossState) done(i int, fr *fileResult) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.results[i] = fr
	for cs.n < len(cs.results) && cs.results[cs.n] != nil {
		fr := cs.results[cs.n]
		if !cs.stopped {
			cf := fr.cf
			if cf != nil && !cf.exact(cs.next, cs.maxTS) {
				var err error
				if cf, err = recheck(cs.ctx, cs.cfg, &fr.seg, fr.failPos, cs.next, cs.maxTS); err != nil {
					cs.err = errors.Join(cs.err, fmt.Errorf("%s: %w", fr.seg.rel, err))
				}
			}
			if cf != nil {
				fr.cross = cf.findings
				cs.maxTS = cf.carry(cs.next, cs.maxTS)
			}
			// The recovery stops after this file unless it ends in a BLANK
			// with a next file (see merge); it does not read the files
			// before its start file.
			cs.stopped = cs.n >= cs.start && (fr.err != nil || !(fr.blank && cs.n+1 < len(cs.results)))
		}
		fr.cf = nil
		if fr.done != nil {
			fr.done()
		}
		cs.n++
	}
}

// merge walks the per-file results in offset order: it computes the
// recovery end (walking from results[st.i], recoveryStart's or
// normalStart's file: the broker neither reads nor truncates the files
// before it), adds the cross-file findings crossState found on the
// records recovery keeps, and collects files and findings. With
// st.unknown the first stop gives only a lower bound.
func merge(lay *layout, results []*fileResult, res *scan.Result, st recStart) {
	start := st.i
	recoveryEnd := int64(0)
	if len(lay.segs) > 0 {
		recoveryEnd = lay.segs[start].base
		if st.named && (start > 0 || st.normal) {
			res.Layout["recovery_start_file"] = rmq.FormatFileName(lay.segs[start].base) // as Verify says it
		}
	}
	stopped := false
	unread := "" // the file a read error stopped the walk at: what follows is unknown
	why := ""    // with unread: why what follows is unknown ("" = it could not be read in full)
	for i, fr := range results {
		res.BytesScanned += fr.file.BytesScanned
		if fr.err != nil {
			res.Fail(fr.err)
		}
		res.Findings = append(res.Findings, fr.findings...)
		if i < start {
			beforeStart(fr, lay.segs[start].rel, st, res)
			continue
		}
		if stopped && unread != "" {
			if fr.file.Records > 0 {
				msg := fmt.Sprintf("%d valid records lie after %s, which could not be read in full: whether recovery reaches them is unknown, not lost", fr.file.Records, unread)
				if why != "" {
					msg = fmt.Sprintf("%d valid records lie after the recovery end's lower bound %d: whether recovery reaches them is unknown, not lost (%s)", fr.file.Records, recoveryEnd, why)
				}
				res.Add(scan.Finding{Code: CodeCommitLogUnknown, Severity: scan.Warning, Path: fr.seg.rel,
					Offset: fr.file.FirstValid, Length: fr.failPos - fr.file.FirstValid, Repair: scan.RepairNone,
					Message: msg,
					Details: map[string]any{"phy_offset": fr.seg.base + fr.file.FirstValid, "records": fr.file.Records,
						"waits_on": []string{unread}}})
			}
			res.Files = append(res.Files, fr.file)
			continue
		}
		if stopped {
			if fr.file.Records > 0 {
				res.Add(scan.Finding{Code: CodeBeyondRecovery, Severity: scan.Warning, Path: fr.seg.rel,
					Offset: fr.file.FirstValid, Length: fr.failPos - fr.file.FirstValid, Repair: scan.RepairTruncate,
					Message: fmt.Sprintf("%d valid records lie beyond the recovery end; recovery deletes this file", fr.file.Records),
					Details: map[string]any{"phy_offset": fr.seg.base + fr.file.FirstValid, "records": fr.file.Records,
						"recovery_end": recoveryEnd}})
			}
			fr.file.ValidEnd = 0
			res.Files = append(res.Files, fr.file)
			continue
		}
		res.Add(fr.cross...)
		res.Files = append(res.Files, fr.file)
		if fr.err != nil {
			recoveryEnd = fr.seg.base + fr.failPos
			stopped, unread = true, fr.seg.rel
			continue
		}
		if fr.blank && i+1 < len(results) {
			continue // BLANK: recovery goes on with the next file
		}
		recoveryEnd = fr.seg.base + fr.failPos
		stopped = true
		if data, _ := laterData(results[i+1:]); st.unknown == "" && st.cpUnread && data {
			// A later file holding data could be where it starts.
			st.unknown, st.waitsOn = "the checkpoint could not be read (the abnormal recovery's start file depends on its timestamps)", "checkpoint"
		}
		if st.unknown == "" {
			// A file after this stop whose first bytes could not be read
			// may be where recoverAbnormally starts (it tries the files
			// from the last back): then it keeps what lies after here.
			for _, m := range st.maybe {
				if k := lay.index(m); k > i {
					st.unknown, st.waitsOn = fmt.Sprintf("the abnormal recovery may start at %s, which could not be read (its first record decides)", m), m
					break
				}
			}
		}
		if st.unknown != "" {
			// The later possible start lies past this stop: the end is
			// here or where the walk from that start ends.
			unread, why = st.waitsOn, st.unknown
			if fr.file.End == scan.EndZero {
				res.Add(earlyEnd(fr, scan.Warning, scan.RepairNone,
					fmt.Sprintf("file ends in zeros without a BLANK record: a recovery that starts at or before this file stops here, one that starts later keeps it; which one runs is unknown: %s", why),
					map[string]any{"waits_on": []string{unread}}))
			}
			continue
		}
		if fr.file.End != scan.EndZero {
			continue
		}
		switch data, unknown := laterData(results[i+1:]); {
		case data:
			res.Add(earlyEnd(fr, scan.Error, scan.RepairTruncate,
				"file ends in zeros without a BLANK record while later files hold data; recovery stops here and drops them", nil))
		case unknown != "":
			// Recovery stops here whatever follows; whether it drops
			// anything waits on the file not read.
			res.Add(earlyEnd(fr, scan.Warning, scan.RepairNone,
				fmt.Sprintf("file ends in zeros without a BLANK record: a recovery that walks through it stops here; whether later files hold data it would drop is unknown: %s could not be read", unknown),
				map[string]any{"waits_on": []string{unknown}}))
		}
	}
	if unread != "" {
		// Recovery reads on past what storectl could read: where it ends
		// is unknown. Verify takes the bound from Extra.
		res.SetEndUnknown(scan.EndUnknown{AtLeast: recoveryEnd, WaitsOn: unread, Missing: why})
		if why != "" {
			res.Assume(fmt.Sprintf("recovery end unknown: %s, so recovery reaches at least %d and nothing after it is called lost", why, recoveryEnd))
			return
		}
		res.Assume(fmt.Sprintf("recovery end unknown: %s could not be read in full, so recovery reaches at least %d and nothing after it is called lost", unread, recoveryEnd))
		return
	}
	res.RecoveryEnd = &recoveryEnd
}

// index is the index in l.segs of the file at rel, -1 when none.
func (l *layout) index(rel string) int {
	for k := range l.segs {
		if l.segs[k].rel == rel {
			return k
		}
	}
	return -1
}

// beforeStart collects a file the recovery does not read (it lies before
// recoveryStart's file): the broker keeps it as it is, so its records
// count as kept and a stop in it ends nothing. A file that ends in zeros
// without a BLANK record (or otherwise not at one) is still damaged:
// that is said, without a truncate.
func beforeStart(fr *fileResult, startRel string, st recStart, res *scan.Result) {
	res.Add(fr.cross...)
	res.Files = append(res.Files, fr.file)
	if fr.err != nil || fr.blank {
		return
	}
	if fr.file.End == scan.EndZero {
		res.Add(earlyEnd(fr, scan.Warning, scan.RepairNone,
			fmt.Sprintf("file ends in zeros without a BLANK record; %s starts at the later file %s%s and does not read this one: it keeps this file and the later ones as they are (nothing from %d on in this file can be read)",
				startDesc(st), startRel, orLater(st), fr.seg.base+fr.failPos),
			map[string]any{"recovery_start_file": startRel}))
	}
}

// earlyEnd is the CodeEarlyEnd finding of fr: its zero tail from the
// walk's stop, with the stop's phy_offset added to details.
func earlyEnd(fr *fileResult, sev scan.Severity, repair, msg string, details map[string]any) scan.Finding {
	if details == nil {
		details = map[string]any{}
	}
	details["phy_offset"] = fr.seg.base + fr.failPos
	return scan.Finding{Code: CodeEarlyEnd, Severity: sev, Path: fr.seg.rel, Offset: fr.failPos,
		Length: fr.seg.size - fr.failPos, Repair: repair, Evidence: map[string]string{"blank_record": "fail"},
		Message: msg, Details: details}
}

func startDesc(st recStart) string {
	if st.normal {
		return "the normal recovery (" + st.desc + ")"
	}
	return "the abnormal recovery"
}

func orLater(st recStart) string {
	if st.normal && !st.named {
		return " or a later one"
	}
	return ""
}

// ExtraRecoveryEndUnknown is scan.ExtraRecoveryEndUnknown: a scan that
// could not read every commitlog file up to the recovery end, or could
// not tell where recoverNormally starts (Result.SetEndUnknown).
const ExtraRecoveryEndUnknown = scan.ExtraRecoveryEndUnknown

// laterData reports whether a file of rs holds data (a record, or bytes
// other than zero fill); when none of those read does, unknown is the
// first that could not be read (in full): whether that one does is not
// known.
func laterData(rs []*fileResult) (data bool, unknown string) {
	for _, r := range rs {
		if r.file.Records > 0 || r.failPos != 0 {
			return true, ""
		}
		if r.err != nil { // not read (or not to its end): whether it holds data is unknown
			if unknown == "" {
				unknown = r.seg.rel
			}
			continue
		}
		if !r.zeroTail {
			return true, ""
		}
	}
	return false, unknown
}
