package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

// TestIOLimit: --io-limit paces the reads of scan and verify (RocketMQ
// commitlog windows, whole RabbitMQ .rdq files): 1 MiB of commitlog at
// 4 MB/s takes at least 0.25 s (a lower bound: a slow machine cannot make
// it fail), the report is the same as without a limit, and a limit that
// is not a rate is a usage error (exit 2).
func TestIOLimit(t *testing.T) {
	rocket := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	rabbit := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz")), "rmqfix@localhost")
	for _, c := range []struct {
		cmd, store string
		limit      string
		atLeast    time.Duration
	}{
		{"scan", rocket, "4", 250 * time.Millisecond},
		{"verify", rocket, "4", 250 * time.Millisecond},
		{"scan", rabbit, "8", 200 * time.Millisecond}, // 1.99 MB of .rdq
	} {
		codeFree, outFree, _ := runCLI(t, c.cmd, "-o", "jsonl", "--progress", "none", c.store)
		start := time.Now()
		code, out, errOut := runCLI(t, c.cmd, "-o", "jsonl", "--progress", "none", "--io-limit", c.limit, c.store)
		took := time.Since(start)
		if code != codeFree || volatileJSON.ReplaceAllString(out, "") != volatileJSON.ReplaceAllString(outFree, "") {
			t.Errorf("%s --io-limit %s: exit %d (unlimited %d), report differs:\n%s\nstderr %s", c.cmd, c.limit, code, codeFree, out, errOut)
		}
		if took < c.atLeast {
			t.Errorf("%s --io-limit %s MB/s took %v, want at least %v", c.cmd, c.limit, took, c.atLeast)
		}
	}
	for _, bad := range []string{"-1", "fast", "NaN"} {
		if code, _, errOut := runCLI(t, "scan", "--io-limit", bad, rocket); code != exitUsage {
			t.Errorf("--io-limit %s: exit %d, want %d (%s)", bad, code, exitUsage, errOut)
		}
	}
}
