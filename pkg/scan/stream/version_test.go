package stream_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/scan/stream"
)

// TestVersionAssumption: a scan given no broker version says it judges
// the streams as 4.0.5 would, and what the node's feature flags say: the
// 3.10.8 node (T1) was last run by 3.9 or 3.10, the 4.0.5 one (S1) by 4.x.
func TestVersionAssumption(t *testing.T) {
	for _, c := range []struct {
		ds   streamtest.Dataset
		want string
	}{
		{streamtest.Datasets310[0], "last run by RabbitMQ 3.9 or 3.10: give --broker-version"},
		{streamtest.Datasets40[0], "(no --broker-version); the node's feature flags say 4.x"},
	} {
		node := streamtest.NodeDir(t, c.ds)
		res := scanNode(t, node, "", nil)
		var got string
		for _, a := range res.Assumptions {
			if strings.HasPrefix(a, "streams judged and converted as RabbitMQ 4.0.5") {
				got = a
			}
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: assumptions %q, want %q", c.ds.Name, res.Assumptions, c.want)
		}
		if res := scanNode(t, node, c.ds.Version, nil); len(res.Assumptions) != 0 {
			t.Errorf("%s with its version: %q", c.ds.Name, res.Assumptions)
		}
	}
	// no flags file beside the node: the rule set alone
	node := t.TempDir()
	os.MkdirAll(filepath.Join(node, "stream"), 0o755)
	if a := stream.VersionAssumption(node, ""); a != "streams judged and converted as RabbitMQ 4.0.5 (no --broker-version)" {
		t.Errorf("without flags: %q", a)
	}
}
