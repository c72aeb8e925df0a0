package repair

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxStageDirs bounds the names NewStageDir tries: a thousand stale
// stages beside one data dir means something else is wrong.
const maxStageDirs = 1000

// NewStageDir creates a fresh staging dir beside dataDir, named
// .<base>.storectl-stage-<n> with the first free n, mode 0700. Planners
// stage replacement files there: beside the data dir (normally the same
// filesystem, so the staged files are as durable as the store and the
// rename is atomic), never inside it, where the broker would load stray
// files. RemoveStage removes it.
func NewStageDir(dataDir string) (string, error) {
	parent, base := filepath.Dir(dataDir), filepath.Base(dataDir)
	for n := 1; n < maxStageDirs; n++ {
		p := filepath.Join(parent, fmt.Sprintf(".%s.storectl-stage-%d", base, n))
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return p, nil
	}
	return "", fmt.Errorf("no free stage dir name beside %s", dataDir)
}

// SameDevice reports whether a and b are on one filesystem (a rename
// from a stage dir to the data dir is then atomic). It is false when
// either cannot be stat'ed.
func SameDevice(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	if err1 != nil || err2 != nil {
		return false
	}
	sa, ok1 := fa.Sys().(*syscall.Stat_t)
	sb, ok2 := fb.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev
}

// StageDirs lists the stage dirs beside dataDir (NewStageDir's names):
// normally none once a writer has exited; a killed one leaves its stage
// (verify lists them). A saved plan (--plan-out) may still point into one.
func StageDirs(dataDir string) ([]string, error) {
	parent, base := filepath.Dir(dataDir), filepath.Base(dataDir)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	prefix := "." + base + ".storectl-stage-"
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.IsDir() && strings.HasPrefix(n, prefix) && strings.Trim(n[len(prefix):], "0123456789") == "" {
			out = append(out, filepath.Join(parent, n))
		}
	}
	return out, nil
}
