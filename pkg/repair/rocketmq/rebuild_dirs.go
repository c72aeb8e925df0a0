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

	"golang.org/x/sys/unix"
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
	n, err := rbHashSparse(h, f)
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

// rbZeros feeds the holes of sparse staged files to the hash.
var rbZeros [1 << 16]byte

// rbHashSparse writes the bytes of f to h and returns how many. Holes
// (SEEK_HOLE/SEEK_DATA: a staged index file is mostly a sparse run of
// zeros) are fed from a zero buffer instead of being read, which spares
// the kernel zero-filling hundreds of MiB.
func rbHashSparse(h io.Writer, f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	buf := make([]byte, 1<<20)
	zeros := func(n int64) {
		for n > 0 {
			k := min(n, int64(len(rbZeros)))
			h.Write(rbZeros[:k])
			n -= k
		}
	}
	for pos := int64(0); pos < size; {
		data, err := unix.Seek(int(f.Fd()), pos, unix.SEEK_DATA)
		if err != nil { // ENXIO: only a hole up to EOF; EINVAL: no hole support
			if errors.Is(err, unix.ENXIO) {
				zeros(size - pos)
				return size, nil
			}
			if _, err := f.Seek(pos, io.SeekStart); err != nil {
				return 0, err
			}
			n, err := io.CopyBuffer(h, io.LimitReader(f, size-pos), buf)
			return pos + n, err
		}
		zeros(data - pos)
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return 0, err
		}
		hole = min(hole, size)
		for p := data; p < hole; {
			k := min(int64(len(buf)), hole-p)
			got, err := f.ReadAt(buf[:k], p)
			h.Write(buf[:got])
			p += int64(got)
			if int64(got) < k {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
		}
		pos = hole
	}
	return size, nil
}
