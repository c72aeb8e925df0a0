package repair

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/storectl/storectl/internal/storefile"
)

// chunkSize bounds each counted write (and the copy buffer): 1 MiB keeps
// memory flat on 1 GiB commitlogs. A variable only so tests can use small
// files that still span several chunks.
var chunkSize = 1 << 20

// StagePrefix starts the name of the staging file written beside each
// target before it is renamed over it.
const StagePrefix = ".storectl-stage-"

func stagePath(target string) string {
	return filepath.Join(filepath.Dir(target), StagePrefix+filepath.Base(target))
}

// copyCounted copies src to dst at off in counted chunks and returns the
// bytes copied and their hex SHA-256.
func copyCounted(w *fsw, dst *os.File, off int64, src io.Reader) (int64, string, error) {
	return copyChunks(w, dst, off, src, w.writeAt)
}

// copyChunks is copyCounted with the write step given: writeAt, or
// overwriteAt for bytes that already exist.
func copyChunks(w *fsw, dst *os.File, off int64, src io.Reader, write func(*os.File, []byte, int64) error) (int64, string, error) {
	h := sha256.New()
	buf := make([]byte, chunkSize)
	var n int64
	for {
		k, rerr := io.ReadFull(src, buf)
		if k > 0 {
			h.Write(buf[:k])
			if err := write(dst, buf[:k], off+n); err != nil {
				return n, "", err
			}
			n += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return n, hex.EncodeToString(h.Sum(nil)), nil
		}
		if rerr != nil {
			return n, "", rerr
		}
	}
}

// writeZeros writes length zero bytes at off, in counted chunks; real
// zeros (not a sparse hole) so the blocks exist before a broker maps them.
func writeZeros(w *fsw, f *os.File, off, length int64) error {
	_, _, err := copyCounted(w, f, off, io.LimitReader(zeroReader{}, length))
	return err
}

// zeroReader is an endless stream of zero bytes.
type zeroReader struct{}

// Read fills p with zeros.
func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// openStage creates a fresh staging file beside target.
func openStage(target string) (*os.File, error) {
	stage := stagePath(target)
	if err := os.Remove(stage); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return os.OpenFile(stage, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
}

// announceFunc is told, just before a file changes, the state (and size)
// it is about to take: Apply journals it. It may fail the change.
type announceFunc func(after fileAfter, size int64) error

// applyFile performs the actions of one file. committed is true once the
// target has changed (the rename or the removal happened), even if a later
// step (the dir fsync) failed: the caller must then roll it back.
func applyFile(w *fsw, root, bdir string, rec *FileRecord, acts []*Action, announce announceFunc) (committed bool, err error) {
	target := filepath.Join(root, rec.Path)
	if acts[0].Op == OpRemoveFile {
		if err := announce(fileAfter{exists: false}, 0); err != nil {
			return false, err
		}
		return moveToBackup(w, target, filepath.Join(bdir, "files", acts[0].ID))
	}
	f, err := openStage(target)
	if err != nil {
		return false, err
	}
	defer func() {
		f.Close()
		if !committed {
			os.Remove(f.Name())
		}
	}()
	if acts[0].Op == OpReplaceFile {
		err = writeContent(w, f, 0, acts[0])
	} else {
		err = modifyCopy(w, f, target, rec, acts)
	}
	if err != nil {
		return false, err
	}
	return commitStage(w, f, target, rec, announce)
}

// modifyCopy copies target into the stage, checking it still has the hash
// the backup recorded, then applies each range or size action in plan order.
func modifyCopy(w *fsw, f *os.File, target string, rec *FileRecord, acts []*Action) error {
	src, err := storefile.OpenNoFollow(target)
	if err != nil {
		return err
	}
	_, sum, err := copyCounted(w, f, 0, src)
	src.Close()
	if err != nil {
		return err
	}
	if sum != rec.SHA256Before {
		return &StaleError{Path: rec.Path, What: "sha256", Expected: rec.SHA256Before, Actual: sum}
	}
	size := rec.Size
	for _, a := range acts {
		switch a.Op {
		case OpZeroRange:
			err = writeZeros(w, f, a.Offset, a.Length)
		case OpWriteRange:
			err = writeContent(w, f, a.Offset, a)
		case OpTruncateFile:
			err = w.truncate(f, a.NewSize)
		case OpResizeFile:
			if a.NewSize < size {
				err = w.truncate(f, a.NewSize)
			} else {
				err = writeZeros(w, f, size, a.NewSize-size)
			}
		default:
			err = fmt.Errorf("%w: op %s cannot share a file", ErrInvalidPlan, a.Op)
		}
		if err != nil {
			return err
		}
		if a.Op == OpTruncateFile || a.Op == OpResizeFile {
			size = a.NewSize
		}
	}
	return nil
}

// writeContent writes a's Data or staged Source at off, checking the
// source against SourceSHA256 and the planned length.
func writeContent(w *fsw, f *os.File, off int64, a *Action) error {
	var src io.Reader = bytes.NewReader(a.Data)
	want := a.SourceSHA256
	if a.Source != "" {
		s, err := storefile.Open(a.Source)
		if err != nil {
			return err
		}
		defer s.Close()
		src = s
	} else {
		want = sumBytes(a.Data)
	}
	n, sum, err := copyCounted(w, f, off, src)
	if err != nil {
		return err
	}
	if sum != want {
		return &StaleError{Path: a.Source, What: "staged source sha256", Expected: want, Actual: sum}
	}
	if wantN := a.Length; a.Op == OpReplaceFile && n != a.NewSize || a.Op == OpWriteRange && n != wantN {
		return fmt.Errorf("%w: action %s: content is %d bytes", ErrInvalidPlan, a.ID, n)
	}
	return nil
}

// commitStage gives the stage the target's owner and mode (a new file gets
// the parent dir's owner and 0644), fsyncs it, announces its hash (when
// announce is set), renames it over target and fsyncs the directory.
func commitStage(w *fsw, f *os.File, target string, rec *FileRecord, announce announceFunc) (committed bool, err error) {
	uid, gid, mode := rec.UID, rec.GID, os.FileMode(rec.Mode)
	if !rec.Existed {
		mode = 0o644
		if fi, err := os.Stat(filepath.Dir(target)); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
	}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != uid || int(st.Gid) != gid) {
			if err := w.step("chown " + f.Name()); err != nil {
				return false, err
			}
			if err := f.Chown(uid, gid); err != nil {
				return false, fmt.Errorf("keeping the owner of %s: %w", target, err)
			}
		}
	}
	if err := w.step("chmod " + f.Name()); err != nil {
		return false, err
	}
	if err := f.Chmod(mode); err != nil {
		return false, err
	}
	if err := w.sync(f); err != nil {
		return false, err
	}
	if announce != nil {
		h := sha256.New()
		n, err := hashSparse(h, f)
		if err != nil {
			return false, err
		}
		if err := announce(fileAfter{exists: true, sha: hex.EncodeToString(h.Sum(nil))}, n); err != nil {
			return false, err
		}
	}
	if err := w.rename(f.Name(), target); err != nil {
		return false, err
	}
	return true, w.syncDir(filepath.Dir(target))
}

