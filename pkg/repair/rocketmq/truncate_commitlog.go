package rocketmq

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// trRecordCodes are the finding codes that stand for one (possibly
// damaged) record: the records an action past the end destroys.
var trRecordCodes = map[string]bool{
	scanrmq.CodeStaleRecord: true, scanrmq.CodeBodyCRC: true, scanrmq.CodePropCRC: true,
	scanrmq.CodeTornTail: true, scanrmq.CodeSalvage: true,
}

// commitLog plans the commitlog actions: zero the end file past the end
// (or cut and pad it when it is short) and remove the later files.
func (t *trPlanner) commitLog() error {
	endSeen, removing := false, false
	for _, f := range t.res.Files {
		base, err := rmq.ParseFileName(path.Base(f.Path))
		if err != nil {
			continue // the scan skipped (and reported) badly named files too
		}
		span := max(f.Size, t.mapped)
		switch {
		case base+span <= t.end:
			if f.Size != t.mapped {
				t.note("%s is %d bytes, not the mapped size %d, and lies before the recovery end: not repaired here; the broker refuses to load the store", f.Path, f.Size, t.mapped)
			}
			t.rep.EndPath, t.rep.EndOffset = f.Path, t.end-base
		case !endSeen && base <= t.end:
			endSeen = true
			if err := t.endFile(f, base); err != nil {
				return err
			}
		default:
			endSeen = true
			var err error
			if removing, err = t.laterFile(f, base, removing); err != nil {
				return err
			}
		}
	}
	return nil
}

// endFile handles the commitlog file that holds the recovery end.
func (t *trPlanner) endFile(f scan.File, base int64) error {
	pos := t.end - base
	t.rep.EndPath, t.rep.EndOffset = f.Path, pos
	reason := t.reasonAt(f.Path, pos)
	lnz, err := trLastNonZero(t.abs(f.Path), pos, f.Size)
	if err != nil {
		return err
	}
	if lnz >= 0 {
		t.rep.Reason = reason
	}
	rel := filepath.FromSlash(f.Path)
	tf := TruncateFile{Path: f.Path, Size: f.Size}
	if lnz >= 0 {
		n, ids, summary := t.lostIn(f.Path, pos, lnz+1)
		note := fmt.Sprintf("%d bytes from the recovery end (phy %d) to the last non-zero byte%s; the broker would leave them on disk", lnz+1-pos, t.end, summary)
		a := repair.Action{Op: repair.OpZeroRange, Path: rel, Offset: pos, Length: lnz + 1 - pos,
			Lost: trLoss(n, ids, note), Reason: reason}
		if err := t.add(a, true); err != nil {
			return err
		}
	}
	switch {
	case f.Size < t.mapped:
		tf.Decision = TruncatePad
		tf.Why = fmt.Sprintf("file is %d bytes, below the mapped size %d (the broker refuses to load it): the partial record from offset %d is zeroed and the file padded with zeros to %d", f.Size, t.mapped, pos, t.mapped)
		a := repair.Action{Op: repair.OpResizeFile, Path: rel, NewSize: t.mapped, Reason: scanrmq.CodeShortFile,
			Lost: repair.Loss{Note: fmt.Sprintf("pads %d zero bytes; nothing existing is removed", t.mapped-f.Size)}}
		if err := t.add(a, true); err != nil {
			return err
		}
	case lnz >= 0:
		tf.Decision = TruncateZeroTail
		tf.Why = fmt.Sprintf("recovery stops at offset %d (%s); the rest is zeroed so the stale bytes cannot be recovered later (rocketmq #10017); the size stays %d", pos, reason, f.Size)
	default:
		tf.Decision = TruncateClean
		tf.Why = fmt.Sprintf("only zeros after the recovery end at offset %d", pos)
	}
	if f.Size > t.mapped {
		t.note("%s is %d bytes, above the mapped size %d: the broker refuses to load it; not repaired here", f.Path, f.Size, t.mapped)
	}
	t.rep.CommitLog = append(t.rep.CommitLog, tf)
	return nil
}

