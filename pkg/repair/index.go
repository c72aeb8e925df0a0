package repair

import (
	"fmt"
	"slices"
	"sort"
)

// planIndex is what Plan.Add knows of the actions so far, so that it
// validates each new action against the plan in time that does not grow
// with the plan: Add used to revalidate the whole plan on every call,
// quadratic in actions (10,000 actions: 48 s; 100,000 never finished).
// The checks are those of Validate (validateSameFile, validateDirs), made
// incrementally; Validate still checks a whole plan from scratch.
type planIndex struct {
	n      int                  // actions indexed (a prefix of Plan.Actions)
	ids    map[string]bool      // action ids
	byPath map[string]*pathInfo // the actions on each path
	absent map[string]bool      // dirs some replace-file records absent
	below  map[string][]int     // for each dir: the actions on paths below it
}

// pathInfo sums up the actions on one path.
type pathInfo struct {
	first   int    // the first action's index
	alone   bool   // one of them must be alone (remove-file, replace-file, remove-dir)
	sizeOps int    // truncate-file and resize-file actions
	spans   []span // changed ranges, sorted by offset
	last    int    // the last action's index (validateDirs' op[path])
}

type span struct {
	r  Range
	id string
}

// index returns the plan's index, indexing the actions appended since.
func (p *Plan) index() *planIndex {
	x := p.idx
	if x == nil || x.n > len(p.Actions) {
		x = &planIndex{ids: map[string]bool{}, byPath: map[string]*pathInfo{}, absent: map[string]bool{}, below: map[string][]int{}}
		p.idx = x
	}
	for ; x.n < len(p.Actions); x.n++ {
		x.insert(p.Actions, x.n)
	}
	return x
}

// insert records action i (already validated).
func (x *planIndex) insert(acts []Action, i int) {
	a := &acts[i]
	x.ids[a.ID] = true
	pi := x.byPath[a.Path]
	if pi == nil {
		pi = &pathInfo{first: i}
		x.byPath[a.Path] = pi
	}
	pi.last = i
	switch a.Op {
	case OpRemoveFile, OpReplaceFile, OpRemoveDir:
		pi.alone = true
	case OpTruncateFile, OpResizeFile:
		pi.sizeOps++
	}
	if r, ok := a.Changed(a.Pre.Size); ok {
		s := span{r, a.ID}
		k := sort.Search(len(pi.spans), func(j int) bool { return pi.spans[j].r.Offset > r.Offset })
		pi.spans = slices.Insert(pi.spans, k, s) // planners add in offset order: an append
	}
	for _, d := range a.Pre.AbsentDirs {
		x.absent[d] = true
	}
	for _, d := range ancestors(a.Path) {
		x.below[d] = append(x.below[d], i)
	}
}

// check validates a (its own shape already checked) against the indexed
// actions: the rules of validateSameFile for its path, those of
// validateDirs between it and every action above or below it.
func (x *planIndex) check(acts []Action, a *Action) error {
	if x.ids[a.ID] {
		return fmt.Errorf("%w: action id %q is repeated", ErrInvalidPlan, a.ID)
	}
	if pi := x.byPath[a.Path]; pi != nil {
		if err := x.checkSameFile(acts, pi, a); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidPlan, a.Path, err)
		}
	}
	if err := x.checkDirs(acts, a); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	return nil
}

func (x *planIndex) checkSameFile(acts []Action, pi *pathInfo, a *Action) error {
	p0 := acts[pi.first].Pre
	if a.Pre.Exists != p0.Exists || a.Pre.Size != p0.Size || a.Pre.MtimeNs != p0.MtimeNs {
		return fmt.Errorf("actions %s and %s record different preconditions", acts[pi.first].ID, a.ID)
	}
	switch {
	case pi.alone:
		return fmt.Errorf("%s %s must be the only action on its file", acts[pi.last].Op, acts[pi.last].ID)
	case a.Op == OpRemoveFile || a.Op == OpReplaceFile || a.Op == OpRemoveDir:
		return fmt.Errorf("%s %s must be the only action on its file", a.Op, a.ID)
	case (a.Op == OpTruncateFile || a.Op == OpResizeFile) && pi.sizeOps > 0:
		return fmt.Errorf("more than one truncate/resize")
	}
	r, ok := a.Changed(a.Pre.Size)
	if !ok {
		return nil
	}
	k := sort.Search(len(pi.spans), func(j int) bool { return pi.spans[j].r.Offset > r.Offset })
	if k > 0 && pi.spans[k-1].r.End() > r.Offset {
		return fmt.Errorf("actions %s and %s change overlapping bytes", pi.spans[k-1].id, a.ID)
	}
	if k < len(pi.spans) && r.End() > pi.spans[k].r.Offset {
		return fmt.Errorf("actions %s and %s change overlapping bytes", a.ID, pi.spans[k].id)
	}
	return nil
}

// checkDirs is validateDirs for a new action a: a against the actions
// above it (by its ancestors) and the actions below it against a (by the
// below index, only for what a adds: an op on a dir, dirs recorded absent).
func (x *planIndex) checkDirs(acts []Action, a *Action) error {
	if x.absent[a.Path] {
		return fmt.Errorf("action %s: %s is a dir the plan creates", a.ID, a.Path)
	}
	for _, d := range ancestors(a.Path) {
		if pi := x.byPath[d]; pi != nil {
			b := &acts[pi.last]
			if b.Op != OpRemoveDir {
				return fmt.Errorf("action %s: %s is below %s, which action %s changes as a file", a.ID, a.Path, d, b.ID)
			}
			if a.Op != OpRemoveFile && a.Op != OpRemoveDir {
				return fmt.Errorf("action %s (%s) is inside %s, which action %s removes", a.ID, a.Op, d, b.ID)
			}
		}
		if x.absent[d] && !slices.Contains(a.Pre.AbsentDirs, d) {
			return fmt.Errorf("action %s: parent %s is absent for another action but not for this one", a.ID, d)
		}
	}
	// a's path as a dir: every action below it must fit a's op.
	for _, i := range x.below[a.Path] {
		b := &acts[i]
		if a.Op != OpRemoveDir {
			return fmt.Errorf("action %s: %s is below %s, which action %s changes as a file", b.ID, b.Path, a.Path, a.ID)
		}
		if b.Op != OpRemoveFile && b.Op != OpRemoveDir {
			return fmt.Errorf("action %s (%s) is inside %s, which action %s removes", b.ID, b.Op, a.Path, a.ID)
		}
	}
	// dirs a records absent for the first time: nothing may target them,
	// and everything below them must record them absent too.
	for _, d := range a.Pre.AbsentDirs {
		if x.absent[d] {
			continue
		}
		if pi := x.byPath[d]; pi != nil {
			return fmt.Errorf("action %s: %s is a dir the plan creates", acts[pi.last].ID, d)
		}
		for _, i := range x.below[d] {
			if b := &acts[i]; !slices.Contains(b.Pre.AbsentDirs, d) {
				return fmt.Errorf("action %s: parent %s is absent for another action but not for this one", b.ID, d)
			}
		}
	}
	return nil
}
