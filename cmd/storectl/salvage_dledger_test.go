package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSalvageDLedgerMissingUnits: a consume queue unit pointing at an
// inner offset no DLedger entry holds has no message to export: salvage
// lists it in extra.salvage.missing and exits 1, exactly as it lists the
// same unit of a plain commitlog store (same fields, same reason). The
// damage: unit 1 of TopicA/0 moved 8 bytes past its record, in a copy of
// the bundled DL1 and of the plain 5.3.3 store. DLedger's salvage used to
// exit 0 with no word of it (it never looked at the consume queues).
func TestSalvageDLedgerMissingUnits(t *testing.T) {
	const cq = "store/consumequeue/TopicA/0/00000000000000000000"
	for _, sel := range []string{"all", "lost"} {
		var shapes []string
		for _, fx := range []string{"rocketmq/rmq533-a-clean.tar.gz", "rocketmq-5x/rmq533-dl1-clean.tar.gz"} {
			dir := fixture(t, fx)
			p := filepath.Join(dir, filepath.FromSlash(cq))
			b, err := os.ReadFile(p)
			if err != nil || len(b) < 40 {
				t.Fatalf("%s: %v (%d bytes)", cq, err, len(b))
			}
			phy := int64(binary.BigEndian.Uint64(b[20:])) + 8
			binary.BigEndian.PutUint64(b[20:], uint64(phy))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI(t, "salvage", "--select", sel, "--out", filepath.Join(t.TempDir(), "out"), "-o", "jsonl", filepath.Join(dir, "store"))
			objs := jsonlObjects(t, out)
			sal := objs[len(objs)-1]["extra"].(map[string]any)["salvage"].(map[string]any)
			missing, _ := sal["missing"].([]any)
			if code != exitFindings || len(missing) != 1 {
				t.Fatalf("%s --select %s: exit %d, missing %v; want 1 and the unit at phy %d\n%s", fx, sel, code, sal["missing"], phy, errOut)
			}
			m := missing[0].(map[string]any)
			if m["topic"] != "TopicA" || m["queue_id"] != 0.0 || m["queue_offset"] != 1.0 || m["phy_offset"] != float64(phy) {
				t.Fatalf("%s --select %s: missing %v, want TopicA/0 unit 1 at phy %d", fx, sel, m, phy)
			}
			delete(m, "phy_offset") // the stores' offsets differ; the rest is the shape
			j, _ := json.Marshal(m)
			shapes = append(shapes, string(j))
		}
		if shapes[0] != shapes[1] {
			t.Fatalf("--select %s: the DLedger missing unit %s is not shaped as the commitlog one %s", sel, shapes[1], shapes[0])
		}
	}
}
