// Package repair is the only code in storectl that writes store files.
//
// A repair is an inert Plan (JSON-serialisable, see PlanSchema) made of
// Actions, each pinned by a precondition (FileState) to the bytes it was
// computed from. Apply re-checks every precondition, writes the pre-image of
// every byte it will change to a backup directory with a manifest, then
// changes each file through a staging file, fsync and rename, and rolls back
// from the backup if anything fails part-way. Undo puts back every byte an
// Apply changed. The store-specific planners build Plans; this package knows
// nothing about RocketMQ or RabbitMQ.
//
// Directories: a replace-file whose parent dirs are missing records them
// (FileState.AbsentDirs) and Apply creates them first; a remove-dir removes
// an empty dir after every file action. Both are counted write steps,
// recorded in the manifest, rolled back and undone like file changes.
package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/storectl/storectl/internal/storefile"
)

// PlanSchema versions the Plan JSON document. Bump it on any breaking change.
const PlanSchema = "storectl.plan/v1"

// MaxNewSize caps the size a resize-file or replace-file may give a file:
// 64 GiB is far above any broker file (RocketMQ maps 1 GiB commitlog files)
// and stops a planner bug from filling the disk with zeros.
const MaxNewSize int64 = 64 << 30

// MaxInlineData caps the bytes an Action may carry inline (base64 in JSON):
// larger content goes in a staged file (Action.Source) so a plan stays small
// enough to read, diff and review.
const MaxInlineData = 16 << 20

// ErrInvalidPlan is wrapped by every error about a malformed plan or action.
var ErrInvalidPlan = errors.New("invalid repair plan")

// Op names what an Action does to its file. New ops are added here, in
// Action.Changed, Action.validate and the per-op code in ops.go.
type Op string

// The supported operations.
const (
	// OpZeroRange overwrites [Offset, Offset+Length) with zeros; the size is unchanged.
	OpZeroRange Op = "zero-range"
	// OpWriteRange overwrites [Offset, Offset+Length) with Data or Source.
	OpWriteRange Op = "write-range"
	// OpTruncateFile cuts the file to NewSize (never longer).
	OpTruncateFile Op = "truncate-file"
	// OpResizeFile cuts and/or zero-extends the file to exactly NewSize
	// (RocketMQ keeps every mapped file at its mapped size).
	OpResizeFile Op = "resize-file"
	// OpRemoveFile moves the whole file to the backup.
	OpRemoveFile Op = "remove-file"
	// OpReplaceFile swaps in a file whose full content is Data or Source;
	// it creates the file when absent, and its missing parent dirs
	// (Pre.AbsentDirs) inside the data dir.
	OpReplaceFile Op = "replace-file"
	// OpRemoveDir removes a directory that is empty once the plan's other
	// actions ran (e.g. a queue dir whose files are all removed). Apply runs
	// every file action first, then the remove-dirs, deepest first; Undo
	// recreates the dir with its mode and owner.
	OpRemoveDir Op = "remove-dir"
)

// Range is a byte range [Offset, Offset+Length) of a file.
type Range struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// End is the offset just past the range.
func (r Range) End() int64 { return r.Offset + r.Length }

// Loss says what data an action destroys, for the operator to judge.
type Loss struct {
	Records int64    `json:"records"`           // records (messages, index entries) lost
	MsgIDs  []string `json:"msg_ids,omitempty"` // ids of the messages lost
	Note    string   `json:"note,omitempty"`    // free text, e.g. "torn tail of 37 bytes"
}

// Action is one change to one file. Path is relative to Plan.DataDir.
// Offset/Length are used by the range ops, NewSize by truncate, resize and
// replace. Content for write-range and replace-file is either Data (inline,
// base64 in JSON) or Source (absolute path of a staged file, pinned by
// SourceSHA256). Pre is the precondition recorded at plan time.
type Action struct {
	ID           string    `json:"id"`
	Op           Op        `json:"op"`
	Path         string    `json:"path"`
	Offset       int64     `json:"offset"`
	Length       int64     `json:"length"`
	NewSize      int64     `json:"new_size"`
	Data         []byte    `json:"data,omitempty"`
	Source       string    `json:"source,omitempty"`
	SourceSHA256 string    `json:"source_sha256,omitempty"`
	Lost         Loss      `json:"lost"`
	Reason       string    `json:"reason"` // the finding code that motivates the action
	Pre          FileState `json:"pre"`
}

// Plan is an inert, JSON-serialisable list of actions on one data dir.
type Plan struct {
	Schema      string    `json:"schema"`
	DataDir     string    `json:"data_dir"` // absolute
	Created     time.Time `json:"created"`
	ToolVersion string    `json:"tool_version"`
	Actions     []Action  `json:"actions"`

	// printOnly: staged sources are not hashed (PrintOnly).
	printOnly bool
	// idx lets Add validate each action against the plan in constant time
	// per action (index.go).
	idx *planIndex
	res *resolver
}

// ErrPrintOnly is returned by Write, Save and Apply for a plan marked
// PrintOnly: its staged sources are not pinned by a hash.
var ErrPrintOnly = errors.New("a print-only plan (staged sources not hashed) cannot be saved or applied")

