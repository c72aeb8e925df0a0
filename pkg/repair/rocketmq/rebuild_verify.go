package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	scanrmq "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// maxStagedProblems bounds the problems a StagedCheck lists: one is enough
// to refuse the apply, a hundred to debug it.
const maxStagedProblems = 100

// StagedCheck is the outcome of VerifyStaged.
type StagedCheck struct {
	UnitsChecked   int64    `json:"units_checked"`
	EntriesChecked int64    `json:"entries_checked"`
	VerifyFindings int      `json:"verify_findings"` // all findings of Verify on the view
	Problems       []string `json:"problems,omitempty"`
}

// OK reports whether the staged files passed.
func (c *StagedCheck) OK() bool { return len(c.Problems) == 0 }

func (c *StagedCheck) fail(format string, a ...any) {
	if len(c.Problems) < maxStagedProblems {
		c.Problems = append(c.Problems, fmt.Sprintf(format, a...))
	}
}

// VerifyStaged cross-checks the files staged by PlanRebuildIndex (the
// plan must have been made with KeepStage) against the commitlog before
// Apply, independently of the builder: every consume queue unit that is
// not a placeholder must point at a valid record before the recovery end
// with the queue's topic and queue id, queue offset == unit index, the
// unit's size and tags code, a dispatched transaction type, and
// increasing commitlog offsets, with no unit after an empty one; every
// index entry must point at a valid record inside the header's offset
// range whose topic#key hashes include the entry's keyHash, and every slot
// chain must descend through entries of its own slot and reach all of
// them. Then it runs scanrmq.Verify, the checks of storectl verify, on a
// view of the store with the staged files (see rbVerifyView); its
// consume queue and index findings at warning or above are problems too.
// An error means the check could not run.
func VerifyStaged(ctx context.Context, cfg RebuildConfig, rep *RebuildReport) (*StagedCheck, error) {
	if rep == nil || rep.StageDir == "" {
		return nil, errors.New("verify staged: no stage dir (plan with KeepStage and a non-empty plan)")
	}
	st, err := scanrmq.OpenStore(scanrmq.Config{Root: cfg.DataDir, CommitLogDir: cfg.CommitLogDir,
		MappedFileSize: cfg.MappedFileSize, MaxMessageSize: cfg.MaxMessageSize})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := &StagedCheck{}
	v := &rbVerifier{st: st, c: c, end: rep.RecoveryEnd}
	for _, q := range rep.Queues {
		for _, rel := range q.Files {
			if err := ctx.Err(); err != nil {
				return c, err
			}
			if err := v.cqFile(rep.StageDir, rel, q); err != nil {
				return c, err
			}
		}
	}
	for _, f := range rep.IndexFiles {
		if f.Action == "replace" || f.Action == "create" {
			if err := v.indexFile(filepath.Join(rep.StageDir, "index", f.Name), rep.IndexLayout); err != nil {
				return c, err
			}
		}
	}
	if err := rbVerifyView(ctx, cfg, rep, c); err != nil {
		return c, err
	}
	return c, ctx.Err()
}

type rbVerifier struct {
	st  *scanrmq.Store
	c   *StagedCheck
	end int64
}

// cqFile checks one staged CQ file (absent from the stage = removed).
func (v *rbVerifier) cqFile(stage, rel string, q QueueDiff) error {
	b, ok, err := rbReadOpt(filepath.Join(stage, rel))
	if err != nil || !ok {
		return err
	}
	base, err := rmq.ParseFileName(filepath.Base(rel))
	if err != nil {
		return err
	}
	var lastEnd int64
	empty := false
	for i, u := range rbUnits(b) {
		idx := base/rmq.CQUnitSize + int64(i)
		switch {
		case u.IsZero():
			empty = true
			continue
		case empty:
			v.c.fail("%s unit %d follows an empty unit", rel, idx)
		case u.IsPlaceholder():
			continue
		}
		v.c.UnitsChecked++
		m, err := v.st.RecordAt(u.CommitLogOffset)
		if err != nil {
			v.c.fail("%s unit %d: phy offset %d: %v", rel, idx, u.CommitLogOffset, err)
			continue
		}
		switch {
		case u.CommitLogOffset >= v.end:
			v.c.fail("%s unit %d points past the recovery end %d", rel, idx, v.end)
		case u.CommitLogOffset < lastEnd:
			v.c.fail("%s unit %d: phy offset %d goes backwards", rel, idx, u.CommitLogOffset)
		case m.IsBlank() || int64(m.TotalSize) != int64(u.Size):
			v.c.fail("%s unit %d: size %d, record has %d", rel, idx, u.Size, m.TotalSize)
		case string(m.Topic) != q.Topic || m.QueueID != q.QueueID || m.QueueOffset != idx:
			v.c.fail("%s unit %d: record is %s/%d offset %d", rel, idx, m.Topic, m.QueueID, m.QueueOffset)
		case !m.Dispatched():
			v.c.fail("%s unit %d: record has transaction type %#x, never dispatched", rel, idx, m.TransactionType())
		case m.TagsCode() != u.TagsCode:
			v.c.fail("%s unit %d: tagsCode %d, record gives %d", rel, idx, u.TagsCode, m.TagsCode())
		}
		lastEnd = u.CommitLogOffset + int64(u.Size)
	}
	return nil
}

