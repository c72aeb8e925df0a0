package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/pkg/scan"
)

// largeMessageBody is LARGE_MESSAGE_THRESHOLD (4.0+): bodies this large
// are written alone into their own file.
const largeMessageBody = 4_000_000

// fileFindings turns one FileScan into findings.
func fileFindings(fs *FileScan, ver brokerVersion, refsKnown bool) []scan.Finding {
	if fs.lean.done {
		// The file's own findings, handed over (not copied): a released
		// file's findings are made once, at the end of the scan.
		out := fs.lean.findings()
		if fs.Err != nil || fs.Transient {
			return out
		}
		for i := range fs.Hazards {
			out = append(out, hazardFinding(fs, &fs.Hazards[i], ver))
		}
		return out
	}
	return fileFindingsPart(fs, ver, refsKnown, true, nil)
}

// fileFindingsPart makes a file's findings, the hazard ones only when
// withHazards is set. The unreferenced records are summed up in one
// finding after the others; with lf, lf.unref keeps the sum instead
// (leanFile.findings adds its finding).
func fileFindingsPart(fs *FileScan, ver brokerVersion, refsKnown, withHazards bool, lf *leanFile) []scan.Finding {
	var out []scan.Finding
	var unref unrefSum
	add := func(f scan.Finding) {
		f.Path = fs.Path
		if f.Repair == "" {
			f.Repair = scan.RepairNone
		}
		out = append(out, f)
	}
	if fs.Err != nil {
		off, _ := fileview.FaultOffset(fs.Err) // where the file ended under a mapped read
		add(scan.Finding{Code: CodeFileError, Severity: scan.Error, Offset: off, Message: fs.Err.Error()})
		return out
	}
	if fs.Transient {
		if fs.Size > 0 {
			add(scan.Finding{Code: CodeTransient, Severity: scan.Info, Length: fs.Size,
				Message: fmt.Sprintf("msg_store_transient file with %d records; the broker deletes msg_store_transient at start", len(fs.Records))})
		}
		return out
	}
	if t := fs.Torn; t != nil {
		f := scan.Finding{Code: CodeTornTail, Offset: t.Offset, Length: t.Length,
			Evidence: map[string]string{"size_field": "runs past end of file"}}
		if fs.Current {
			f.Severity, f.Repair = scan.Warning, scan.RepairTruncate
			f.Message = fmt.Sprintf("record cut by end of file at %d in the current file; the broker truncates it at start", t.Offset)
		} else {
			f.Severity = scan.Error
			f.Message = fmt.Sprintf("record at %d crosses the end of a file that is not the current write file", t.Offset)
		}
		add(f)
	} else if fs.End == "garbage" {
		g := fs.Gaps[len(fs.Gaps)-1]
		add(scan.Finding{Code: CodeGarbageTail, Severity: scan.Warning, Offset: g.Offset, Length: g.Length,
			Message: fmt.Sprintf("%d bytes after the last record are not a record", g.Length)})
	}
	for _, off := range fs.BadMarkers {
		add(scan.Finding{Code: CodeBadMarker, Severity: scan.Warning, Offset: off,
			Evidence: map[string]string{"etf-term": "pass", "marker": "fail"},
			Message:  "frame with a complete body term but no 0xFF write marker: the write never completed"})
	}
	for _, r := range fs.Records {
		out = recordFindings(out, fs, r, ver, &unref)
	}
	if lf != nil {
		lf.unref = unref
	} else if f, ok := unref.finding(fs.Path); ok {
		out = append(out, f)
	}
	if withHazards {
		for i := range fs.Hazards {
			out = append(out, hazardFinding(fs, &fs.Hazards[i], ver))
		}
	}
	return out
}

