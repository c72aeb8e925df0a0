package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/storectl/storectl/pkg/scan"
)

// A baseline remembers the findings of the last complete run of verify
// (verify --baseline FILE), so that the next run can tell an operator
// which problems are new, which persist and which were resolved — the
// difference that matters when a store has carried the same known damage
// for weeks and the nightly job should page only for what changed.

// Baseline statuses of a finding.
const (
	BaselineNew        = "new"
	BaselinePersistent = "persistent"
)

// BaselineSchema names the format of a baseline file.
const BaselineSchema = "storectl/baseline/v1"

// FindingKey is a finding's stable key: the same problem at the same place
// in the same file has the same key in every run (code, path, offset and
// message id; not the message text or the severity, which a broker
// version or a severity policy can change).
func FindingKey(f *scan.Finding) string {
	h := sha256.New()
	for _, s := range []string{f.Code, f.Path, strconv.FormatInt(f.Offset, 10), f.MsgID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// BaselineEntry is one finding remembered in a baseline file.
type BaselineEntry struct {
	Key      string `json:"key"`
	Code     string `json:"code"`
	Severity string `json:"severity"`
	Path     string `json:"path"`
	Offset   int64  `json:"offset"`
	MsgID    string `json:"msg_id,omitempty"`
	Message  string `json:"message"`
}

// baselineFile is the JSON document of a baseline file.
type baselineFile struct {
	Schema   string          `json:"schema"`
	DataDir  string          `json:"data_dir"`
	Written  time.Time       `json:"written"`
	Findings []BaselineEntry `json:"findings"`
}

// Baseline compares one run's findings with the ones a file remembers.
type Baseline struct {
	path     string
	previous map[string]BaselineEntry // nil: no earlier baseline
	seen     map[string]bool
	current  []BaselineEntry
	counts   map[string]int
}

// LoadBaseline reads path; a missing file is a first run (every finding
// is new). A file that exists but is not a baseline is an error (it would
// otherwise be overwritten).
func LoadBaseline(path string) (*Baseline, error) {
	b := &Baseline{path: path, seen: map[string]bool{}, counts: map[string]int{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, err
	}
	var f baselineFile
	if err := json.Unmarshal(data, &f); err != nil || f.Schema != BaselineSchema {
		return nil, fmt.Errorf("%s is not a storectl baseline file (schema %q): %v", path, BaselineSchema, err)
	}
	b.previous = map[string]BaselineEntry{}
	for _, e := range f.Findings {
		b.previous[e.Key] = e
	}
	return b, nil
}

// Mark sets f's Key and Baseline status and remembers f for Save.
func (b *Baseline) Mark(f *scan.Finding) {
	f.Key = FindingKey(f)
	f.Baseline = BaselineNew
	if _, ok := b.previous[f.Key]; ok {
		f.Baseline = BaselinePersistent
	}
	if b.seen[f.Key] {
		return // the same problem reported twice counts once
	}
	b.seen[f.Key] = true
	b.counts[f.Baseline]++
	b.current = append(b.current, BaselineEntry{Key: f.Key, Code: f.Code, Severity: f.Severity.String(), Path: f.Path,
		Offset: f.Offset, MsgID: f.MsgID, Message: f.Message})
}

// Resolved lists the remembered findings this run did not report, in path
// and offset order.
func (b *Baseline) Resolved() []BaselineEntry {
	var out []BaselineEntry
	for k, e := range b.previous {
		if !b.seen[k] {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		if out[i].Offset != out[j].Offset {
			return out[i].Offset < out[j].Offset
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Summary is the summary's baseline object. resolvedKept bounds the
// resolved findings listed (all are counted).
func (b *Baseline) Summary(resolvedKept int) *BaselineSummary {
	r := b.Resolved()
	if r == nil {
		r = []BaselineEntry{}
	}
	s := &BaselineSummary{File: b.path, Previous: b.previous != nil, New: b.counts[BaselineNew],
		Persistent: b.counts[BaselinePersistent], Resolved: len(r)}
	if len(r) > resolvedKept {
		r = r[:resolvedKept]
	}
	s.ResolvedFindings = r
	return s
}

// Save writes this run's findings as the next run's baseline: a temp file
// in the same dir, fsynced and renamed over path.
func (b *Baseline) Save(dataDir string, now time.Time) error {
	cur := b.current
	if cur == nil {
		cur = []BaselineEntry{}
	}
	data, err := json.MarshalIndent(baselineFile{Schema: BaselineSchema, DataDir: dataDir, Written: now.UTC(), Findings: cur}, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(b.path), "."+filepath.Base(b.path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), b.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// BaselineSummary is the `baseline` member of a verify --baseline summary.
type BaselineSummary struct {
	File string `json:"file"`
	// Previous is false on the first run (no baseline file yet: every
	// finding is new).
	Previous         bool            `json:"previous"`
	New              int             `json:"new"`
	Persistent       int             `json:"persistent"`
	Resolved         int             `json:"resolved"`
	ResolvedFindings []BaselineEntry `json:"resolved_findings"`
	// NotSaved says why this run did not become the next baseline (an
	// incomplete run would resolve what it did not read).
	NotSaved string `json:"not_saved,omitempty"`
}