// indexFile checks one staged index file.
func (v *rbVerifier) indexFile(p string, lay rmq.IndexLayout) error {
	b, err := storefile.ReadFile(p)
	if err != nil {
		return err
	}
	if int64(len(b)) != lay.Size() {
		v.c.fail("%s: %d bytes, layout needs %d", p, len(b), lay.Size())
		return nil
	}
	h, _ := rmq.DecodeIndexHeader(b, 0)
	n := int64(h.IndexCount)
	if n < 1 || n > lay.Entries {
		v.c.fail("%s: indexCount %d out of range", p, n)
		return nil
	}
	entry := func(i int64) rmq.IndexEntry {
		e, _ := rmq.DecodeIndexEntry(b[lay.EntryOffset(i):], lay.EntryOffset(i))
		return e
	}
	for i := int64(1); i < n; i++ {
		e := entry(i)
		v.c.EntriesChecked++
		if e.PhyOffset < h.BeginPhyOffset || e.PhyOffset > h.EndPhyOffset || e.PhyOffset >= v.end {
			v.c.fail("%s entry %d: phy offset %d outside [%d, %d] or past the recovery end", p, i, e.PhyOffset, h.BeginPhyOffset, h.EndPhyOffset)
			continue
		}
		m, err := v.st.RecordAt(e.PhyOffset)
		if err != nil || m.IsBlank() {
			v.c.fail("%s entry %d: phy offset %d: no valid record (%v)", p, i, e.PhyOffset, err)
			continue
		}
		if !slices.Contains(rbRecordKeys(&m), e.KeyHash) {
			v.c.fail("%s entry %d: keyHash %d is none of the record's keys", p, i, e.KeyHash)
		}
	}
	seen := int64(0)
	for s := int64(0); s < lay.Slots; s++ {
		slot, _ := rmq.DecodeIndexSlot(b[lay.SlotOffset(s):], lay.SlotOffset(s))
		cur := int64(slot)
		last := n
		for cur > 0 {
			if cur >= last {
				v.c.fail("%s slot %d: chain does not descend at entry %d", p, s, cur)
				break
			}
			e := entry(cur)
			if int64(e.KeyHash)%lay.Slots != s {
				v.c.fail("%s slot %d: entry %d hashes to another slot", p, s, cur)
			}
			seen++
			last, cur = cur, int64(e.PrevIndex)
		}
	}
	if seen != n-1 {
		v.c.fail("%s: slot chains reach %d of %d entries", p, seen, n-1)
	}
	return nil
}

// rbRecordKeys is IndexKeyHash(topic#key) of every key buildIndex indexes
// for m (rmq.ForEachIndexKey: none for a ROLLBACK message).
func rbRecordKeys(m *rmq.Message) []int32 {
	var vals [len(rmq.DispatchProps)][]byte
	var found [len(rmq.DispatchProps)]bool
	rmq.LookupProperties(m.Properties, rmq.DispatchProps[:], vals[:], found[:])
	var out []int32
	rmq.ForEachIndexKey(m, vals[:], found[:], func(k []byte) {
		out = append(out, rmq.IndexKeyHash(append(append(append([]byte(nil), m.Topic...), '#'), k...)))
	})
	return out
}
