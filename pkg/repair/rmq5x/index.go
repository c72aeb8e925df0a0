package rmq5x

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
	dlscan "github.com/storectl/storectl/pkg/scan/dledger"
)

// Stage is a dir of staged files a plan's replace-file actions read.
type Stage struct{ Dir string }

// RemoveStage removes the staged files.
func (s *Stage) RemoveStage() error {
	if s == nil || s.Dir == "" {
		return nil
	}
	return os.RemoveAll(s.Dir)
}

// DLedgerIndex is what PlanDLedgerIndex planned.
type DLedgerIndex struct {
	Units    int64    `json:"units"`    // index units rebuilt (entries kept by recovery)
	Files    []string `json:"files"`    // index files rebuilt
	Replaced []string `json:"replaced"` // of those, the ones that differ on disk
	Removed  []string `json:"removed,omitempty"`
	Stage    *Stage   `json:"-"`
}

// PlanDLedgerIndex rebuilds the DLedger index files from the data
// entries its recovery keeps, as DLedger writes them (one 32-byte unit
// per entry at index * 32: magic, pos, size, index, term; files of
// indexFileSize bytes named by their first offset, zeros after the last
// unit), into stageDir (created; must not exist), and adds a replace-file
// for every index file that differs and a remove-file for index files past
// the end. A store whose index already matches gives no action.
func PlanDLedgerIndex(ctx context.Context, plan *repair.Plan, cfg dlscan.Config, stageDir string) (*DLedgerIndex, error) {
	out := &DLedgerIndex{Stage: &Stage{}}
	dir := cfg.Dir
	if dir == "" {
		dirs := dlscan.Dirs(cfg.Root)
		if len(dirs) != 1 {
			return out, nil
		}
		dir = dirs[0]
	}
	rel := scan.Rel(cfg.Root, dir) + "/" + fdl.IndexDir
	size := cfg.IndexFileSize
	if size <= 0 {
		size = fdl.DefaultIndexFileSize
		if ex, err := listRel(cfg.Root, rel); err == nil && len(ex) > 0 {
			size = ex[0].size
		}
	}
	if err := os.Mkdir(stageDir, 0o700); err != nil {
		return nil, err
	}
	out.Stage.Dir = stageDir
	files := map[int64]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var werr error
	buf := make([]byte, 0, 64<<10)
	bufAt, bufFile := int64(-1), (*os.File)(nil)
	flush := func() {
		if len(buf) > 0 && werr == nil {
			_, werr = bufFile.WriteAt(buf, bufAt)
		}
		buf = buf[:0]
	}
	cfg.Dir = dir
	cfg.OnKept = func(e [4]int64) {
		at := e[0] * fdl.IndexUnitSize
		base := at / size * size
		f, ok := files[base]
		if !ok {
			flush()
			if f, werr = os.OpenFile(filepath.Join(stageDir, rmq.FormatFileName(base)), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600); werr != nil {
				return
			}
			if werr = f.Truncate(size); werr != nil {
				return
			}
			files[base] = f
		}
		if f != bufFile || at-base != bufAt+int64(len(buf)) || len(buf)+fdl.IndexUnitSize > cap(buf) {
			flush()
			bufAt, bufFile = at-base, f
		}
		buf = fdl.AppendIndexUnit(buf, fdl.IndexUnit{Magic: fdl.Magic1, Index: e[0], Term: e[1], Pos: e[2], Size: int32(e[3])})
		out.Units++
	}
	res, err := dlscan.Scan(ctx, cfg, scan.Options{})
	flush()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	if res.Incomplete {
		// The kept entries stop at what could not be read: an index built
		// from them would end short of the log.
		return nil, fmt.Errorf("DLedger scan incomplete, refusing to plan from it: %v", res.Errors)
	}
	rc, _ := res.Extra["dledger"].(*dlscan.Recovery)
	if rc == nil || out.Units == 0 {
		return out, nil
	}
	existing, err := listRel(cfg.Root, rel)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	have := map[int64]relFile{}
	for _, f := range existing {
		have[f.base] = f
	}
	for base, f := range files {
		name := rmq.FormatFileName(base)
		out.Files = append(out.Files, rel+"/"+name)
		if err := f.Sync(); err != nil {
			return nil, err
		}
		if ex, ok := have[base]; ok {
			same, err := sameFile(filepath.Join(cfg.Root, filepath.FromSlash(ex.rel)), f.Name())
			if err != nil {
				return nil, err
			}
			delete(have, base)
			if same {
				continue
			}
		}
		out.Replaced = append(out.Replaced, rel+"/"+name)
		if err := plan.Add(repair.Action{Op: repair.OpReplaceFile, Path: rel + "/" + name, Source: f.Name(), Reason: dlscan.CodeIndexMismatch,
			Lost: repair.Loss{Note: fmt.Sprintf("DLedger index file rebuilt from the %d entries recovery keeps", out.Units)}}, repair.SnapshotOptions{}); err != nil {
			return nil, err
		}
	}
	for _, ex := range have {
		if ex.base > rc.IndexWritePos {
			out.Removed = append(out.Removed, ex.rel)
			if err := plan.Add(repair.Action{Op: repair.OpRemoveFile, Path: ex.rel, Reason: dlscan.CodeIndexStale,
				Lost: repair.Loss{Note: "DLedger index file past the end index"}}, repair.SnapshotOptions{}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// sameFile compares two files by content (both sparse-friendly reads of
// equal size first).
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil || sa.Size() != sb.Size() {
		return false, err
	}
	ha, err := hashFile(a)
	if err != nil {
		return false, err
	}
	hb, err := hashFile(b)
	return err == nil && bytes.Equal(ha, hb), err
}

func hashFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