// recordFindings appends r's findings to out; an unreferenced record is
// added to unref (one finding a file sums them up).
func recordFindings(out []scan.Finding, fs *FileScan, r *Record, ver brokerVersion, unref *unrefSum) []scan.Finding {
	if r.Status == StatusUnreferenced {
		unref.add(r)
	}
	if !r.BadBody && r.Status != StatusDuplicate && r.TotalSize-25 < largeMessageBody && r.IndexMatch != "mismatch" {
		return out // no finding: no msg id string made
	}
	base := scan.Finding{Path: fs.Path, Offset: r.Offset, Length: r.TotalSize, MsgID: r.ID(), Repair: scan.RepairNone}
	if r.BadBody {
		f := base
		f.Code, f.Severity = CodeBadBody, scan.Warning
		if LiveStatus(r.Status) {
			f.Severity = scan.Error
		}
		f.Evidence = map[string]string{"size": "pass", "fits": "pass", "marker": "pass", "etf-term": "fail"}
		f.Message = "record frame whose body is not an ETF term: the broker's scanners accept it but reading the message fails"
		out = append(out, f)
	}
	switch r.Status {
	case StatusDuplicate:
		f := base
		f.Code, f.Severity = CodeDuplicate, scan.Warning
		f.Message = fmt.Sprintf("duplicate of the record at %s@%d; the first copy is authoritative", r.FirstPath, r.FirstOffset)
		f.Details = map[string]any{"first_path": r.FirstPath, "first_offset": r.FirstOffset}
		out = append(out, f)
	}
	if body := r.TotalSize - 25; body >= largeMessageBody && (r.Offset != 0 || len(fs.Records) > 1 || fs.Size != r.TotalSize) {
		f := base
		f.Code, f.Severity = CodeLargeInline, scan.Info
		if (ver.set && ver.major >= 4) || (!ver.set && r.Term == "mc") {
			f.Severity = scan.Warning
		}
		f.Message = "large message (body >= 4 000 000 bytes) not alone in its own file, as 4.0+ writes them"
		out = append(out, f)
	}
	if r.IndexMatch == "mismatch" && r.Status != StatusDuplicate {
		f := base
		f.Code, f.Severity, f.Repair = CodeIndexMismatch, scan.Error, scan.RepairRebuildIndex
		f.Message = "msg_store_index.ets puts this msg id at another file, offset or size"
		out = append(out, f)
	}
	return out
}

// unrefSum sums up a file's unreferenced records (garbage awaiting
// compaction: in a store of small messages a twentieth of the records or
// more) for the one finding that reports them; the records themselves
// are the --records lines with status unreferenced.
type unrefSum struct {
	n           int
	bytes       int64
	first, last struct {
		off, size int64
		id        [16]byte
	}
}

// add adds r (records come in offset order).
func (u *unrefSum) add(r *Record) {
	u.last.off, u.last.size, u.last.id = r.Offset, r.TotalSize, r.MsgID
	if u.n == 0 {
		u.first = u.last
	}
	u.n++
	u.bytes += r.TotalSize
}

// finding is the unreferenced-records finding of the file at path, if it
// has any: offset and length span them, msg_id is the record's when there
// is one, details say how many, their bytes, and the first and last.
func (u *unrefSum) finding(path string) (scan.Finding, bool) {
	if u.n == 0 {
		return scan.Finding{}, false
	}
	f := scan.Finding{Code: CodeUnreferenced, Severity: scan.Info, Path: path, Offset: u.first.off,
		Length: u.last.off + u.last.size - u.first.off, Repair: scan.RepairNone,
		Details: map[string]any{"records": u.n, "bytes": u.bytes,
			"first_msg_id": hexID(u.first.id), "first_offset": u.first.off,
			"last_msg_id": hexID(u.last.id), "last_offset": u.last.off}}
	if u.n == 1 {
		f.MsgID = hexID(u.first.id)
		f.Message = "record no queue index references (garbage the store's compaction reclaims)"
	} else {
		f.Message = fmt.Sprintf("%d records (%d bytes) no queue index references (garbage the store's compaction reclaims)", u.n, u.bytes)
	}
	return f, true
}

