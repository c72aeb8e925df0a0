package rabbitmq

import (
	"encoding/binary"
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// TestOffByNine: a file [X (unreferenced, its payload holds an 8-byte
// integer equal to bytes-to-EOF − 4), Y (referenced)] (§3.3, the
// verified PR #14576 case). The generation-3 model with the old bound
// returns [], with the fix [Y]; storectl finds Y and reports the window
// with Y as victim.
func TestOffByNine(t *testing.T) {
	recs, plens := realRecords(t)
	x := append([]byte(nil), recs[0]...)
	y := recs[1]
	po, err := rabbitmq.PayloadOffset(x, plens[0])
	if err != nil {
		t.Fatal(err)
	}
	p := po + 50
	n := len(x) + len(y)
	binary.BigEndian.PutUint64(x[p:], uint64(n-p-4))
	var yid [16]byte
	copy(yid[:], y[8:24])
	root, vdir, b, _ := writeVHost(t, []part{{rec: x}, {rec: y}})
	// only Y is referenced: rewrite the queue with Y alone
	if err := rabbitmq.WriteQueue(vdir, "/", "q1", [][16]byte{yid}); err != nil {
		t.Fatal(err)
	}
	valid := func(r rfmt.ScanRecord) rfmt.Validity {
		if r.MsgID == yid {
			return rfmt.Valid
		}
		return rfmt.Invalid
	}
	if old := rfmt.ScanData(b, rfmt.ScanOptions{Valid: valid}); len(old) != 0 {
		t.Fatalf("generation-3 model, old bound: %v, want []", old)
	}
	if fixed := rfmt.ScanData(b, rfmt.ScanOptions{Valid: valid, OffByNineFix: true}); len(fixed) != 1 || fixed[0].MsgID != yid {
		t.Fatalf("generation-3 model, fixed bound: %v, want [Y]", fixed)
	}
	s := scanVHostDir(t, root, vdir, "")
	f := s.file(0)
	if len(f.Records) != 2 || f.Records[0].Status != StatusUnreferenced || f.Records[1].Status != StatusReferenced {
		t.Fatalf("records %+v %+v", f.Records[0], f.Records[1])
	}
	obn := codes(s.v.Findings, CodeOffByNine)
	if len(obn) != 1 {
		t.Fatalf("off-by-nine findings: %+v", obn)
	}
	h := obn[0]
	vs := h.Details["victims"].(Victims)
	if h.Offset != int64(p) || len(vs) != 1 || vs[0].Offset != int64(len(x)) || h.MsgID != f.Records[1].ID() ||
		h.Details["versions"] != VersionsGen3Unfixed || h.Severity.String() != "error" {
		t.Errorf("finding %+v", h)
	}
	// A 4.1.5 broker is not affected: the hazard is info only.
	s = scanVHostDir(t, root, vdir, "4.1.5")
	if h := codes(s.v.Findings, CodeOffByNine); len(h) != 1 || h[0].Severity.String() != "info" {
		t.Errorf("with 4.1.5: %+v", h)
	}
}
