package rabbitmq

// The clean-shutdown state of a persistent message store (§1.3, §1.4):
// whether the next start trusts clean.dot + msg_store_index.ets +
// file_summary.ets, or rebuilds the index from scratch.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/scan"
)

// etsIndexModule is the only index module a 4.0+ clean start accepts.
const etsIndexModule = "rabbit_msg_store_ets_index"

// cleanState is what the clean-shutdown files of one store say. leanIndex
// and summary are set only when the state is clean: otherwise the broker does
// not use them and they are not checked.
type cleanState struct {
	state       string
	from        []string
	clientRefs  int
	indexPath   string // relative to root
	summaryPath string
	summary     []rfmt.FileSummary
	summaryOffs []int64
	findings    []scan.Finding
	// The index was checked (rfmt.CheckMsgStoreIndex), not kept (the
	// scanner's leanIndex has it): indexObjects objects, and leanIndex
	// set when the state is clean.
	leanIndex    bool
	indexObjects int
}

// readCleanState reads and parses the three clean-shutdown files of store.
// msg_store_index.ets is only checked, a mapped object at a time, and not
// kept (the scanner has its entries).
func readCleanState(root, store string) *cleanState {
	cs := &cleanState{state: StateUnclean, clientRefs: -1}
	names := []string{"clean.dot", "file_summary.ets", "msg_store_index.ets"}
	data := map[string][]byte{}
	var present, absent []string
	for _, n := range names {
		p := filepath.Join(store, n)
		var b []byte
		var err error
		if n == "msg_store_index.ets" {
			b, err = []byte{}, statSmall(p) // read by readIndexLean
		} else {
			b, err = readSmall(p)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			absent = append(absent, n)
			continue
		case err != nil:
			cs.unreadable(root, p, 0, err)
		default:
			data[n] = b
		}
		present = append(present, n)
	}
	rel := scan.Rel(root, store)
	if len(present) == 0 {
		cs.from = []string{rel + ": no clean.dot, file_summary.ets or msg_store_index.ets (crash or kill)"}
		return cs
	}
	if len(absent) > 0 {
		cs.from = []string{fmt.Sprintf("%s: %v present, %v absent", rel, present, absent)}
		cs.findings = append(cs.findings, scan.Finding{Code: CodeCleanPart, Severity: scan.Info, Path: rel,
			Repair: scan.RepairNone, Details: map[string]any{"present": present, "absent": absent},
			Message: "only part of the clean-shutdown state was written (a stop that timed out?); the next start rebuilds the index from scratch"})
		return cs
	}
	ok := len(data) == len(names)
	if b, found := data["clean.dot"]; found {
		cd, err := rfmt.ParseCleanDot(b)
		if err != nil {
			cs.unreadable(root, filepath.Join(store, "clean.dot"), 0, err)
			ok = false
		} else {
			cs.clientRefs = len(cd.ClientRefs)
			if cd.IndexModule != "" && cd.IndexModule != etsIndexModule {
				cs.from = append(cs.from, fmt.Sprintf("%s/clean.dot: index_module %s (4.0+ rebuild the index)", rel, cd.IndexModule))
				ok = false
			}
		}
	}
	ok = cs.readIndexLean(root, filepath.Join(store, "msg_store_index.ets"), data["msg_store_index.ets"] != nil) && ok
	ok = cs.readSummary(root, filepath.Join(store, "file_summary.ets"), data["file_summary.ets"]) && ok
	if !ok {
		cs.summary, cs.leanIndex = nil, false
		cs.from = append(cs.from, rel+": clean-shutdown files present but not all usable")
		return cs
	}
	cs.state = StateClean
	for _, n := range names {
		cs.from = append(cs.from, rel+"/"+n)
	}
	return cs
}

// readSmall reads a clean-shutdown file, refusing ones over etsMaxFile.
func readSmall(p string) ([]byte, error) {
	if err := statSmall(p); err != nil {
		return nil, err
	}
	return storefile.ReadFile(p)
}

// statSmall is readSmall's check without the read.
func statSmall(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Size() > etsMaxFile {
		return format.Corrupt(0, "file", format.ErrTooLarge)
	}
	return nil
}

// readIndexLean checks msg_store_index.ets (the checks and errors of
// readSummary) on the mapped file, keeping only the object count. readable is false
// when the file could not be read (already reported).
func (cs *cleanState) readIndexLean(root, p string, readable bool) bool {
	if !readable {
		return false
	}
	var closed bool
	var n int
	err := fileview.StreamFile(p, func(b []byte, reached func(int64)) (err error) {
		closed, n, err = rfmt.CheckMsgStoreIndex(b, reached)
		return err
	})
	if err == nil && !closed {
		err = errNotClosed()
	}
	if err != nil {
		off, _ := fileview.FaultOffset(err) // 0 unless the dump shrank under the read
		cs.unreadable(root, p, off, err)
		return false
	}
	cs.indexPath, cs.leanIndex, cs.indexObjects = scan.Rel(root, p), true, n
	return true
}

// errNotClosed is the error of a dump whose disk_log header says it was
// not closed (the status field at offset 4): the broker does not trust it.
func errNotClosed() error {
	return format.Corrupt(4, "status", fmt.Errorf("%w: disk_log not closed", format.ErrInvalid))
}

func (cs *cleanState) unreadable(root, p string, off int64, err error) {
	var ce *format.CorruptError
	if errors.As(err, &ce) {
		off = ce.Offset
	}
	cs.findings = append(cs.findings, scan.Finding{Code: CodeIndexUnread, Severity: scan.Warning,
		Path: scan.Rel(root, p), Offset: off, Repair: scan.RepairNone,
		Message: fmt.Sprintf("clean-shutdown file not usable (%v); the next start rebuilds the index from scratch", err)})
}

// readSummary parses file_summary.ets; b is nil when it could not be read.
func (cs *cleanState) readSummary(root, p string, b []byte) bool {
	if b == nil {
		return false
	}
	f, err := rfmt.ReadETSFile(b)
	var sums []rfmt.FileSummary
	if err == nil {
		sums, err = rfmt.ReadFileSummary(b)
	}
	if err == nil && !f.Closed {
		err = errNotClosed()
	}
	if err != nil {
		cs.unreadable(root, p, 0, err)
		return false
	}
	cs.summaryPath, cs.summary, cs.summaryOffs = scan.Rel(root, p), sums, f.ObjOffs
	return true
}
