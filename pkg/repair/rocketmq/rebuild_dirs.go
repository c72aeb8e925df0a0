package rocketmq

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/storectl/storectl/pkg/repair"
)

// PrepareDirs creates the missing parent directories (mode 0755) of the
// replace-file actions of p, inside p.DataDir, and returns the ones it
// created (relative, parents first). repair.Apply writes a new file through
// a staging file beside it and so needs its directory; a rebuild after
// consumequeue/ or index/ was deleted creates whole queue directories.
// Call it just before repair.Apply. It creates directories only, never a
// file; an empty directory left behind by a later Undo is harmless to the
// broker (a queue dir without files is an empty queue).
func PrepareDirs(p *repair.Plan) ([]string, error) {
	var made []string
	for _, a := range p.Actions {
		if a.Op != repair.OpReplaceFile || !filepath.IsLocal(a.Path) {
			continue
		}
		var chain []string
		for dir := filepath.Dir(a.Path); dir != "." && dir != string(filepath.Separator); dir = filepath.Dir(dir) {
			chain = append([]string{dir}, chain...)
		}
		for _, rel := range chain {
			abs := filepath.Join(p.DataDir, rel)
			fi, err := os.Lstat(abs)
			if err == nil {
				if !fi.IsDir() {
					return made, &fs.PathError{Op: "mkdir", Path: abs, Err: errors.New("exists and is not a directory")}
				}
				continue
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return made, err
			}
			if err := os.Mkdir(abs, 0o755); err != nil {
				return made, err
			}
			made = append(made, rel)
		}
	}
	return made, nil
}

// rbAdd adds a to the plan. repair.Plan.Add snapshots the target, which
// needs its parent directory; a replace-file into a directory that does
// not exist yet (a queue of a deleted consumequeue/) is pinned by hand the
// way Add would pin it: the file is absent, the staged source is hashed.
// Such plans need PrepareDirs before repair.Apply; rep.MissingDirs lists
// the directories.
func rbAdd(p *repair.Plan, a repair.Action, rep *RebuildReport) error {
	dir := filepath.Join(p.DataDir, filepath.Dir(a.Path))
	if _, err := os.Stat(dir); err == nil || a.Op != repair.OpReplaceFile || a.Source == "" {
		return p.Add(a, repair.SnapshotOptions{})
	}
	f, err := os.Open(a.Source)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if a.ID == "" {
		a.ID = fmt.Sprintf("a%03d", len(p.Actions)+1)
	}
	a.SourceSHA256, a.NewSize, a.Pre = hex.EncodeToString(h.Sum(nil)), n, repair.FileState{}
	p.Actions = append(p.Actions, a)
	if err := p.Validate(); err != nil {
		p.Actions = p.Actions[:len(p.Actions)-1]
		return err
	}
	if d := filepath.Dir(a.Path); !slices.Contains(rep.MissingDirs, d) {
		rep.MissingDirs = append(rep.MissingDirs, d)
	}
	return nil
}
