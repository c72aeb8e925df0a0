package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestSalvageVerdictNamesUnread: a salvage that could not read a store
// file says which in its verdict (the text report's first two lines) and
// lists it as the storectl.file.unreadable finding that scan and verify
// show for it, so the ticket names the file whichever command ran. A
// commitlog file nobody may read (run as nobody), which scan and verify
// already named; salvage's verdict said only "exported N message(s)",
// with the file in an error line far below and no finding.
func TestSalvageVerdictNamesUnread(t *testing.T) {
	const file = "commitlog/00000000000000262144"
	store := filepath.Join(readableTree(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	if err := os.Chmod(filepath.Join(store, filepath.FromSlash(file)), 0); err != nil {
		t.Fatal(err)
	}
	out := nobodyDir(t)
	group := regexp.MustCompile(`(?m)^  error +×1 storectl\.file\.unreadable ` + regexp.QuoteMeta(file) + ` `)
	for _, cmd := range []string{"scan", "verify", "salvage"} {
		args := []string{cmd, "-o", "text"}
		if cmd == "salvage" {
			args = append(args, "--out", filepath.Join(out, "out"))
		}
		code, text, errOut := runAsNobody(t, append(args, store)...)
		if code != exitIncomplete || !strings.HasPrefix(text, "incomplete: ") {
			t.Fatalf("%s: exit %d, want 3 and an incomplete verdict\n%s%s", cmd, code, text, errOut)
		}
		if !group.MatchString(text) {
			t.Errorf("%s: no finding line names %s\n%s", cmd, file, text)
		}
		if lines := strings.SplitN(text, "\n", 3); cmd == "salvage" && !strings.Contains(strings.Join(lines[:2], "\n"), file) {
			t.Errorf("salvage: the verdict does not name %s:\n%s", file, text)
		}
	}
}
