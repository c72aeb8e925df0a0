package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/scan"
)

// The guards every command runs before it reads or writes: outputs never
// resolve into the data dir, the tree's symlinks and special files are
// findings (and stop the writers), a saved plan only applies to the data
// dir it was made for.

// Settings that name a file or dir storectl writes (flag, STORECTL_* env
// or config file alike): each command passes those it has to
// checkOutputs.
var (
	writerOutputs  = []string{"plan-out", "backup-dir", "metrics-file"}
	verifyOutputs  = []string{"metrics-file"}
	salvageOutputs = []string{"out", "metrics-file"}
)

// checkOutputs refuses (usage error, exit 2, before any work) an output
// path, among the settings names, that is or resolves into the data dir
// of t: a plan, a metrics file, a backup or an export written there would
// overwrite store files with no backup, or be loaded by the broker as one.
func checkOutputs(env *Env, t scan.Target, names ...string) error {
	var outs [][2]string
	for _, name := range names {
		if p := env.Config.GetString(name); p != "" {
			outs = append(outs, [2]string{name, p})
		}
	}
	if len(outs) == 0 {
		return nil
	}
	roots := dataRoots(t)
	var first error
	for _, o := range outs {
		real, err := resolveExisting(o[1])
		if err != nil {
			err = fmt.Errorf("--%s %s: %w", o[0], o[1], err)
		}
		for _, r := range roots {
			if err == nil && within(r, real) {
				err = fmt.Errorf("--%s %s resolves to %s, inside the data dir %s: storectl never writes into the data dir; choose a path outside it", o[0], o[1], real, r)
			}
		}
		if err != nil && o[0] == "metrics-file" {
			env.metricsDone = true // and not written at exit either
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return usagef(first)
	}
	return nil
}

// useTempDir sets where the run's temp files go (scan.SetTempDir:
// --tmp-dir, else $TMPDIR) after checking that it is not inside the data
// dir of any target: spilled runs and record tables are written there.
func useTempDir(env *Env, targets ...scan.Target) error {
	dir := env.Config.GetString("tmp-dir")
	eff, name := dir, "--tmp-dir"
	if eff == "" {
		eff, name = os.TempDir(), "the temp dir ($TMPDIR)"
	}
	real, err := resolveExisting(eff)
	if err != nil {
		return usagef(fmt.Errorf("%s %s: %w", name, eff, err))
	}
	for _, t := range targets {
		for _, r := range dataRoots(t) {
			if within(r, real) {
				return usagef(fmt.Errorf("%s %s resolves to %s, inside the data dir %s: storectl never writes into the data dir; choose a temp dir outside it", name, eff, real, r))
			}
		}
	}
	scan.SetTempDir(dir)
	return nil
}

// dataRoots are the data dir of t with symlinks resolved, and, for a
// RabbitMQ vhost or message store dir, the node dir that holds it (the
// broker owns all of it).
func dataRoots(t scan.Target) []string {
	var out []string
	for _, p := range []string{t.Root, t.Path} {
		if p == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if st, err := os.Stat(real); err == nil && !st.IsDir() {
			real = filepath.Dir(real)
		}
		out = append(out, real)
		if t.Store == scan.RabbitMQ {
			for d := real; d != filepath.Dir(d); d = filepath.Dir(d) {
				if filepath.Base(d) == "msg_stores" {
					out = append(out, filepath.Dir(d))
					break
				}
			}
		}
	}
	return out
}

// resolveExisting makes p absolute and resolves the symlinks of its
// longest existing prefix (what p will be once the missing part is
// created).
func resolveExisting(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for cur := abs; ; cur = filepath.Dir(cur) {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(cur) == cur {
			return "", err
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// oddEntries lists the symlinks, FIFOs, sockets and devices of what t
// names (scan.CheckTree; a single file: that file).
func oddEntries(ctx context.Context, t scan.Target) ([]scan.Odd, error) {
	start := t.Path
	if start == "" {
		start = t.Root
	}
	if st, err := os.Lstat(start); err == nil && !st.IsDir() {
		if o, ok := scan.OddFile(t.Root, start); ok {
			return []scan.Odd{o}, nil
		}
		return nil, nil
	}
	return scan.CheckTree(ctx, start)
}

// oddFindings reports the odd entries of the targets as findings.
func (s *session) oddFindings(ctx context.Context, ts ...scan.Target) error {
	for _, t := range ts {
		if err := s.reportOdd(ctx, t, nil); err != nil {
			return err
		}
	}
	return nil
}

// unreadOddFindings reports the FIFOs, sockets and devices of t's tree
// (not its symlinks, which are read through, nor a writer's leftover
// stage files) as findings: salvage does not open them, so whatever the
// store kept under their names is not in the export, and the run is not
// clean.
func (s *session) unreadOddFindings(ctx context.Context, t scan.Target) error {
	return s.reportOdd(ctx, t, func(o scan.Odd) bool { return !o.Stage && o.Mode&fs.ModeSymlink == 0 })
}

// reportOdd reports the odd entries of t that keep accepts (all of them
// when keep is nil) as findings; a tree it could not check makes the run
// incomplete.
func (s *session) reportOdd(ctx context.Context, t scan.Target, keep func(scan.Odd) bool) error {
	odds, err := oddEntries(ctx, t)
	if err != nil {
		s.incomplete = true
		s.errors = append(s.errors, "checking the tree: "+err.Error())
	}
	for _, o := range odds {
		if keep != nil && !keep(o) {
			continue
		}
		if err := s.finding(o.Finding()); err != nil {
			return err
		}
	}
	return nil
}

// blockingOdd returns the odd entries of t's data dir that writers refuse
// (scan.Odd.BlocksWriters), reported as findings.
func (s *session) blockingOdd(ctx context.Context, t scan.Target) ([]string, error) {
	odds, err := scan.CheckTree(ctx, t.Root)
	if err != nil {
		return nil, err
	}
	var block []string
	for _, o := range odds {
		if err := s.finding(o.Finding()); err != nil {
			return nil, err
		}
		if o.BlocksWriters() {
			block = append(block, o.Path)
		}
	}
	return block, nil
}

// lockRoot is the dir whose writer lock guards t: the data dir, or for a
// RabbitMQ vhost the node dir that holds it (two writers on two spellings
// of one node must meet at one lock).
func lockRoot(t scan.Target) string {
	root := t.Root
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return root
	}
	if t.Store == scan.RabbitMQ {
		for d := real; d != filepath.Dir(d); d = filepath.Dir(d) {
			if filepath.Base(d) == "msg_stores" {
				return filepath.Dir(d)
			}
		}
	}
	return real
}

// firstN is at most the first n of ss, with "…" when there are more.
func firstN(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(append([]string(nil), ss[:n]...), fmt.Sprintf("and %d more", len(ss)-n))
}

// stageFindings lists the planner stage dirs a killed writer left beside
// the data dir of t (repair.StageDirs).
func (s *session) stageFindings(t scan.Target) error {
	dirs, err := repair.StageDirs(t.Root)
	if err != nil {
		return nil // the parent may be unreadable: nothing to say about it
	}
	for _, d := range dirs {
		f := scan.Finding{Code: scan.CodeStageLeftover, Severity: scan.Warning, Path: scan.Rel(t.Root, d), Repair: scan.RepairNone,
			Message: fmt.Sprintf("%s is a stage dir a storectl writer left beside the data dir (it was killed, or a saved plan still points into it); remove it once no saved plan needs it", d)}
		if err := s.finding(f); err != nil {
			return err
		}
	}
	return nil
}