// PrintOnly marks a plan that will only be printed, for a dry run whose
// staged files are removed when it ends: Add then leaves SourceSHA256
// empty. The hash pins a staged file between the plan and its apply, and
// such a plan is never applied; a rebuilt RocketMQ index file is 420 MB
// to hash, mostly zeros. Call it before the first Add.
func (p *Plan) PrintOnly() { p.printOnly = true }

// NewPlan returns an empty plan for dataDir (made absolute).
func NewPlan(dataDir, toolVersion string, now time.Time) (*Plan, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	return &Plan{Schema: PlanSchema, DataDir: abs, Created: now.UTC(), ToolVersion: toolVersion, Actions: []Action{}}, nil
}

// Add records the precondition of a (Snapshot of its file over the range
// it changes, plus the staged Source's hash; for a file to create, which
// parent dirs are missing; for a remove-dir, that the dir exists), gives it
// an ID if it has none, validates it against the plan and appends it.
func (p *Plan) Add(a Action, o SnapshotOptions) error {
	if a.ID == "" {
		a.ID = fmt.Sprintf("a%03d", len(p.Actions)+1)
	}
	if a.Op == OpRemoveDir {
		st, err := snapshotDir(p.resolver(), a.Path)
		if err != nil {
			return err
		}
		a.Pre = st
		return p.appendValid(a)
	}
	if a.Source != "" {
		size, sum, err := sourceState(a.Source, !p.printOnly)
		if err != nil {
			return fmt.Errorf("%w: action %s: source: %v", ErrInvalidPlan, a.ID, err)
		}
		a.SourceSHA256 = sum
		if a.Op == OpWriteRange && a.Length == 0 {
			a.Length = size
		}
		if a.Op == OpReplaceFile {
			a.NewSize = size
		}
	} else if a.Op == OpReplaceFile {
		a.NewSize = int64(len(a.Data))
	}
	// One open of the file: its size, then the range the action changes
	// (which depends on it) and the whole-file hash, the file read once.
	st, err := snapshot(p.resolver(), a.Path, o, func(size int64) []Range {
		if r, ok := a.Changed(size); ok {
			return []Range{r}
		}
		return nil
	})
	if err != nil {
		return err
	}
	a.Pre = st
	return p.appendValid(a)
}

// resolver is the plan's path resolver while it is built (Add).
func (p *Plan) resolver() *resolver {
	if p.res == nil || p.res.root != p.DataDir {
		p.res = newResolver(p.DataDir)
	}
	return p.res
}

// appendValid appends a if the plan with it validates: a's own shape, then
// a against the actions so far (planIndex: no work that grows with the
// plan, so building a plan is linear in its actions).
func (p *Plan) appendValid(a Action) error {
	if p.Schema != PlanSchema || !filepath.IsAbs(p.DataDir) {
		return (&Plan{Schema: p.Schema, DataDir: p.DataDir}).validate(p.printOnly)
	}
	if !validID.MatchString(a.ID) {
		return fmt.Errorf("%w: action id %q is empty, malformed or repeated", ErrInvalidPlan, a.ID)
	}
	if err := a.validate(p.printOnly); err != nil {
		return fmt.Errorf("%w: action %s (%s %s): %v", ErrInvalidPlan, a.ID, a.Op, a.Path, err)
	}
	x := p.index()
	if err := x.check(p.Actions, &a); err != nil {
		return err
	}
	p.Actions = append(p.Actions, a)
	x.insert(p.Actions, len(p.Actions)-1)
	x.n = len(p.Actions)
	return nil
}

// Changed is the byte range of the file as it was at plan time (size
// preSize) that the action overwrites or removes; ok is false when it
// changes no existing byte (a pure extension, creating a file, remove-dir).
func (a *Action) Changed(preSize int64) (r Range, ok bool) {
	switch a.Op {
	case OpZeroRange, OpWriteRange:
		r = Range{a.Offset, a.Length}
	case OpTruncateFile, OpResizeFile:
		if a.NewSize < preSize {
			r = Range{a.NewSize, preSize - a.NewSize}
		}
	case OpRemoveFile, OpReplaceFile:
		r = Range{0, preSize}
	}
	return r, r.Length > 0
}

// LostBytes is how many existing bytes the action overwrites or removes.
func (a *Action) LostBytes() int64 {
	if !a.Pre.Exists {
		return 0
	}
	r, _ := a.Changed(a.Pre.Size)
	return r.Length
}

// LostBytes is the sum of LostBytes over all actions (what
// ApplyOptions.MaxRemoveBytes limits).
func (p *Plan) LostBytes() int64 {
	var n int64
	for i := range p.Actions {
		n += p.Actions[i].LostBytes()
	}
	return n
}

// Write encodes the plan as indented JSON.
func (p *Plan) Write(w io.Writer) error {
	if p.printOnly {
		return ErrPrintOnly
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// Save writes the plan to path atomically: into a new temporary file in
// the same dir, fsynced, then renamed over path. A path that is a symlink
// or a hard link to another file (a store file, say) has that name
// replaced; the file it pointed at is never written.
func (p *Plan) Save(path string) error {
	if p.printOnly {
		return ErrPrintOnly
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	err = p.Write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// ReadPlan decodes and validates a plan.
func ReadPlan(r io.Reader) (*Plan, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// LoadPlan reads a plan saved by Save.
func LoadPlan(path string) (*Plan, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadPlan(f)
}
