package repair

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
)

// validID keeps action ids usable as backup file names.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks the plan's shape without touching the disk: schema, an
// absolute data dir, unique ids, well-formed actions, and that actions on
// one file change disjoint byte ranges of it (so the pre-images taken before
// any write restore it exactly), with at most one size change per file,
// remove/replace/remove-dir alone on their path, and paths that nest
// consistently (validateDirs).
func (p *Plan) Validate() error { return p.validate(false) }

// validate is Validate; unpinned allows a staged source without its hash
// (a PrintOnly plan while it is built).
func (p *Plan) validate(unpinned bool) error {
	if p.Schema != PlanSchema {
		return fmt.Errorf("%w: schema %q, want %q", ErrInvalidPlan, p.Schema, PlanSchema)
	}
	if !filepath.IsAbs(p.DataDir) {
		return fmt.Errorf("%w: data_dir %q is not absolute", ErrInvalidPlan, p.DataDir)
	}
	ids := map[string]bool{}
	byPath := map[string][]*Action{}
	for i := range p.Actions {
		a := &p.Actions[i]
		if !validID.MatchString(a.ID) || ids[a.ID] {
			return fmt.Errorf("%w: action id %q is empty, malformed or repeated", ErrInvalidPlan, a.ID)
		}
		ids[a.ID] = true
		if err := a.validate(unpinned); err != nil {
			return fmt.Errorf("%w: action %s (%s %s): %v", ErrInvalidPlan, a.ID, a.Op, a.Path, err)
		}
		byPath[a.Path] = append(byPath[a.Path], a)
	}
	for path, as := range byPath {
		if err := validateSameFile(as); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidPlan, path, err)
		}
	}
	if err := validateDirs(p.Actions); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	return nil
}

func (a *Action) validate(unpinned bool) error {
	if !cleanRel(a.Path) {
		return fmt.Errorf("path is not a clean relative path inside the data dir")
	}
	pre := a.Pre
	if a.Op != OpReplaceFile && !pre.Exists {
		return fmt.Errorf("file or dir does not exist")
	}
	if err := a.validateAbsentDirs(); err != nil {
		return err
	}
	if pre.Size < 0 || pre.Size > MaxNewSize*4 {
		return fmt.Errorf("precondition size %d out of range", pre.Size)
	}
	switch a.Op {
	case OpZeroRange, OpWriteRange:
		if a.Offset < 0 || a.Length <= 0 || a.Offset+a.Length < a.Offset || a.Offset+a.Length > pre.Size {
			return fmt.Errorf("range %d+%d is empty or outside the file (%d bytes)", a.Offset, a.Length, pre.Size)
		}
	case OpTruncateFile:
		if a.NewSize < 0 || a.NewSize > pre.Size {
			return fmt.Errorf("new size %d not in [0, %d]", a.NewSize, pre.Size)
		}
	case OpResizeFile:
		if a.NewSize < 0 || a.NewSize > MaxNewSize {
			return fmt.Errorf("new size %d not in [0, MaxNewSize]", a.NewSize)
		}
	case OpRemoveFile:
	case OpRemoveDir:
		if a.Offset != 0 || a.Length != 0 || a.NewSize != 0 || pre.Size != 0 || pre.MtimeNs != 0 || pre.SHA256 != "" || len(pre.Ranges) > 0 {
			return fmt.Errorf("remove-dir takes no range, size or file precondition")
		}
	case OpReplaceFile:
		if a.NewSize < 0 || a.NewSize > MaxNewSize {
			return fmt.Errorf("new size %d not in [0, MaxNewSize]", a.NewSize)
		}
	default:
		return fmt.Errorf("unknown op %q", a.Op)
	}
	if err := a.validateContent(unpinned); err != nil {
		return err
	}
	if r, ok := a.Changed(pre.Size); ok && pre.Exists && !hasRange(pre, r) {
		return fmt.Errorf("precondition has no sha256 of the changed range %d+%d", r.Offset, r.Length)
	}
	return nil
}

// validateContent checks Data/Source: required (exactly one) for
// write-range and replace-file, forbidden elsewhere.
func (a *Action) validateContent(unpinned bool) error {
	wants := a.Op == OpWriteRange || a.Op == OpReplaceFile
	has := len(a.Data) > 0 || a.Source != ""
	switch {
	case len(a.Data) > 0 && a.Source != "":
		return fmt.Errorf("both data and source given")
	case len(a.Data) > MaxInlineData:
		return fmt.Errorf("inline data of %d bytes exceeds MaxInlineData; stage it in a file", len(a.Data))
	case !wants && has:
		return fmt.Errorf("op takes no content")
	case a.Source != "" && (!filepath.IsAbs(a.Source) || (a.SourceSHA256 == "" && !unpinned)):
		return fmt.Errorf("source must be an absolute path pinned by source_sha256")
	case a.Op == OpWriteRange && !has:
		return fmt.Errorf("write-range without content")
	case a.Op == OpWriteRange && len(a.Data) > 0 && int64(len(a.Data)) != a.Length:
		return fmt.Errorf("data is %d bytes, length is %d", len(a.Data), a.Length)
	case a.Op == OpReplaceFile && a.Source == "" && int64(len(a.Data)) != a.NewSize:
		return fmt.Errorf("data is %d bytes, new_size is %d", len(a.Data), a.NewSize)
	}
	return nil
}

func hasRange(st FileState, r Range) bool {
	for _, h := range st.Ranges {
		if h.Offset == r.Offset && h.Length == r.Length && h.SHA256 != "" {
			return true
		}
	}
	return false
}

// validateSameFile checks the actions that share one path.
func validateSameFile(as []*Action) error {
	type span struct {
		r  Range
		id string
	}
	var spans []span
	sizeOps := 0
	for _, a := range as {
		p0 := as[0].Pre
		if a.Pre.Exists != p0.Exists || a.Pre.Size != p0.Size || a.Pre.MtimeNs != p0.MtimeNs {
			return fmt.Errorf("actions %s and %s record different preconditions", as[0].ID, a.ID)
		}
		switch a.Op {
		case OpRemoveFile, OpReplaceFile, OpRemoveDir:
			if len(as) > 1 {
				return fmt.Errorf("%s %s must be the only action on its file", a.Op, a.ID)
			}
		case OpTruncateFile, OpResizeFile:
			sizeOps++
		}
		if r, ok := a.Changed(a.Pre.Size); ok {
			spans = append(spans, span{r, a.ID})
		}
	}
	if sizeOps > 1 {
		return fmt.Errorf("more than one truncate/resize")
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].r.Offset < spans[j].r.Offset })
	for i := 1; i < len(spans); i++ {
		if spans[i].r.Offset < spans[i-1].r.End() {
			return fmt.Errorf("actions %s and %s change overlapping bytes", spans[i-1].id, spans[i].id)
		}
	}
	return nil
}
