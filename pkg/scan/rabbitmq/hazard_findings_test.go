package rabbitmq

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// TestHazardFindingsSameAsRescan: on stores with zero-hole misreads,
// generation-1 stops and an off-by-nine window, hazardFindingsOf a scan
// for a version are exactly the hazard findings of a scan made with that
// --broker-version (same order, severities and details).
func TestHazardFindingsSameAsRescan(t *testing.T) {
	recs, plens := realRecords(t)
	a, c := recs[0], recs[1]
	vic := victim(t, recs[0], plens[0], 4116, 0, 0xFF, 1)
	x := append([]byte(nil), recs[0]...)
	po, err := rabbitmq.PayloadOffset(x, plens[0])
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(x[po+50:], uint64(len(x)+len(c)-po-50-4)) // off-by-nine window
	hazardous := map[string]bool{CodeZeroHoleMisread: true, CodeOffByNine: true, CodeGen1Stop: true, CodeScannerCrash: true}
	compared := 0
	severities := map[scan.Severity]bool{}
	for _, parts := range [][]part{
		{{rec: a}, {rec: c}, {hole: 5}, {rec: vic, victim: true}},
		{{rec: a}, {hole: 5}, {rec: vic, victim: true}, {rec: c}},
		{{rec: x}, {rec: c}},
	} {
		root, vdir, _, _ := writeVHost(t, parts)
		base := scanVHostDir(t, root, vdir, "")
		for _, ver := range []string{"3.10.0", "3.13.0", "3.13.7", "4.0.2", "4.1.5", "4.1.8"} {
			var want []scan.Finding
			for _, f := range scanVHostDir(t, root, vdir, ver).v.Findings {
				if hazardous[f.Code] {
					want = append(want, f)
				}
			}
			got, err := hazardFindingsOf(base.v, ver)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: hazardFindingsOf %+v, a scan for it %+v", ver, got, want)
			}
			for _, f := range want {
				severities[f.Severity] = true
			}
			compared += len(want)
		}
	}
	if compared == 0 || !severities[scan.Info] || !severities[scan.Error] {
		t.Errorf("vacuous: %d findings compared, severities %v", compared, severities)
	}
	t.Logf("%d hazard findings compared, severities %v", compared, severities)
	if _, err := hazardFindingsOf(&VHostScan{}, ""); err == nil {
		t.Error("hazardFindingsOf without a version: no error")
	}
}

// hazardFindingsOf returns the scanner-hazard findings of v (a ScanVHost
// result) as ScanVHost with BrokerVersion version reports them, in the
// same order. A version changes only their severities, so no file is
// read again. version must be set: without one, the severities depend on
// what the scan saw of all record terms; v.Findings has those.
func hazardFindingsOf(v *VHostScan, version string) ([]scan.Finding, error) {
	ver, err := parseVersion(version)
	if err != nil {
		return nil, err
	}
	if !ver.set {
		return nil, fmt.Errorf("hazardFindingsOf needs a broker version")
	}
	var out []scan.Finding
	for _, fs := range v.Files {
		out = fs.hazardFindings(out, ver)
	}
	return out, nil
}
