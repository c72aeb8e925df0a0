package rocketmq

import (
	"errors"

	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// fileResult is the outcome of walking one file.
type fileResult struct {
	seg      segment
	file     scan.File
	findings []scan.Finding
	cf       *crossFile     // the cross-file checks of this file's records, from nothing before it
	cross    []scan.Finding // cross-file findings of this file's records, from the real state
	propCRC  int            // records whose property CRC was verified (with record callbacks)
	done     func()         // Config.OnFile's Done, called in file order
	blank    bool           // the primary walk ended at a BLANK record
	failPos  int64          // where the primary walk stopped (BLANK position included)
	zeroTail bool           // from failPos to EOF everything is zero
	err      error
}

// walker scans one file; emit receives valid records of the primary walk.
type walker struct {
	cfg     *Config
	mapped  int64
	isLast  bool
	buf     []byte
	emit    func(m *rmq.Message, seg *segment, pos int64) error
	progres func(int64)
	res     *fileResult
	nfind   int
	m       *rmq.Message // the current record (the Reader's): no allocation per record
}

func (wk *walker) add(f scan.Finding) {
	wk.nfind++
	switch {
	case wk.nfind < maxFindingsPerFile:
		wk.res.findings = append(wk.res.findings, f)
	case wk.nfind == maxFindingsPerFile:
		wk.res.findings = append(wk.res.findings, scan.Finding{Code: CodeTooManyFindings, Severity: scan.Warning,
			Path: f.Path, Offset: f.Offset, Repair: scan.RepairNone,
			Message: "too many findings in this file; the rest are not listed"})
	}
}

func (wk *walker) run(r *rmq.Reader) error {
	seg, res := &wk.res.seg, wk.res
	for r.Next() {
		wk.m = r.Message()
		if err := wk.valid(wk.m, r.Offset()); err != nil {
			return err
		}
	}
	pos := r.Offset()
	if r.End() == rmq.EndIO {
		return r.Err() // failPos stays 0: the recovery end is the file's start
	}
	res.failPos = pos
	switch r.End() {
	case rmq.EndEOF: // the last record ends exactly at EOF
		res.zeroTail = true
		res.file.End = scan.EndEOF
	case rmq.EndBlank:
		res.blank = true
		res.file.End = scan.EndBlank
	case rmq.EndCorrupt:
		if err := wk.failure(r, pos, r.Raw(), r.Message(), r.Err()); err != nil {
			return err
		}
	}
	res.file.ValidEnd = res.failPos
	if wk.mapped > 0 && seg.size != wk.mapped {
		res.file.End = scan.EndShort
		wk.add(wk.finding(CodeShortFile, scan.Error, seg.size, abs(wk.mapped-seg.size), nil,
			"commitlog file size differs from the mapped file size; the broker refuses to load the store",
			map[string]string{"file_size": "fail"}, fmtInt(wk.mapped), fmtInt(seg.size)))
	}
	res.file.BytesScanned = r.MaxRead()
	return nil
}

func (wk *walker) valid(m *rmq.Message, pos int64) error {
	res := wk.res
	if res.file.FirstValid < 0 {
		res.file.FirstValid = pos
	}
	res.file.LastValid = pos
	res.file.Records++
	res.cf.record(m, pos)
	if wk.emit != nil {
		return wk.emit(m, &res.seg, pos)
	}
	return nil
}

// failure classifies the first failing position of the primary walk,
// reports it and then walks on in forensic mode to the end of the file.
func (wk *walker) failure(r *rmq.Reader, pos int64, b []byte, m *rmq.Message, cause error) error {
	seg, res := &wk.res.seg, wk.res
	last, err := r.LastNonZero(pos, seg.size)
	if err != nil {
		return err
	}
	if last < 0 { // zeros (or nothing) from here to EOF: the normal end of the last file
		res.zeroTail = true
		res.file.End = scan.EndZero
		return nil
	}
	framed := rmq.IsFramed(cause) // structure decoded; the size can be trusted
	validMagic := (m.Magic == rmq.MagicMessageV1 || m.Magic == rmq.MagicMessageV2) &&
		m.TotalSize >= rmq.MinRecordSize && int(m.TotalSize) <= wk.cfg.MaxMessageSize
	var recEnd int64
	if validMagic {
		recEnd = pos + int64(m.TotalSize)
	}
	switch {
	case validMagic && recEnd > seg.size:
		res.file.End = scan.EndTorn
		wk.add(wk.recordFinding(CodeTornTail, scan.Error, pos, seg.size-pos, m, cause,
			"record is cut short by the end of the file (torn write)"))
		return nil
	case validMagic && last < recEnd && len(b) >= int(m.TotalSize) && b[m.TotalSize-1] == 0:
		// Zeros start inside the record and run to EOF: a torn write.
		res.file.End = scan.EndTorn
		wk.add(wk.recordFinding(CodeTornTail, scan.Error, pos, int64(m.TotalSize), m, cause,
			"record is zero-filled from its middle to the end of the file (torn write)"))
		return nil
	}
	res.file.End = scan.EndGarbage
	if framed {
		wk.framedFinding(pos, m, cause)
		if last < recEnd {
			res.file.End = scan.EndTorn
			return nil
		}
		return wk.forensic(r, recEnd, last)
	}
	return wk.garbage(r, pos, last, cause)
}

// framedFinding reports a record whose frame decoded but a check failed.
func (wk *walker) framedFinding(pos int64, m *rmq.Message, cause error) {
	var ce *format.CorruptError
	errors.As(cause, &ce)
	switch {
	case errors.Is(cause, rmq.ErrStale):
		wk.add(wk.recordFinding(CodeStaleRecord, scan.Error, pos, int64(m.TotalSize), m, cause,
			"record's stored physical offset does not match its position: stale data from an earlier life of the file (rocketmq #10017)"))
	case ce != nil && ce.Field == "propCRC":
		wk.add(wk.recordFinding(CodePropCRC, scan.Error, pos, int64(m.TotalSize), m, cause,
			"record's __CRC32# property does not match the record bytes"))
	case errors.Is(cause, format.ErrChecksum):
		wk.add(wk.recordFinding(CodeBodyCRC, scan.Error, pos, int64(m.TotalSize), m, cause,
			"record's body CRC does not match its body"))
	default:
		wk.add(wk.recordFinding(CodeGarbage, scan.Error, pos, int64(m.TotalSize), m, cause,
			"record header is inconsistent"))
	}
}

// garbage reports the undecodable region starting at pos and resyncs.
func (wk *walker) garbage(r *rmq.Reader, pos, last int64, cause error) error {
	next, err := r.Resync(pos + 1)
	if err != nil {
		return err
	}
	end := next
	if next < 0 {
		end = last + 1
	}
	lnz, err := r.LastNonZero(pos, end)
	if err != nil {
		return err
	}
	if lnz >= 0 {
		f := wk.finding(CodeGarbage, scan.Error, pos, end-pos, nil,
			"bytes that do not decode as a record", map[string]string{"magic": "fail"}, "", "")
		if next >= 0 {
			f.Details["resync_offset"] = next
		}
		if cause != nil {
			f.Details["error"] = cause.Error()
			var ce *format.CorruptError
			if errors.As(cause, &ce) {
				f.Evidence = map[string]string{ce.Field: "fail"}
			}
		}
		wk.add(f)
	}
	if next < 0 {
		return nil
	}
	return wk.forensic(r, next, last)
}

// forensic walks [pos, EOF) after the first failure, reporting what it
// finds: stale records, CRC failures, garbage and salvage candidates.
func (wk *walker) forensic(r *rmq.Reader, pos, last int64) error {
	seg := &wk.res.seg
	maxSize := wk.cfg.MaxMessageSize
	for pos <= last {
		b, err := r.RecordBytes(pos)
		if err != nil {
			return err
		}
		m, err := rmq.CheckMessage(b, seg.base+pos, maxSize)
		switch {
		case err == nil && m.IsBlank():
			return nil
		case err == nil:
			wk.add(wk.recordFinding(CodeSalvage, scan.Warning, pos, int64(m.TotalSize), &m, nil,
				"valid record beyond the point where recovery stops; truncation would drop it"))
		case rmq.IsFramed(err):
			wk.framedFinding(pos, &m, err)
		default:
			if len(b) >= 8 && format.AllZero(b[:8]) {
				if l, err := r.LastNonZero(pos, last+1); err != nil || l < 0 {
					return err
				}
			}
			return wk.garbage(r, pos, last, err)
		}
		pos += int64(m.TotalSize)
	}
	return nil
}
