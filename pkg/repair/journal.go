package repair

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/storefile"
)

// JournalName is the progress journal's file name inside a backup dir.
//
// manifest.json describes an apply: every affected file before it, the
// pre-images, the plan. The journal says how far the apply (and its
// rollback) got: before each change of the data dir (a file renamed or
// moved away, a dir made or removed) Apply appends, and fsyncs, one line
// naming the path and the state it will have once the change is done. A
// file whose current bytes are its pre-apply bytes or one of the states
// its journal lines announce was changed by the apply and nothing else;
// so undo restores, without --force, a data dir whose apply was killed at
// any step (the manifest alone says "prepared", which could be anything).
// The journal also holds the outcome (the last "state" line wins over
// manifest.json's state) and what a rollback restored and could not.
//
// The journal's space is reserved (fallocate) when the backup is written:
// a disk that fills up during the apply still takes every line, and the
// report and the backup keep telling the truth.
const JournalName = "journal"

// Journal line ops.
const (
	JournalCommit        = "commit"          // a file is about to take the state (Exists, SHA256, Size)
	JournalMkdir         = "mkdir"           // a dir is about to be created
	JournalRmdir         = "rmdir"           // a dir is about to be removed
	JournalInPlace       = "restore-inplace" // the rollback writes the pre-images into the file in place
	JournalRestored      = "restored"        // the rollback restored the path
	JournalRestoreFailed = "restore-failed"  // the rollback could not restore the path (Error)
	JournalState         = "state"           // the apply (or undo) ended in State
)

// JournalEntry is one line of the journal.
type JournalEntry struct {
	Op     string `json:"op"`
	Path   string `json:"path,omitempty"`
	Exists bool   `json:"exists,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	State  string `json:"state,omitempty"`
	Error  string `json:"error,omitempty"`
}

// journal appends to a backup's journal file.
type journal struct {
	f        *os.File
	off      int64 // where the next line goes
	reserved int64 // bytes allocated up front
}

// journalReserve is the space createJournal allocates for a manifest: a
// few lines per file and dir, generously.
func journalReserve(m *Manifest) int64 {
	n := int64(64 << 10)
	for _, f := range m.Files {
		n += 3 * (256 + int64(len(f.Path)))
	}
	for _, d := range m.Dirs {
		n += 2 * (128 + int64(len(d.Path)))
	}
	return n
}

// createJournal creates the journal of backup dir with its space
// reserved: fallocate where the file system can, else zeros written.
func createJournal(w *fsw, dir string, m *Manifest) (*journal, error) {
	p := filepath.Join(dir, JournalName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	j := &journal{f: f, reserved: journalReserve(m)}
	if err := w.step("write " + p + " (reserve)"); err != nil {
		f.Close()
		return nil, err
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, j.reserved); err != nil {
		if err := writeZeros(w, f, 0, j.reserved); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := w.sync(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := w.syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// add appends e and fsyncs the journal. Inside the reserved space the
// write allocates nothing (its step is named "journal", which a full-disk
// injector lets through, as a full disk does).
func (j *journal) add(w *fsw, e JournalEntry) error {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	what := "journal " + j.f.Name()
	if j.off+int64(len(b)) > j.reserved {
		what = "write " + j.f.Name() // past the reservation: a real allocation
	}
	if err := w.step(what); err != nil {
		return err
	}
	if _, err := j.f.WriteAt(b, j.off); err != nil {
		return err
	}
	j.off += int64(len(b))
	return w.sync(j.f)
}

func (j *journal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// openJournal opens an existing journal for appending (Undo's outcome
// line), after its last complete line.
func openJournal(dir string) (*journal, error) {
	p := filepath.Join(dir, JournalName)
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		f.Close()
		return nil, err
	}
	_, end := parseJournal(b)
	return &journal{f: f, off: end, reserved: st.Size()}, nil
}

// ReadJournal reads a backup dir's journal: its complete lines, in order
// (a torn last line, cut by a crash, is dropped). A backup without one
// (made before journals, or killed before it was created) has none.
func ReadJournal(dir string) ([]JournalEntry, error) {
	b, err := storefile.ReadFile(filepath.Join(dir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	es, _ := parseJournal(b)
	return es, nil
}

// parseJournal splits b into entries, stopping at the reserved zeros or at
// the first line that is not a complete entry; end is the offset after the
// last entry.
func parseJournal(b []byte) (es []JournalEntry, end int64) {
	for off := 0; off < len(b); {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 || b[off] == 0 {
			break
		}
		var e JournalEntry
		if err := json.Unmarshal(b[off:off+i], &e); err != nil || e.Op == "" {
			break
		}
		es = append(es, e)
		off += i + 1
		end = int64(off)
	}
	return es, end
}

// journalState is the outcome the journal records last ("" when none).
func journalState(es []JournalEntry) string {
	s := ""
	for _, e := range es {
		if e.Op == JournalState {
			s = e.State
		}
	}
	return s
}

// fileAfter is one state the journal announced for a file.
type fileAfter struct {
	exists bool
	sha    string
}

// journalAfters collects, per path, the states the journal announced
// (commits) and the paths a rollback rewrote in place.
func journalAfters(es []JournalEntry) (afters map[string][]fileAfter, inPlace map[string]bool) {
	afters, inPlace = map[string][]fileAfter{}, map[string]bool{}
	for _, e := range es {
		switch e.Op {
		case JournalCommit:
			afters[e.Path] = append(afters[e.Path], fileAfter{e.Exists, e.SHA256})
		case JournalInPlace:
			inPlace[e.Path] = true
		}
	}
	return afters, inPlace
}
