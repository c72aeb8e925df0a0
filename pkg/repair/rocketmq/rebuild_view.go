package rocketmq

import (
	"context"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/pkg/scan"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// rbVerifyView runs scanrmq.Verify on a view of the store as it will be
// after the plan: a dir beside the stage whose consumequeue/ and index/
// are the staged ones (symlinks), whose checkpoint carries the planned
// timestamps, and whose commitlog is the store's. Findings about consume
// queues and index files at warning or above become problems.
func rbVerifyView(ctx context.Context, cfg RebuildConfig, rep *RebuildReport, c *StagedCheck) error {
	view := rep.StageDir + ".view"
	if err := os.Mkdir(view, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(view)
	link := func(name, staged string) error {
		src := filepath.Join(rep.StageDir, staged)
		if _, err := os.Stat(src); err != nil {
			src = filepath.Join(cfg.DataDir, name) // part not rebuilt: the store's own
		}
		if _, err := os.Stat(src); err != nil {
			return nil
		}
		return os.Symlink(src, filepath.Join(view, name))
	}
	for _, n := range []string{"consumequeue", "index", "config"} {
		if err := link(n, n); err != nil {
			return err
		}
	}
	for _, n := range []string{"checkpoint", "abort"} {
		b, ok, err := rbReadOpt(filepath.Join(cfg.DataDir, n))
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if cd := rep.Checkpoint; n == "checkpoint" && cd != nil {
			if off, data := cd.planned(); int(off)+len(data) <= len(b) {
				copy(b[off:], data)
			}
		}
		if err := os.WriteFile(filepath.Join(view, n), b, 0o600); err != nil {
			return err
		}
	}
	cl := cfg.CommitLogDir
	if cl == "" {
		cl = filepath.Join(cfg.DataDir, "commitlog")
	}
	res, err := scanrmq.Verify(ctx, scanrmq.VerifyConfig{
		Config:     scanrmq.Config{Root: view, CommitLogDir: cl, MappedFileSize: cfg.MappedFileSize, MaxMessageSize: cfg.MaxMessageSize},
		CQFileSize: rep.CQFileSize, IndexSlots: int(rep.IndexLayout.Slots), IndexEntries: int(rep.IndexLayout.Entries),
	}, scan.Options{})
	if err != nil {
		return err
	}
	c.VerifyFindings = len(res.Findings)
	for _, f := range res.Findings {
		if f.Severity >= scan.Warning && scanrmq.IsDerivedFileCode(f.Code) {
			c.fail("verify: %s %s@%d: %s", f.Code, f.Path, f.Offset, f.Message)
		}
	}
	return nil
}
