package rocketmq

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// unreadSpan is a range of commitlog offsets the scan could not read: a
// file it could not open (a directory or FIFO in its place, permission
// denied) from its start, or one whose read failed from where it failed,
// to the file's end. Records there are unknown, so a consume queue unit
// or index entry below the recovery end pointing into one points at what
// the store kept there, not at nothing (an unreadable file before the
// file recovery starts from is never read by the broker's walk either,
// and past the recovery end verifier.unread already rules).
type unreadSpan struct {
	from, to int64
	rel      string
}

// findUnreadSpans sets v.unreadSpans from the commitlog scan's files
// that it could not read to their end (no End: session.result reports
// each as unreadable), from where it stopped.
func (v *verifier) findUnreadSpans() {
	at := map[string]int64{}
	for _, f := range v.res.Files {
		if f.End == "" {
			at[f.Path] = f.BytesScanned
		}
	}
	if len(at) == 0 {
		return
	}
	lay := v.store.lay
	for i, s := range lay.segs {
		o, ok := at[s.rel]
		if !ok {
			continue
		}
		end := s.base + max(s.size, lay.mapped)
		if i+1 < len(lay.segs) {
			end = max(end, lay.segs[i+1].base) // up to the next file: nothing else holds those offsets
		}
		v.unreadSpans = append(v.unreadSpans, unreadSpan{from: s.base + o, to: end, rel: s.rel})
	}
	sort.Slice(v.unreadSpans, func(i, j int) bool { return v.unreadSpans[i].from < v.unreadSpans[j].from })
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
