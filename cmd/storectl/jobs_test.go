package main

import (
	"fmt"
	"strings"
	"testing"

	genrabbit "github.com/storectl/storectl/internal/gen/rabbitmq"
	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
)

// TestJobsSameOutput: the JSONL of scan, scan --records and verify is
// the same whatever --jobs is, byte for byte but for durations:
// files are scanned in parallel and reported in file order. On a
// generated RocketMQ store of 9 commitlog files and a generated RabbitMQ
// store of 8 .rdq files with holes, unreferenced records and a clean-
// shutdown index.
func TestJobsSameOutput(t *testing.T) {
	rocket := t.TempDir()
	if _, err := genrmq.Generate(rocket, genrmq.Config{MappedFileSize: 1 << 20, TotalBytes: 17 << 19, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	sum, err := genrabbit.Generate(t.TempDir(), genrabbit.Config{Seed: 3, Kind: genrabbit.MC, TotalBytes: 8 << 20,
		FileLimit: 1 << 20, HoleEvery: 9, UnrefEvery: 7, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{rocket, sum.VHostDir} {
		for _, cmd := range [][]string{{"scan"}, {"scan", "--records"}, {"verify"}} {
			var outs []string
			for _, jobs := range []int{1, 2, 5} {
				args := append(append([]string{}, cmd...), "-o", "jsonl", "--progress", "none", "--jobs", fmt.Sprint(jobs), dir)
				code, out, errOut := runCLI(t, args...)
				if code >= 2 {
					t.Fatalf("%v: exit %d: %s", args, code, errOut)
				}
				outs = append(outs, volatileJSON.ReplaceAllString(out, ""))
			}
			lines := strings.Count(outs[0], "\n")
			if outs[1] != outs[0] || outs[2] != outs[0] || lines < 10 {
				t.Errorf("%s %v: output differs with --jobs (or too short: %d lines)", dir, cmd, lines)
				continue
			}
			t.Logf("%v on %s: %d lines, the same with --jobs 1, 2 and 5", cmd, dir, lines)
		}
	}
}
