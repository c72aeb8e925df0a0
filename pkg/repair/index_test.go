package repair

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIndexMatchesValidate: Add's incremental checks (planIndex) accept
// exactly the actions whose plan Validate accepts, on random sequences of
// every op over nested paths (files below files, dirs removed with files
// inside, dirs recorded absent), with overlapping and disjoint ranges.
func TestIndexMatchesValidate(t *testing.T) {
	paths := []string{"a", "a/b", "a/b/c", "a/b/d", "a/x", "e", "e/f", "e/f/g"}
	ops := []Op{OpZeroRange, OpWriteRange, OpTruncateFile, OpResizeFile, OpRemoveFile, OpReplaceFile, OpRemoveDir}
	rng := rand.New(rand.NewPCG(7, 21))
	accepted, rejected := 0, 0
	for seq := 0; seq < 3000; seq++ {
		p := &Plan{Schema: PlanSchema, DataDir: "/data", Actions: []Action{}}
		absentFor := map[string][]string{} // a file created under missing dirs: which
		for n := 0; n < 12; n++ {
			path := paths[rng.IntN(len(paths))]
			a := Action{ID: "a" + string(rune('A'+n)), Op: ops[rng.IntN(len(ops))], Path: path}
			const size = 100
			a.Pre = FileState{Exists: true, Size: size, MtimeNs: 1}
			switch a.Op {
			case OpZeroRange, OpWriteRange:
				a.Offset, a.Length = int64(rng.IntN(90)), int64(1+rng.IntN(10))
				if a.Op == OpWriteRange {
					a.Data = make([]byte, a.Length)
				}
			case OpTruncateFile, OpResizeFile:
				a.NewSize = int64(rng.IntN(size))
			case OpReplaceFile:
				a.Data = []byte("x")
				a.NewSize = 1
				if rng.IntN(2) == 0 { // creates its file, maybe under missing dirs
					a.Pre = FileState{}
					if anc := ancestors(path); len(anc) > 0 {
						k := rng.IntN(len(anc) + 1)
						a.Pre.AbsentDirs = anc[len(anc)-k:]
						if len(a.Pre.AbsentDirs) == 0 {
							a.Pre.AbsentDirs = nil
						}
						absentFor[path] = a.Pre.AbsentDirs
					}
				}
			case OpRemoveDir:
				a.Pre = FileState{Exists: true}
			}
			if r, ok := a.Changed(a.Pre.Size); ok && a.Pre.Exists {
				a.Pre.Ranges = []RangeHash{{r.Offset, r.Length, strings.Repeat("0", 64)}}
			}
			full := (&Plan{Schema: p.Schema, DataDir: p.DataDir, Actions: append(append([]Action(nil), p.Actions...), a)}).validate(false)
			inc := p.appendValid(a)
			if (full == nil) != (inc == nil) {
				t.Fatalf("sequence %d, action %d %s %s (pre %+v): Validate says %v, Add says %v\nplan so far: %+v", seq, n, a.Op, a.Path, a.Pre, full, inc, p.Actions)
			}
			if inc == nil {
				accepted++
			} else {
				rejected++
			}
		}
	}
	t.Logf("%d actions accepted, %d rejected, both ways alike", accepted, rejected)
}
