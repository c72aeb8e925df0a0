package quorum

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format/ra"
)

// SystemDir is one ra system's data dir: <node dir>/quorum/<node name>
// or <node dir>/coordination/<node name>.
type SystemDir struct {
	System string // SystemQuorum or SystemCoordination
	Path   string // absolute
	Node   string // the node name (the dir's base name)
}

// FindSystems returns the ra system dirs under path: a RabbitMQ node dir
// (quorum/<node>/ and coordination/<node>/), a quorum/ or coordination/
// dir, or a system dir itself (one holding .wal files, names.dets or
// replica dirs with a config file).
func FindSystems(path string) ([]SystemDir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", path)
	}
	var out []SystemDir
	addParent := func(parent, system string) error {
		ents, err := os.ReadDir(parent)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(parent, e.Name())
			// a FIFO, socket or device in quorum/ or coordination/ is in
			// the place of a node's system dir: that dir, unreadable
			// (scanSystem never opens it), not nothing
			odd := e.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0
			if odd || e.IsDir() && isSystemDir(p) {
				out = append(out, SystemDir{System: system, Path: p, Node: e.Name()})
			}
		}
		return nil
	}
	switch base := filepath.Base(abs); {
	case isSystemDir(abs):
		sys := SystemQuorum
		if filepath.Base(filepath.Dir(abs)) == SystemCoordination {
			sys = SystemCoordination
		}
		out = append(out, SystemDir{System: sys, Path: abs, Node: base})
	case base == SystemQuorum || base == SystemCoordination:
		if err := addParent(abs, base); err != nil {
			return nil, err
		}
	default:
		for _, sys := range []string{SystemQuorum, SystemCoordination} {
			p := filepath.Join(abs, sys)
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				if err := addParent(p, sys); err != nil {
					return nil, err
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].System != out[j].System {
			return out[i].System == SystemQuorum
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// isSystemDir: a dir with a .wal file, names.dets or meta.dets, or a
// subdir holding a config file.
func isSystemDir(p string) bool {
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".wal") || n == ra.NamesDETS || n == ra.MetaDETS {
			return true
		}
	}
	for _, e := range ents {
		if e.IsDir() {
			if st, err := os.Stat(filepath.Join(p, e.Name(), ra.ConfigFile)); err == nil && st.Mode().IsRegular() {
				return true
			}
		}
	}
	return false
}

// dirListing is a system dir's entries sorted into what ra keeps there.
type dirListing struct {
	wals     []string // .wal names, in ra's recovery order (name order)
	replicas []string // replica dir names
	names    string   // names.dets path ("" when absent)
	meta     string
	marker   bool
	other    []string
}

func listSystem(dir string) (dirListing, error) {
	var l dirListing
	ents, err := os.ReadDir(dir)
	if err != nil {
		return l, err
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			l.other = append(l.other, n)
		case strings.HasSuffix(n, ".wal"):
			// also a dir or FIFO under a WAL's name: its open fails and
			// it is unread (what it holds unknown), not a replica
			l.wals = append(l.wals, n)
		case n == ra.NamesDETS:
			// a dir under the name of names.dets or meta.dets is that
			// file, unreadable (readRegular refuses it), not a replica
			l.names = filepath.Join(dir, n)
		case n == ra.MetaDETS:
			l.meta = filepath.Join(dir, n)
		case e.IsDir():
			l.replicas = append(l.replicas, n)
		case n == ra.UpgradeMarkerFile:
			l.marker = true
		default:
			l.other = append(l.other, n)
		}
	}
	sort.Strings(l.wals)
	sort.Strings(l.replicas)
	return l, nil
}

// replicaListing is a replica dir's files.
type replicaListing struct {
	config      string
	segments    []string // names in ra's order (name order)
	snapshots   []string // snapshot dir names
	checkpoints []string
	other       []string
}

func listReplica(dir string) (replicaListing, error) {
	var l replicaListing
	ents, err := os.ReadDir(dir)
	if err != nil {
		return l, err
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			l.other = append(l.other, n)
		case n == ra.ConfigFile:
			l.config = filepath.Join(dir, n)
		case strings.HasSuffix(n, ".segment"):
			// a dir or FIFO under a segment's name too: unread, not ignored
			l.segments = append(l.segments, n)
		case (n == ra.SnapshotsDir || n == ra.CheckpointsDir) && e.IsDir():
			sub, err := os.ReadDir(filepath.Join(dir, n))
			if err != nil {
				return l, err
			}
			for _, s := range sub {
				if !s.IsDir() {
					l.other = append(l.other, filepath.Join(n, s.Name()))
					continue
				}
				if n == ra.SnapshotsDir {
					l.snapshots = append(l.snapshots, s.Name())
				} else {
					l.checkpoints = append(l.checkpoints, s.Name())
				}
			}
		default:
			l.other = append(l.other, n)
		}
	}
	sort.Strings(l.segments)
	// ra picks the newest first: reverse name order
	sort.Sort(sort.Reverse(sort.StringSlice(l.snapshots)))
	sort.Sort(sort.Reverse(sort.StringSlice(l.checkpoints)))
	return l, nil
}

// readRegular reads a small file (config, snapshot) refusing anything
// that is not a regular file (checkRegular), without blocking.
func readRegular(p string) ([]byte, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(p, st); err != nil {
		return nil, err
	}
	return storefile.ReadFile(p)
}
