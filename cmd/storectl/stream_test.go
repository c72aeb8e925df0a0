package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/report/schema"
)

// TestStreamCLI: verify and scan of a real 4.0.5 node with streams (S1),
// through every target a stream can be given as: the stream lines are
// schema-valid queue lines, stream/ is checked by verify, scan and salvage
// (which exports all 1760 messages), --records gives one
// record per message, and a damaged chunk makes verify exit 1 with the
// CRC finding.
func TestStreamCLI(t *testing.T) {
	node := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "S1.tar.gz")), "rmq40@localhost")
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	lines := func(out string) []map[string]any {
		var objs []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if err := v.ValidateObject([]byte(l)); err != nil {
				t.Fatalf("%v\n%s", err, l)
			}
			m := map[string]any{}
			json.Unmarshal([]byte(l), &m)
			objs = append(objs, m)
		}
		return objs
	}
	count := func(objs []map[string]any, typ string) int {
		n := 0
		for _, o := range objs {
			if o["type"] == typ {
				n++
			}
		}
		return n
	}
	code, out, errOut := runCLI(t, "verify", "-o", "jsonl", node)
	if code != exitOK {
		t.Fatalf("verify S1: exit %d\n%s%s", code, out, errOut)
	}
	objs := lines(out)
	streams := 0
	for _, o := range objs {
		if o["type"] == "queue" && o["queue_type"] == "stream" {
			streams++
		}
	}
	if streams != 3 {
		t.Fatalf("verify S1: %d stream queue lines", streams)
	}
	// stream/ is checked by verify, scan and salvage (the run record's
	// components), and salvage exports every message of the streams
	streamChecked := func(cmd string, run map[string]any) {
		t.Helper()
		n := 0
		for _, c := range run["components"].([]any) {
			if m := c.(map[string]any); m["name"] == "rabbitmq.stream" {
				n++
				if m["checked"] != true || m["path"] != "stream" {
					t.Fatalf("%s: stream/ not checked: %v", cmd, m)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d rabbitmq.stream components", cmd, n)
		}
	}
	streamChecked("verify", objs[0])
	code, out, _ = runCLI(t, "scan", "-o", "jsonl", node)
	if code != exitOK {
		t.Fatalf("scan S1: exit %d", code)
	}
	streamChecked("scan", lines(out)[0])
	salv := filepath.Join(t.TempDir(), "salvage")
	code, out, _ = runCLI(t, "salvage", node, "--out", salv, "-o", "jsonl")
	if code != exitOK {
		t.Fatalf("salvage S1: exit %d\n%s", code, out)
	}
	sobjs := jsonlObjects(t, out)
	streamChecked("salvage", sobjs[0])
	// no --broker-version: the summary says the streams were converted as
	// 4.0.5 does, and that the node's feature flags say 4.x
	if a := fmt.Sprint(sobjs[len(sobjs)-1]["assumptions"]); !strings.Contains(a, "streams judged and converted as RabbitMQ 4.0.5 (no --broker-version); the node's feature flags say 4.x") {
		t.Fatalf("salvage S1: assumptions %s", a)
	}
	if mj, err := os.ReadFile(filepath.Join(salv, "messages.jsonl")); err != nil || strings.Count(string(mj), `"location":"stream"`) != 1760 {
		t.Fatalf("salvage S1: %d stream messages exported (%v), want 1760", strings.Count(string(mj), `"location":"stream"`), err)
	}
	s1c, _ := filepath.Glob(filepath.Join(node, "stream", "__s1c_*"))
	for _, target := range []string{filepath.Join(node, "stream"), s1c[0], filepath.Join(s1c[0], "00000000000000000000.segment")} {
		code, out, _ := runCLI(t, "scan", "--records", "-o", "jsonl", target)
		objs := lines(out)
		want := 1760
		switch target {
		case s1c[0]:
			want = 60
		case filepath.Join(s1c[0], "00000000000000000000.segment"):
			want = 59
		}
		if code != exitOK || count(objs, "record") != want {
			t.Fatalf("scan --records %s: exit %d, %d records, want %d", target, code, count(objs, "record"), want)
		}
	}
	// one flipped byte in s1c's first chunk
	p := filepath.Join(s1c[0], "00000000000000000000.segment")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[8+48+100] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "verify", "-o", "jsonl", node)
	objs = lines(out)
	if code != exitFindings {
		t.Fatalf("damaged: exit %d", code)
	}
	found := false
	for _, o := range objs {
		found = found || o["type"] == "finding" && o["code"] == "rabbitmq.stream.chunk-crc" && o["offset"] == float64(8)
	}
	if !found {
		t.Fatal("no chunk-crc finding at offset 8")
	}
}

// TestStreamRebuildIndexCLI: an .index removed from S1; rebuild-index's
// dry run changes nothing (exit 1), --apply rebuilds it byte for byte as
// the broker wrote it and re-verifies clean (exit 0), undo puts the
// damaged state back.
func TestStreamRebuildIndexCLI(t *testing.T) {
	node := filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", "S1.tar.gz")), "rmq40@localhost")
	dir, _ := filepath.Glob(filepath.Join(node, "stream", "__s1a_*"))
	p := filepath.Join(dir[0], "00000000000000000589.index")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	damaged := testutil.TreeHash(t, node)
	if code, out, _ := runCLI(t, "rebuild-index", "-o", "jsonl", node); code != exitFindings || !strings.Contains(out, `"op":"replace-file"`) {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	testutil.SameTree(t, damaged, testutil.TreeHash(t, node))
	bk := filepath.Join(t.TempDir(), "bk")
	if code, out, _ := runCLI(t, "rebuild-index", "--apply", "--yes", "--backup-dir", bk, "-o", "jsonl", node); code != exitOK {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(p); string(got) != string(orig) {
		t.Fatalf("rebuilt index differs from the broker's")
	}
	if code, out, _ := runCLI(t, "undo", "--apply", "--yes", "-o", "jsonl", bk); code != exitOK {
		t.Fatalf("undo: exit %d\n%s", code, out)
	}
	testutil.SameTree(t, damaged, testutil.TreeHash(t, node))
}
