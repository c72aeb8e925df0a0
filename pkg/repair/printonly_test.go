package repair

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPrintOnlyPlan: a print-only plan records a staged source's size but
// not its hash, and can be neither written, saved nor applied; the same
// action in an ordinary plan is pinned by the source's SHA-256.
func TestPrintOnlyPlan(t *testing.T) {
	data := t.TempDir()
	stage := t.TempDir()
	src := filepath.Join(stage, "new-file")
	content := bytes.Repeat([]byte("rebuilt "), 1000)
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(content)
	add := func(p *Plan) Action {
		t.Helper()
		if err := p.Add(Action{Op: OpReplaceFile, Path: "sub/new-file", Source: src, Reason: "test"}, SnapshotOptions{}); err != nil {
			t.Fatal(err)
		}
		return p.Actions[len(p.Actions)-1]
	}

	pinned, err := NewPlan(data, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a := add(pinned)
	if a.SourceSHA256 != hex.EncodeToString(want[:]) || a.NewSize != int64(len(content)) {
		t.Fatalf("pinned action: sha %q size %d, want %x and %d", a.SourceSHA256, a.NewSize, want, len(content))
	}

	p, _ := NewPlan(data, "", time.Now())
	p.PrintOnly()
	b := add(p)
	if b.SourceSHA256 != "" || b.NewSize != a.NewSize || b.Pre.Exists != a.Pre.Exists || len(b.Pre.AbsentDirs) != len(a.Pre.AbsentDirs) {
		t.Fatalf("print-only action %+v differs from the pinned %+v in more than the hash", b, a)
	}
	if err := p.Write(new(bytes.Buffer)); !errors.Is(err, ErrPrintOnly) {
		t.Errorf("Write: %v, want ErrPrintOnly", err)
	}
	out := filepath.Join(t.TempDir(), "plan.json")
	if err := p.Save(out); !errors.Is(err, ErrPrintOnly) {
		t.Errorf("Save: %v, want ErrPrintOnly", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("Save of a print-only plan left %s (%v)", out, err)
	}
	if _, err := Apply(context.Background(), p, ApplyOptions{BackupDir: filepath.Join(t.TempDir(), "b")}); !errors.Is(err, ErrPrintOnly) {
		t.Errorf("Apply: %v, want ErrPrintOnly", err)
	}
	if _, err := os.Stat(filepath.Join(data, "sub")); !os.IsNotExist(err) {
		t.Errorf("Apply of a print-only plan created %s (%v)", filepath.Join(data, "sub"), err)
	}
	// A copy that loses the mark (as a JSON round trip would) fails validation.
	if err := (&Plan{Schema: p.Schema, DataDir: p.DataDir, Actions: p.Actions}).Validate(); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("Validate of the unpinned actions: %v, want ErrInvalidPlan", err)
	}
	// The source must still be a regular file.
	if err := p.Add(Action{Op: OpReplaceFile, Path: "other", Source: stage, Reason: "test"}, SnapshotOptions{}); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("print-only Add of a dir source: %v, want ErrInvalidPlan", err)
	}
}
