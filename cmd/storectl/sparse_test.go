package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

// TestSparseCommitLogTiB: a 1 TiB commitlog file made by `truncate -s 1T`
// (one hole) beside rmq533-c-stale's 256 KiB files is a short-file finding
// that its size decides, and scan and verify read a window of it, not its
// holes (issue 21, defect 9: verify read the 1 TiB hole by hole, 502 s and
// 542 MB of RSS, to say what the size already said).
//
// The bound is a read counter, not a clock: the command runs in this
// process, and a watchdog cancels it once the process has read more than
// 64 MiB (the whole fixture is 1 MiB), which fails the test (the old
// code got there after ~10 s per command, most of it spent mapping the
// page-cache residency of 1 TiB: 2 bytes a page).
func TestSparseCommitLogTiB(t *testing.T) {
	dir := t.TempDir()
	if err := testutil.UntarTo(testutil.Testdata("rocketmq/rmq533-c-stale.tar.gz"), dir); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	const rel = "commitlog/00000000000001048576"
	if err := os.WriteFile(filepath.Join(store, rel), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(store, rel), 1<<40); err != nil {
		t.Skipf("no 1 TiB sparse file here: %v", err)
	}
	const limit = 64 << 20
	for _, cmd := range []string{"scan", "verify"} {
		t.Run(cmd, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := testutil.ReadBytes(t)
			overread := make(chan int64, 1)
			done := make(chan struct{})
			go func() { // the watchdog
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						if n := testutil.ReadBytes(t) - before; n > limit {
							overread <- n
							cancel()
							return
						}
					}
				}
			}()
			var out, errOut bytes.Buffer
			code := run(ctx, []string{cmd, "-o", "jsonl", store}, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
				Getenv: func(string) string { return "" }})
			close(done)
			read := testutil.ReadBytes(t) - before
			select {
			case n := <-overread:
				t.Fatalf("%s read more than %d bytes (%d) for a 1 MiB store beside a 1 TiB hole: it reads the holes", cmd, limit, n)
			default:
			}
			summaryOf(t, code, out.String())
			if code != exitFindings {
				t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
			}
			var file, short map[string]any
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var r map[string]any
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatal(err)
				}
				if r["path"] != rel {
					continue
				}
				switch {
				case r["type"] == "file":
					file = r
				case r["type"] == "finding" && r["code"] == "rocketmq.commitlog.short-file":
					short = r
				}
			}
			if file == nil || short == nil {
				t.Fatalf("no file record or no short-file finding for %s\n%s", rel, out.String())
			}
			if short["expected"] != "262144" || short["actual"] != "1099511627776" {
				t.Fatalf("short-file finding: expected %v actual %v, want the mapped size 262144 and 1 TiB", short["expected"], short["actual"])
			}
			scanned, _ := file["bytes_scanned"].(float64)
			if scanned > 1<<20 {
				t.Fatalf("bytes_scanned %v of the 1 TiB file, want at most one read window", scanned)
			}
			t.Logf("%s: exit %d, %d bytes read by the process, %v bytes scanned of the 1 TiB file", cmd, code, read, scanned)
		})
	}
}
