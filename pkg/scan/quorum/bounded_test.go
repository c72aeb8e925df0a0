package quorum

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
)

// replayOutput is what verify and salvage take from a replay: the queue
// lines, the findings and every replica's live messages.
func replayOutput(t *testing.T, res *Result) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, v := range []any{res.Queues, res.Findings, res.Errors} {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range res.Systems {
		for _, r := range s.Replicas {
			p := r.Prediction()
			if p == nil {
				continue
			}
			for lm := range p.Live() {
				if err := enc.Encode(lm); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.LiveErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

// TestBoundedReplay: with memory bounds forced tiny (one log-table page
// in memory, message queues and live lists in chunks of 2), the replay
// of every quorum fixture spills to the temp dir and gives the same
// queue lines, findings and live messages as with the default bounds
// (under which these small logs stay in memory); the temp file is made
// in --tmp-dir (unlinked: the dir stays empty) and gone after Close.
func TestBoundedReplay(t *testing.T) {
	var nodes []string
	for _, n := range []string{"Q1", "Q2", "Q3"} {
		d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-4.0-qq-stream", "datasets", n+".tar.gz"))
		nodes = append(nodes, filepath.Join(d, "rmq40@localhost"))
	}
	for _, n := range []string{"R1", "R2", "R3"} {
		d := testutil.SharedUntar(t, testutil.Testdata("rabbitmq-3.10-qq", "datasets", n+".tar.gz"))
		nodes = append(nodes, filepath.Join(d, "rmq310@localhost"))
	}
	tmp := t.TempDir()
	scan.SetTempDir(tmp)
	defer scan.SetTempDir("")
	for _, node := range nodes {
		want, err := Scan(context.Background(), Config{Root: node, Replay: true}, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		wantOut := replayOutput(t, want)
		if want.pool.spilled != 0 {
			t.Fatalf("%s: the default bounds spilled %d pages (the test wants an in-memory reference)", node, want.pool.spilled)
		}
		want.Close()
		got, err := Scan(context.Background(), Config{Root: node, Replay: true, LogPages: 1, QueueChunk: 2, LiveChunk: 2}, scan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got.pool.spilled == 0 || got.pool.loaded == 0 {
			t.Fatalf("%s: the forced bound did not spill: %v", node, got.pool)
		}
		live, liveChunks := 0, 0
		for _, s := range got.Systems {
			for _, r := range s.Replicas {
				if p := r.Prediction(); p != nil {
					live += p.LiveCount()
					liveChunks += len(p.live.chunks)
				}
			}
		}
		if live > 2 && liveChunks == 0 {
			t.Fatalf("%s: no live list was spilled (%d live messages)", node, live)
		}
		if testutil.OpenFDsUnder(t, tmp) == 0 {
			t.Fatalf("%s: the spill file is not in the temp dir %s", node, tmp)
		}
		if gotOut := replayOutput(t, got); gotOut != wantOut {
			t.Errorf("%s: the bounded replay differs:\n got %.600s\nwant %.600s", node, gotOut, wantOut)
		}
		got.Close()
		if n := testutil.OpenFDsUnder(t, tmp); n != 0 {
			t.Fatalf("%s: %d temp files still open after Close", node, n)
		}
		// a spilled live list read after Close ends with an error, not
		// a panic and not a quietly short list
		for _, s := range got.Systems {
			for _, r := range s.Replicas {
				if p := r.Prediction(); p != nil && len(p.live.chunks) > 0 {
					n := 0
					for range p.Live() {
						n++
					}
					if p.LiveErr() == nil || n != 0 {
						t.Errorf("%s: Live after Close yielded %d and LiveErr %v, want 0 and an error", node, n, p.LiveErr())
					}
				}
			}
		}
		if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
			t.Fatalf("%s: %d files left in the temp dir", node, len(ents))
		}
	}
}
