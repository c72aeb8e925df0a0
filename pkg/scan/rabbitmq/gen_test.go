package rabbitmq

import (
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestGeneratedVHost: every record the generator wrote is found at its
// place with the status its queue index gives it (checkWritten), the zero
// holes it left are seen, and (the generator avoids the §3.4 condition)
// nothing is misread.
func TestGeneratedVHost(t *testing.T) {
	for _, kind := range []rabbitmq.TermKind{rabbitmq.BasicMessage, rabbitmq.MC} {
		dir := t.TempDir()
		sum, err := rabbitmq.Generate(dir, rabbitmq.Config{Seed: 7, Kind: kind, TotalBytes: 3 << 20,
			FileLimit: 1 << 20, HoleEvery: 10, UnrefEvery: 7, KeepRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		var recs []RecordJSON
		v := scanKeep(t, dir, sum.VHostDir, VHostOptions{Options: scan.Options{
			Records: func(r any) error { recs = append(recs, r.(RecordJSON)); return nil }}})
		res := &scan.Result{}
		v.AddTo(res)
		checkWritten(t, dir, sum, nil, res, recs)
		holes, refd := 0, 0
		for _, f := range v.Files {
			for _, g := range f.Gaps {
				if g.Zero {
					holes++
				}
			}
		}
		for _, r := range recs {
			var id [16]byte
			copy(id[:], mustHex(t, r.MsgID))
			_, want := sum.Refs[id]
			if (r.Status == StatusReferenced) != want || r.PayloadSize < 4096 || r.PayloadSize > 20000 || r.Term == "" {
				t.Errorf("record %+v (referenced in the generator: %v)", r, want)
			}
			if want {
				refd++
			}
		}
		if len(recs) != sum.Records || refd != len(sum.Refs) || holes == 0 || len(v.Lost) != 0 ||
			len(codes(v.Findings, CodeZeroHoleMisread))+len(codes(v.Findings, CodeOffByNine)) != 0 {
			t.Errorf("kind %d: %d records (generated %d), %d referenced (%d), %d zero holes, lost %v, findings %d",
				kind, len(recs), sum.Records, refd, len(sum.Refs), holes, v.Lost, len(v.Findings))
		}
	}
}