// EachHazardVictim calls fn for every victim of every scanner hazard of
// the file fs with the hazard's finding as the scan reports it for
// version, in the same order: a finding names only its first victims
// (InlineVictims), this is the whole list. It is for a per-file callback
// (VHostOptions.EachFile), which holds the file's hazards with their
// victims. version must be set. The error is from reading a spilled list
// back.
func (fs *FileScan) EachHazardVictim(version string, fn func(f *scan.Finding, vic Victim)) error {
	ver, err := parseVersion(version)
	if err != nil {
		return err
	}
	if !ver.set {
		return fmt.Errorf("EachHazardVictim needs a broker version")
	}
	if fs.Err != nil || fs.Transient {
		return nil
	}
	for i := range fs.Hazards {
		h := &fs.Hazards[i]
		f := hazardFinding(fs, h, ver)
		if err := h.EachVictim(func(vic Victim) { fn(&f, vic) }); err != nil {
			return err
		}
	}
	return nil
}

func (fs *FileScan) hazardFindings(out []scan.Finding, ver brokerVersion) []scan.Finding {
	if fs.Err != nil || fs.Transient {
		return out
	}
	for i := range fs.Hazards {
		out = append(out, hazardFinding(fs, &fs.Hazards[i], ver))
	}
	return out
}

func hazardFinding(fs *FileScan, h *Hazard, ver brokerVersion) scan.Finding {
	f := scan.Finding{Code: h.Code, Path: fs.Path, Offset: h.Offset, Length: h.Length, Repair: scan.RepairNone,
		Details: map[string]any{"versions": h.Versions, "generations": h.Gens, "when": h.When}}
	for k, v := range h.Details {
		f.Details[k] = v
	}
	referenced := h.victimSummary(f.Details) > 0
	if v, ok := h.firstVictim(); ok {
		f.MsgID = v.MsgID()
	}
	switch {
	case !ver.affected(h):
		f.Severity = scan.Info
	case ver.writtenBy313 && onlyGen1(h):
		// #mc{} files: only 3.13.0 (or a downgrade) runs this scanner; a
		// nightly cron on a 4.x node must not alarm on it.
		f.Severity = scan.Info
		f.Details["only_if_read_by"] = "3.13.0 (the files hold #mc{} terms, written by 3.13+; give --broker-version to be exact)"
	case referenced || h.Code == CodeScannerCrash:
		f.Severity = scan.Error
	default:
		f.Severity = scan.Warning
	}
	who := "RabbitMQ " + h.Versions + " (" + strings.Join(h.When, ", ") + ")"
	switch h.Code {
	case CodeZeroHoleMisread:
		// Only this message names the victims (a gen1-stop can have
		// thousands: no string per victim for the others), the inline
		// ones at most.
		head := h.victimHead()
		ids := make([]string, 0, len(head)+1)
		for _, v := range head {
			ids = append(ids, v.MsgID()+"@"+strconv.FormatInt(v.Offset, 10))
		}
		if more := h.VictimCount() - len(head); more > 0 {
			ids = append(ids, fmt.Sprintf("%d more", more))
		}
		f.Evidence = map[string]string{"model": "generation-2 scan_data accepts a bogus frame here"}
		f.Message = fmt.Sprintf("%s accepts a bogus %d-byte frame at %d and jumps over %s", who, h.Length, h.Offset, strings.Join(ids, ", "))
	case CodeOffByNine:
		f.Evidence = map[string]string{"window": "value in [R-8, R-1], R = bytes to EOF"}
		f.Message = fmt.Sprintf("%s stops at the 8-byte window at %d and drops %d later record(s)", who, h.Offset, h.VictimCount())
	case CodeGen1Stop:
		f.Message = fmt.Sprintf("%s stops at %d (%v) and never sees %d later record(s)", who, h.Offset, h.Details["reason"], h.VictimCount())
	case CodeScannerCrash:
		f.Message = fmt.Sprintf("frame with Size < 16 and a 0xFF marker at %d crashes the %s scanner and takes the vhost down", h.Offset, VersionsGen1)
	}
	return f
}
