package rocketmq

import (
	"errors"
	"strconv"

	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

func fmtInt(v int64) string { return strconv.FormatInt(v, 10) }

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// finding builds a finding in the walked file. Everything the walker
// reports lies at or after the file's first failure, so beyond the
// recovery end: the repair is truncate.
func (wk *walker) finding(code string, sev scan.Severity, pos, length int64, m *rmq.Message,
	msg string, ev map[string]string, expected, actual string) scan.Finding {
	seg := &wk.res.seg
	f := scan.Finding{Code: code, Severity: sev, Path: seg.rel, Offset: pos, Length: length,
		Expected: expected, Actual: actual, Evidence: ev, Repair: scan.RepairTruncate, Message: msg,
		Details: map[string]any{"phy_offset": seg.base + pos}}
	if m != nil && m.Raw != nil {
		f.MsgID = m.MsgID()
		f.Details["topic"] = string(m.Topic)
		f.Details["queue_id"] = m.QueueID
		f.Details["queue_offset"] = m.QueueOffset
		f.Details["stored_phy_offset"] = m.PhysicalOffset
		f.Details["store_timestamp"] = m.StoreTimestamp
		if u := m.UniqKey(); u != "" {
			f.Details["uniq_key"] = u
		}
	}
	return f
}

// recordFinding builds a finding about the record at pos, with the
// evidence of every check it ran.
func (wk *walker) recordFinding(code string, sev scan.Severity, pos, length int64, m *rmq.Message,
	cause error, msg string) scan.Finding {
	ev := evidence(m, wk.res.seg.base+pos, cause)
	f := wk.finding(code, sev, pos, length, m, msg, ev, "", "")
	switch code {
	case CodeStaleRecord:
		f.Expected, f.Actual = fmtInt(wk.res.seg.base+pos), fmtInt(m.PhysicalOffset)
	case CodeBodyCRC:
		f.Expected, f.Actual = fmtInt(int64(rmq.CRC32(m.Body))), fmtInt(int64(m.BodyCRC))
	case CodePropCRC:
		p := m.PropCRC()
		f.Expected, f.Actual = fmtInt(int64(p.Computed)), fmtInt(p.Stored)
	case CodeTornTail:
		f.Expected, f.Actual = fmtInt(int64(m.TotalSize)), fmtInt(wk.res.seg.size-pos)
	}
	if cause != nil {
		f.Details["error"] = format.WithPath(cause, wk.res.seg.rel).Error()
	}
	return f
}

// evidence lists each check and its outcome for a record.
func evidence(m *rmq.Message, phy int64, cause error) map[string]string {
	ev := map[string]string{}
	if m.Magic == rmq.MagicMessageV1 || m.Magic == rmq.MagicMessageV2 {
		ev["magic"] = "pass"
	} else {
		ev["magic"] = "fail"
		return ev
	}
	if m.Raw == nil || (cause != nil && !rmq.IsFramed(cause)) {
		var ce *format.CorruptError
		if errors.As(cause, &ce) {
			ev[ce.Field] = "fail"
		}
		ev["structure"] = "fail"
		return ev
	}
	ev["structure"] = "pass"
	ev["body_crc"] = passFail(m.BodyCRCOK())
	if p := m.PropCRC(); p.Present {
		ev["prop_crc"] = passFail(p.OK)
	}
	ev["phy_offset"] = passFail(m.PhysicalOffset == phy)
	return ev
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}