// moveToBackup moves a removed file to dst in the backup: a rename on the
// same filesystem, else copy, fsync and unlink.
func moveToBackup(w *fsw, target, dst string) (committed bool, err error) {
	err = w.rename(target, dst)
	if errors.Is(err, syscall.EXDEV) {
		err = copyOut(w, target, dst)
		if err == nil {
			err = w.remove(target)
		}
	}
	if err != nil {
		return false, err
	}
	if err := w.syncDir(filepath.Dir(dst)); err != nil {
		return true, err
	}
	return true, w.syncDir(filepath.Dir(target))
}

func copyOut(w *fsw, from, to string) error {
	src, err := storefile.OpenNoFollow(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, _, err = copyCounted(w, dst, 0, src)
	if err == nil {
		err = w.sync(dst)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.syncDir(filepath.Dir(to))
	}
	return err
}

// inPlaceRestorable: the rollback may write rec's pre-images straight back
// into its file when staging a fresh copy failed (a full disk): the file
// exists with its pre-apply size and every pre-image is a byte range (no
// whole file, no size to undo), so the writes land on bytes that exist and,
// on a file system that overwrites in place, need no new space.
func inPlaceRestorable(root string, rec *FileRecord, imgs []PreImage) bool {
	if !rec.Existed || len(imgs) == 0 {
		return false
	}
	for _, img := range imgs {
		if img.Whole {
			return false
		}
	}
	fi, err := os.Lstat(filepath.Join(root, rec.Path))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == rec.Size
}

// restoreInPlace writes rec's pre-images into its file, fsyncs it, checks
// that it hashes to its pre-apply SHA-256 and puts its mtime back. It is
// not atomic: the journal marks the file first (JournalInPlace), and an
// undo after a crash here rebuilds it from the same pre-images.
func restoreInPlace(w *fsw, root, bdir string, rec *FileRecord, imgs []PreImage) error {
	target := filepath.Join(root, rec.Path)
	f, err := os.OpenFile(target, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, img := range imgs {
		src, err := storefile.OpenNoFollow(filepath.Join(bdir, img.File))
		if err != nil {
			return fmt.Errorf("pre-image of %s: %w", img.Action, err)
		}
		n, sum, err := copyChunks(w, f, img.Offset, io.LimitReader(src, img.Length), w.overwriteAt)
		src.Close()
		if err != nil {
			return err
		}
		if n != img.Length || sum != img.SHA256 {
			return fmt.Errorf("pre-image %s is damaged (%d bytes, sha256 %s; manifest says %d, %s)", img.File, n, sum, img.Length, img.SHA256)
		}
	}
	if err := w.sync(f); err != nil {
		return err
	}
	if sum, err := hashRange(f, Range{0, rec.Size}); err != nil || sum != rec.SHA256Before {
		if err == nil {
			err = fmt.Errorf("restored in place, %s hashes to %s, not its pre-apply %s", rec.Path, sum, rec.SHA256Before)
		}
		return err
	}
	if err := w.step("chtimes " + target); err != nil {
		return err
	}
	mt := time.Unix(0, rec.MtimeNs)
	return os.Chtimes(target, mt, mt)
}
