package report

import (
	"testing"

	"github.com/storectl/storectl/pkg/scan"
)

// TestLossLine: the "lost or at risk" line counts the messages a finding
// about many says it loses (details.live_victim_count, else victim_count),
// not only the first one it names; the hazards of one file may lose the
// same records, so several there give a range (the largest count to the
// sum); other findings count their distinct msg ids, info and coverage
// findings nothing.
func TestLossLine(t *testing.T) {
	hz := func(path, id string, d map[string]any) scan.Finding {
		return scan.Finding{Code: "rabbitmq.rdq.gen1-stop", Severity: scan.Error, Path: path, Offset: 8, Length: 8, MsgID: id, Details: d}
	}
	for _, c := range []struct {
		name string
		fs   []scan.Finding
		want string
	}{
		{"one hazard per file", []scan.Finding{
			hz("0.rdq", "a", map[string]any{"victim_count": 500, "live_victim_count": 400}),
			hz("1.rdq", "b", map[string]any{"victim_count": 30, "live_victim_count": 30}),
		}, "lost or at risk: 430 message(s) a broker scanner misses, 16 byte(s) of damaged regions (rabbitmq.rdq.gen1-stop ×2)"},
		{"two hazards in one file, counts decoded from JSON", []scan.Finding{
			hz("0.rdq", "a", map[string]any{"victim_count": float64(500), "live_victim_count": float64(400)}),
			hz("0.rdq", "c", map[string]any{"victim_count": float64(90), "live_victim_count": float64(90)}),
		}, "lost or at risk: 400-490 message(s) a broker scanner misses, 16 byte(s) of damaged regions (rabbitmq.rdq.gen1-stop ×2)"},
		{"no live count: every victim", []scan.Finding{
			hz("0.rdq", "a", map[string]any{"victim_count": 7}),
		}, "lost or at risk: 7 message(s) a broker scanner misses, 8 byte(s) of damaged regions (rabbitmq.rdq.gen1-stop ×1)"},
		{"plain findings and an info hazard", []scan.Finding{
			{Code: "rocketmq.commitlog.body-crc", Severity: scan.Error, Path: "commitlog/0", Length: 100, MsgID: "m1"},
			{Code: "rocketmq.commitlog.body-crc", Severity: scan.Error, Path: "commitlog/0", Length: 100, MsgID: "m1"},
			{Code: "rocketmq.commitlog.body-crc", Severity: scan.Error, Path: "commitlog/0", Length: 100, MsgID: "m2"},
			{Code: "rabbitmq.rdq.gen1-stop", Severity: scan.Info, Path: "0.rdq", MsgID: "x", Details: map[string]any{"victim_count": 9999}},
		}, "lost or at risk: 2 message(s), 300 byte(s) of damaged regions (rocketmq.commitlog.body-crc ×3)"},
		{"an unread file only: its bytes are not damage", []scan.Finding{
			{Code: "storectl.file.unreadable", Severity: scan.Error, Path: "timerlog/4096", Length: 0},
			{Code: "rocketmq.timerlog.unknown", Severity: scan.Warning, Path: "timerlog/4096", Length: 4096},
			{Code: "storectl.file.not-regular", Severity: scan.Error, Path: "timerlog/4096"},
		}, "lost or at risk: no message named (storectl.file.not-regular ×1); beyond that unknown: 4096 byte(s) not read (rocketmq.timerlog.unknown ×1, storectl.file.unreadable ×1)"},
		{"unread and nothing else", []scan.Finding{
			{Code: "rabbitmq.queue.message-unknown", Severity: scan.Warning, Path: "q/0.idx", MsgID: "m9"},
			{Code: "rabbitmq.rdq.unreadable", Severity: scan.Error, Path: "3.rdq", Length: 100},
		}, "lost or at risk: unknown: 100 byte(s) not read (rabbitmq.queue.message-unknown ×1, rabbitmq.rdq.unreadable ×1); nothing else"},
		{"the unknowns named with a dash (rocketmq.dledger.cq-unknown, rocketmq.timerlog.target-unknown)", []scan.Finding{
			{Code: "rocketmq.dledger.cq-unknown", Severity: scan.Warning, Path: "consumequeue/TopicA/0/00000000000000000000"},
			{Code: "rocketmq.timerlog.target-unknown", Severity: scan.Warning, Path: "timerlog/00000000000000000000"},
			{Code: "storectl.file.unreadable", Severity: scan.Error, Path: "dledger-n0/data/00000000000000000000"},
		}, "lost or at risk: unknown (rocketmq.dledger.cq-unknown ×1, rocketmq.timerlog.target-unknown ×1, storectl.file.unreadable ×1); nothing else"},
		{"damage and an unread file", []scan.Finding{
			{Code: "rocketmq.commitlog.body-crc", Severity: scan.Error, Path: "commitlog/0", Length: 100, MsgID: "m1"},
			{Code: "rocketmq.commitlog.unknown", Severity: scan.Warning, Path: "commitlog/2", Length: 50},
		}, "lost or at risk: 1 message(s), 100 byte(s) of damaged regions (rocketmq.commitlog.body-crc ×1); beyond that unknown: 50 byte(s) not read (rocketmq.commitlog.unknown ×1)"},
	} {
		e := newText(nil, Style{})
		e.findings = c.fs
		if got := e.lossLine(Summary{}); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