// laterFile handles a commitlog file after the end file: an all-zero file
// of the mapped size is kept (unless a file before it is removed, which
// would leave a hole in the offset sequence); anything else is moved to
// the backup, as MappedFileQueue.truncateDirtyFiles deletes it.
func (t *trPlanner) laterFile(f scan.File, base int64, removing bool) (bool, error) {
	lnz, err := trLastNonZero(t.abs(f.Path), 0, f.Size)
	if err != nil {
		return removing, err
	}
	tf := TruncateFile{Path: f.Path, Size: f.Size}
	if lnz < 0 && f.Size == t.mapped && !removing {
		tf.Decision = TruncateKeep
		tf.Why = "all zeros: a pre-allocated file; the broker deletes it at start (truncateDirtyFiles) and re-creates it when needed, and no byte in it can be mistaken for a record"
		t.rep.CommitLog = append(t.rep.CommitLog, tf)
		return false, nil
	}
	n, ids, err := t.walkValid(base, f.Size)
	if err != nil {
		return removing, err
	}
	fn, fids, summary := t.lostIn(f.Path, 0, f.Size)
	n += fn
	ids = append(ids, fids...)
	reason := scanrmq.CodeBeyondRecovery
	switch {
	case n > 0:
	case f.Size != t.mapped:
		reason = scanrmq.CodeShortFile
	case lnz >= 0:
		reason = t.reasonAt(f.Path, 0)
	}
	note := fmt.Sprintf("whole file (phy %d..%d) lies past the recovery end %d", base, base+f.Size, t.end)
	if n > 0 {
		note += fmt.Sprintf("; %d records in it are dropped (salvage them first if they matter)%s", n, summary)
	} else if lnz < 0 {
		note += "; all zeros, removed only to keep the file sequence without holes"
	}
	a := repair.Action{Op: repair.OpRemoveFile, Path: filepath.FromSlash(f.Path), Reason: reason, Lost: trLoss(n, ids, note)}
	if err := t.add(a, true); err != nil {
		return removing, err
	}
	tf.Decision = TruncateRemove
	tf.Why = "past the recovery end: the broker's truncateDirtyFiles deletes it; here it is moved to the backup instead"
	t.rep.CommitLog = append(t.rep.CommitLog, tf)
	return true, nil
}

// reasonAt is the code of the first truncate finding at or after pos in
// the file (findings are sorted by path and offset).
func (t *trPlanner) reasonAt(rel string, pos int64) string {
	for _, f := range t.res.Findings {
		if f.Path == rel && f.Offset >= pos && f.Repair == scan.RepairTruncate {
			return f.Code
		}
	}
	return scanrmq.CodeStaleTail
}

// lostIn counts the record findings in [from, to) of a file: the records
// the action destroys. summary lists the count per code.
func (t *trPlanner) lostIn(rel string, from, to int64) (n int64, ids []string, summary string) {
	seen := map[int64]bool{}
	byCode := map[string]int{}
	for _, f := range t.res.Findings {
		if f.Path == rel && f.Code == scanrmq.CodeTooManyFindings {
			summary = " (at least: the scan stopped listing findings)"
		}
		if f.Path != rel || f.Offset < from || f.Offset >= to || !trRecordCodes[f.Code] || seen[f.Offset] {
			continue
		}
		seen[f.Offset] = true
		n++
		byCode[f.Code]++
		if f.MsgID != "" {
			ids = append(ids, f.MsgID)
		}
	}
	var parts []string
	for c, k := range byCode {
		parts = append(parts, fmt.Sprintf("%d %s", k, c))
	}
	sort.Strings(parts)
	if len(parts) > 0 {
		summary = ": " + strings.Join(parts, ", ") + summary
	}
	return n, ids, summary
}

// walkValid walks the valid records from the start of the file at base
// (the primary walk the scan did) and returns their count and msg ids.
func (t *trPlanner) walkValid(base, size int64) (int64, []string, error) {
	var n int64
	var ids []string
	for phy := base; phy < base+size; {
		if err := t.ctx.Err(); err != nil {
			return 0, nil, err
		}
		m, err := t.st.RecordAt(phy)
		var ce *format.CorruptError
		if errors.As(err, &ce) || errors.Is(err, scanrmq.ErrNoFile) {
			break
		}
		if err != nil {
			return 0, nil, err
		}
		if m.IsBlank() || m.TotalSize <= 0 {
			break
		}
		n++
		ids = append(ids, m.MsgID())
		phy += int64(m.TotalSize)
	}
	return n, ids, nil
}

func (t *trPlanner) abs(rel string) string { return filepath.Join(t.root, filepath.FromSlash(rel)) }

// trChunk is the read size of trLastNonZero: 1 MiB keeps memory flat on
// 1 GiB commitlog files.
const trChunk = 1 << 20

// trLastNonZero returns the offset of the last non-zero byte of the file
// in [from, to), or -1 when that range is all zeros (or empty). It reads
// backwards, so a zeroed tail costs one pass over the tail only.
func trLastNonZero(p string, from, to int64) (int64, error) {
	if from >= to {
		return -1, nil
	}
	f, err := storefile.Open(p)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	// Only the data extents are read, last first: the holes of a sparse
	// file (a 1 TiB file made by truncate -s is one) read as zeros.
	var ext [][2]int64
	if err := sparse.Extents(f, to, func(off, end int64) error {
		if end > from {
			ext = append(ext, [2]int64{max(off, from), end})
		}
		return nil
	}); err != nil {
		return -1, err
	}
	buf := make([]byte, trChunk)
	for e := len(ext) - 1; e >= 0; e-- {
		for lo0, hi := ext[e][0], ext[e][1]; hi > lo0; {
			lo := max(lo0, hi-trChunk)
			b := buf[:hi-lo]
			if n, err := f.ReadAt(b, lo); n < len(b) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return -1, fmt.Errorf("%s: %w", p, err)
			}
			for i := len(b) - 1; i >= 0; i-- {
				if b[i] != 0 {
					return lo + int64(i), nil
				}
			}
			hi = lo
		}
	}
	return -1, nil
}
