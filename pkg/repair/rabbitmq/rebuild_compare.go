package rabbitmq

// Comparing a rebuilt table with the one on disk, as sets of objects (an
// ETS set's dump order is not reproducible, see rbOrderLike).

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/storectl/storectl/pkg/format/etf"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// rbMaxDetail bounds the differences named in a table's detail: the
// counts say how many there are, a few examples say what they look like.
const rbMaxDetail = 3

// rbExistingState fills t.existing for an absent or unreadable dump and
// reports whether the dump can be compared object by object.
func rbExistingState(t *rbTable, ex rbExisting) bool {
	switch {
	case ex.absent:
		t.existing = "absent"
	case ex.err != nil:
		t.existing, t.detail = "unreadable", ex.err.Error()
	default:
		return true
	}
	return false
}

// rbCompareIndex compares rebuilt index entries with the saved ones.
func rbCompareIndex(t *rbTable, ex rbExisting, old, locs []rfmt.MsgLocation) {
	if !rbExistingState(t, ex) {
		t.added = len(locs)
		return
	}
	oldBy := make(map[[16]byte]rfmt.MsgLocation, len(old))
	var ex1 []string
	for _, l := range old {
		if _, dup := oldBy[l.MsgID]; dup {
			t.removed++
			ex1 = append(ex1, fmt.Sprintf("msg %x listed twice", l.MsgID))
			continue
		}
		oldBy[l.MsgID] = l
	}
	seen := make(map[[16]byte]bool, len(locs))
	for _, l := range locs {
		seen[l.MsgID] = true
		o, ok := oldBy[l.MsgID]
		switch {
		case !ok:
			t.added++
			ex1 = append(ex1, fmt.Sprintf("msg %x missing (file %d offset %d)", l.MsgID, l.File, l.Offset))
		case o != l:
			t.changed++
			ex1 = append(ex1, fmt.Sprintf("msg %x: saved ref %d file %d offset %d size %d, files say ref %d file %d offset %d size %d",
				l.MsgID, o.RefCount, o.File, o.Offset, o.TotalSize, l.RefCount, l.File, l.Offset, l.TotalSize))
		}
	}
	for _, o := range old {
		if !seen[o.MsgID] {
			seen[o.MsgID] = true
			t.removed++
			ex1 = append(ex1, fmt.Sprintf("msg %x (file %d offset %d) is in no file", o.MsgID, o.File, o.Offset))
		}
	}
	rbSetDiff(t, ex1)
}

// rbCompareSummary compares rebuilt file summaries with the saved ones.
func rbCompareSummary(t *rbTable, ex rbExisting, old, sums []rfmt.FileSummary) {
	if !rbExistingState(t, ex) {
		t.added = len(sums)
		return
	}
	oldBy := make(map[int64]rfmt.FileSummary, len(old))
	var ex1 []string
	for _, s := range old {
		if _, dup := oldBy[s.File]; dup {
			t.removed++
			ex1 = append(ex1, fmt.Sprintf("file %d listed twice", s.File))
			continue
		}
		oldBy[s.File] = s
	}
	seen := make(map[int64]bool, len(sums))
	for _, s := range sums {
		seen[s.File] = true
		o, ok := oldBy[s.File]
		switch {
		case !ok:
			t.added++
			ex1 = append(ex1, fmt.Sprintf("file %d missing", s.File))
		case !rbSameSummary(o, s):
			t.changed++
			ex1 = append(ex1, fmt.Sprintf("file %d: saved valid %d size %d locked %v, files say valid %d size %d locked %v",
				s.File, o.ValidTotalSize, o.FileSize, o.Locked, s.ValidTotalSize, s.FileSize, s.Locked))
		}
	}
	for _, o := range old {
		if !seen[o.File] {
			seen[o.File] = true
			t.removed++
			ex1 = append(ex1, fmt.Sprintf("file %d does not exist", o.File))
		}
	}
	rbSetDiff(t, ex1)
}

// rbSameSummary compares every field, the unused ones included (as terms:
// undefined, or a file number / reader count before 3.13).
func rbSameSummary(a, b rfmt.FileSummary) bool {
	return a.File == b.File && a.ValidTotalSize == b.ValidTotalSize && a.FileSize == b.FileSize && a.Locked == b.Locked &&
		reflect.DeepEqual(rbTerm(a.Left), rbTerm(b.Left)) && reflect.DeepEqual(rbTerm(a.Right), rbTerm(b.Right)) &&
		reflect.DeepEqual(rbTerm(a.Readers), rbTerm(b.Readers))
}

// rbTerm maps nil to undefined, as the encoder writes it.
func rbTerm(t etf.Term) etf.Term {
	if t == nil {
		return etf.Atom("undefined")
	}
	return t
}

// rbSetDiff sets existing to equal or differs, with a few examples.
func rbSetDiff(t *rbTable, examples []string) {
	if t.added+t.removed+t.changed == 0 {
		t.existing = "equal"
		return
	}
	t.existing = "differs"
	if len(examples) > rbMaxDetail {
		examples = append(examples[:rbMaxDetail:rbMaxDetail], fmt.Sprintf("%d more", len(examples)-rbMaxDetail))
	}
	t.detail = strings.Join(examples, "; ")
}
