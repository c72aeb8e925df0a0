package rocketmq

import (
	"fmt"
	"slices"
	"strings"

	"github.com/storectl/storectl/pkg/scan"
)

// unreadSpan is a commitlog file the scan could not read to its end (a
// file it could not open: a directory or FIFO in its place, permission
// denied; or one whose read failed part way), as the range of offsets it
// holds. A consume queue unit or index entry below the recovery end that
// points where the record table has no record, inside one, points at
// what the store kept there: unknown, not at nothing (such a file before
// the file recovery starts from is never read by the broker's walk
// either, and past the recovery end verifier.unread already rules). The
// records the scan did read there are in the table and matched as usual.
type unreadSpan struct {
	from, to int64
	rel      string
}

// unreadCommitlogFiles are the commitlog files of the scan's result that
// it could not read to their end (no End: session.result reports each as
// unreadable), by path.
func unreadCommitlogFiles(res *scan.Result) map[string]bool {
	var m map[string]bool
	for _, f := range res.Files {
		if f.Kind == "commitlog" && f.End == "" {
			if m == nil {
				m = map[string]bool{}
			}
			m[f.Path] = true
		}
	}
	return m
}

// findUnreadSpans sets v.unreadSpans from unreadCommitlogFiles.
func (v *verifier) findUnreadSpans() {
	unread := unreadCommitlogFiles(v.res)
	if len(unread) == 0 {
		return
	}
	lay := v.store.lay
	for i, s := range lay.segs {
		if !unread[s.rel] {
			continue
		}
		end := s.base + max(s.size, lay.mapped)
		if i+1 < len(lay.segs) {
			end = max(end, lay.segs[i+1].base) // up to the next file: nothing else holds those offsets
		}
		v.unreadSpans = append(v.unreadSpans, unreadSpan{from: s.base, to: end, rel: s.rel})
	}
}

// unreadAt is the file of the unread span holding commitlog offset phy,
// "" when none does.
func (v *verifier) unreadAt(phy int64) string {
	for _, s := range v.unreadSpans {
		if phy >= s.from && phy < s.to {
			return s.rel
		}
	}
	return ""
}

// spanUnknown counts what points into unread spans, by the files it
// waits on.
type spanUnknown struct {
	n     int64
	first string // the file and offset of the first (a unit's consume queue file)
	pos   int64
	waits []string
}

func (s *spanUnknown) add(rel, file string, pos int64) {
	if s.n == 0 {
		s.first, s.pos = file, pos
	}
	s.n++
	if !slices.Contains(s.waits, rel) {
		s.waits = append(s.waits, rel)
		slices.Sort(s.waits)
	}
}

// into says where s's units or entries point, for a message.
func (s *spanUnknown) into() string {
	return fmt.Sprintf("into commitlog file(s) %s, which could not be read", strings.Join(s.waits, ", "))
}
