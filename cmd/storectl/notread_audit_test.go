package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestNothingDrawnFromAFileNotRead: for every store file of a fixture in
// turn, a directory in its place (a file storectl cannot read) may make
// scan and verify name the file unreadable and make what rests on it
// unknown, but may not give any other warning or error that the
// undamaged fixture does not give: nothing is concluded from the absence
// of what was not read. A finding that names what it waits on
// (details.waits_on) is an unknown and allowed; so is one the undamaged
// run gives too, at the same severity. A run that exits 3 names the file. Each case this audit found when
// it was written was a wrong verdict: consume queue units into an unread
// commitlog file called bad, a delay offset above the max of a queue not
// read, an index header checked against the entries it could follow, ref
// counts compared with the references of the queues that could be read,
// the clean index checked against an unread .rdq (scan and verify), a
// dir without a readable .queue_name called an orphan. Quorum and stream
// dirs are audited by their own tests.
func TestNothingDrawnFromAFileNotRead(t *testing.T) {
	for _, c := range []struct {
		dir, tarball, sub string
		skip              func(rel string) bool // files not read at all (metadata)
	}{
		{"rocketmq", "rmq497-c-stale.tar.gz", "store", nil},
		{"rocketmq", "rmq533-b-abnormal.tar.gz", "store", nil},
		{"rocketmq", "rmq533-d-torn-crc.tar.gz", "store", nil},
		{"rocketmq-5x", "rmq533-t2-kill.tar.gz", "store", nil},
		{"rocketmq-5x", "rmq533-t3-cltrunc.tar.gz", "store", nil},
		{"rocketmq-5x", "rmq533-dl2-kill.tar.gz", "store", nil},
		{"rabbitmq", "datasets/clean-shutdown.tar.gz", "rmqfix@localhost", func(rel string) bool {
			return !strings.HasPrefix(rel, "msg_stores/")
		}},
		{"rabbitmq", "datasets/crash.tar.gz", "rmqfix@localhost", func(rel string) bool {
			return !strings.HasPrefix(rel, "msg_stores/")
		}},
	} {
		t.Run(c.dir+"/"+c.tarball, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(testutil.Untar(t, testutil.Testdata(c.dir, filepath.FromSlash(c.tarball))), c.sub)
			// scan's findings, then verify's, and whether a run exited 3
			// (incomplete) without naming rel: a file it did not read and
			// kept quiet about.
			verify := func(rel string) (objs []map[string]any, silent []string) {
				for _, cmd := range []string{"scan", "verify"} {
					code, out, errOut := runCLI(t, cmd, root, "-o", "jsonl")
					named := strings.Contains(errOut, rel)
					for _, o := range jsonlObjects(t, out) {
						o["command"] = cmd
						objs = append(objs, o)
						d, _ := o["details"].(map[string]any)
						w, _ := d["waits_on"].([]any)
						named = named || o["path"] == rel || slices.Contains(w, any(rel))
					}
					if rel != "" && code == exitIncomplete && !named {
						silent = append(silent, cmd)
					}
				}
				return objs, silent
			}
			key := func(o map[string]any) string {
				return fmt.Sprint(o["command"], " ", o["severity"], " ", o["code"], " @ ", o["path"])
			}
			before := map[string]bool{}
			objs, _ := verify("")
			for _, o := range objs {
				if o["type"] == "finding" {
					before[key(o)] = true
				}
			}
			var files []string
			_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
				if err == nil && info.Mode().IsRegular() {
					rel, _ := filepath.Rel(root, p)
					if c.skip == nil || !c.skip(filepath.ToSlash(rel)) {
						files = append(files, p)
					}
				}
				return err
			})
			sort.Strings(files)
			if len(files) < 10 {
				t.Fatalf("fixture: %d files", len(files))
			}
			aside := filepath.Join(t.TempDir(), "aside")
			for _, p := range files {
				rel, _ := filepath.Rel(root, p)
				rel = filepath.ToSlash(rel)
				if err := os.Rename(p, aside); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				objs, silent := verify(rel)
				if len(silent) > 0 {
					t.Errorf("%s a directory: %v exit 3 without naming it", rel, silent)
				}
				for _, o := range objs {
					sev, _ := o["severity"].(string)
					code, _ := o["code"].(string)
					d, _ := o["details"].(map[string]any)
					if o["type"] != "finding" || (sev != "warning" && sev != "error") || before[key(o)] ||
						strings.HasSuffix(code, "unknown") || strings.HasSuffix(code, ".unreadable") || d["waits_on"] != nil {
						continue
					}
					t.Errorf("%s a directory: %s %s: %v", rel, sev, key(o), o["message"])
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(aside, p); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
