package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// rdqVerdict is the .rdq findings of a JSONL report with absolute paths
// (the data dir differs by path given), sorted, the exit code and the
// summary's assumptions.
func rdqVerdict(t *testing.T, out string) (findings []string, code int, assumed []string) {
	t.Helper()
	objs := jsonlObjects(t, out)
	root := objs[0]["data_dir"].(string)
	for _, o := range objs {
		switch o["type"] {
		case "finding":
			p := o["path"].(string)
			if strings.HasSuffix(p, ".rdq") {
				findings = append(findings, fmt.Sprintf("%s@%v %s %s %v", filepath.Join(root, p), o["offset"], o["code"], o["severity"], o["msg_id"]))
			}
		case "summary":
			code = int(o["exit_code"].(float64))
			for _, a := range o["assumptions"].([]any) {
				assumed = append(assumed, a.(string))
			}
		}
	}
	sort.Strings(findings)
	return findings, code, assumed
}

// TestOneVerdictPerPath: verify of a node dir, its vhost dir and the
// vhost's msg_store_persistent/ give the same .rdq findings, severities
// and exit code (the 4.0.5 crash node: 11 gen1-stop hazards, info since its
// terms are #mc{}; the 3.10.8 crash node: basic_message terms). The store
// dir is read with its vhost, and the run record says so. Copied out of
// its vhost, the store dir gets the same hazard severities by the same
// generation rule, and the run says that queue references are unknown.
func TestOneVerdictPerPath(t *testing.T) {
	for _, fx := range []struct{ tgz, node string }{
		{testutil.Testdata("rabbitmq-4.0", "datasets", "crash.tar.gz"), "rmq40@localhost"},
		{testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"), "rmqfix@localhost"},
	} {
		node := filepath.Join(testutil.Untar(t, fx.tgz), fx.node)
		vhosts, _ := filepath.Glob(filepath.Join(node, "msg_stores", "vhosts", "*"))
		if len(vhosts) != 1 {
			t.Fatalf("%s: %d vhosts", node, len(vhosts))
		}
		store := filepath.Join(vhosts[0], "msg_store_persistent")
		var first []string
		var firstCode int
		var firstAssumed []string
		for i, p := range []string{node, vhosts[0], store} {
			code, out, errOut := runCLI(t, "verify", p, "-o", "jsonl")
			fs, sumCode, assumed := rdqVerdict(t, out)
			if sumCode != code {
				t.Fatalf("%s: summary exit %d, process %d", p, sumCode, code)
			}
			if i == 0 {
				first, firstCode, firstAssumed = fs, code, assumed
				if len(fs) == 0 || len(assumed) == 0 {
					t.Fatalf("%s: no .rdq findings (%d) or assumptions (%v)\n%s", p, len(fs), assumed, errOut)
				}
				continue
			}
			if code != firstCode || strings.Join(fs, "\n") != strings.Join(first, "\n") || strings.Join(assumed, "\n") != strings.Join(firstAssumed, "\n") {
				t.Fatalf("verify %s: exit %d, %d .rdq findings, assumed %q; the node dir: exit %d, %d findings, assumed %q\n%s\nvs\n%s",
					p, code, len(fs), assumed, firstCode, len(first), firstAssumed, strings.Join(fs, "\n"), strings.Join(first, "\n"))
			}
			if p == store {
				run := jsonlObjects(t, out)[0]
				ra, _ := run["assumptions"].([]any)
				if len(ra) == 0 || !strings.Contains(fmt.Sprint(ra), "read with the vhost") {
					t.Fatalf("store dir run record does not say it was read with its vhost: %v", run["assumptions"])
				}
			}
			_, text, _ := runCLI(t, "verify", p)
			if !strings.Contains(text, "\nassumed: broker version unknown") {
				t.Fatalf("verify %s text header does not say what was assumed:\n%s", p, text)
			}
		}
		// The store dir alone, without its vhost: hazards keep their
		// severities (the same generation rule over the same files).
		alone := filepath.Join(t.TempDir(), "msg_store_persistent")
		if err := os.CopyFS(alone, os.DirFS(store)); err != nil {
			t.Fatal(err)
		}
		_, out, _ := runCLI(t, "verify", alone, "-o", "jsonl")
		fs, _, assumed := rdqVerdict(t, out)
		hazards := func(fs []string, dir string) []string {
			var h []string
			for _, f := range fs {
				if !strings.Contains(f, "unreferenced") {
					h = append(h, filepath.Base(strings.TrimPrefix(f, dir)))
				}
			}
			return h
		}
		if a, b := hazards(fs, alone), hazards(first, store); strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Fatalf("store dir alone: hazards\n%s\nwith its vhost:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
		if !strings.Contains(strings.Join(assumed, " "), "queue references unknown") {
			t.Fatalf("store dir alone: assumptions %q do not say references are unknown", assumed)
		}
	}
}
