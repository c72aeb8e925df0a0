package live

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// procRoot is where the proc filesystem is mounted.
const procRoot = "/proc"

// maxMapsLine bounds one line of /proc/<pid>/maps: a path is at most
// PATH_MAX (4096) bytes plus the fixed columns.
const maxMapsLine = 8192

// Holder is a process with a file of the scanned dir open.
type Holder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"` // /proc/<pid>/comm
	Path    string `json:"path"`    // the file, symlinks resolved
	Via     string `json:"via"`     // "fd" (an open descriptor) or "mmap" (a mapping)
}

// OpenBy lists the processes (other than this one) that have a file under
// dir open, through a descriptor (/proc/<pid>/fd) or a mapping
// (/proc/<pid>/maps: RocketMQ maps its commitlog). Processes whose /proc
// entries this user may not read are skipped, not an error (Detect reports
// how many there were). It never blocks on the files themselves.
func OpenBy(dir string) ([]Holder, error) {
	hs, _, err := openBy(dir)
	return hs, err
}

func openBy(dir string) ([]Holder, int, error) {
	real, err := realPath(dir)
	if err != nil {
		return nil, 0, err
	}
	prefix := strings.TrimSuffix(real, "/") + "/"
	return scanProc(procRoot, func(p string) bool { return p == real || strings.HasPrefix(p, prefix) })
}

// realPath is path made absolute with symlinks resolved, as /proc shows it.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// scanProc walks root/<pid>/{fd,maps} and returns the holders of the files
// match accepts, sorted by pid and path, and the number of processes it was
// not allowed to inspect. Only the listing of root itself can fail.
func scanProc(root string, match func(path string) bool) ([]Holder, int, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, 0, err
	}
	self := os.Getpid()
	seen := map[Holder]bool{}
	var out []Holder
	denied := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		pdir := filepath.Join(root, e.Name())
		paths, err := fdTargets(pdir)
		if errors.Is(err, fs.ErrPermission) {
			denied++
		}
		mapped, _ := mappedFiles(pdir) // readable whenever fd/ is
		var found []Holder
		for _, p := range paths {
			if match(p) {
				found = append(found, Holder{PID: pid, Path: p, Via: "fd"})
			}
		}
		for _, p := range mapped {
			if match(p) {
				found = append(found, Holder{PID: pid, Path: p, Via: "mmap"})
			}
		}
		if len(found) == 0 {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(pdir, "comm"))
		for _, h := range found {
			h.Command = strings.TrimSpace(string(comm))
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Via < out[j].Via
	})
	return out, denied, nil
}

// fdTargets reads the symlinks in pdir/fd. A descriptor closed while we look
// is skipped.
func fdTargets(pdir string) ([]string, error) {
	fds, err := os.ReadDir(filepath.Join(pdir, "fd"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(pdir, "fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, "/") {
			continue // gone, or socket:[…], pipe:[…], anon_inode:…
		}
		out = append(out, strings.TrimSuffix(target, " (deleted)"))
	}
	return out, nil
}

// mappedFiles returns the file paths mapped by the process, from pdir/maps
// (the sixth column onwards; lines longer than maxMapsLine are skipped).
func mappedFiles(pdir string) ([]string, error) {
	f, err := os.Open(filepath.Join(pdir, "maps"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxMapsLine)
	seen := map[string]bool{}
	var out []string
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 || strings.Count(line[:i], " ") < 5 {
			continue // anonymous or [heap]/[stack]
		}
		p := strings.TrimSuffix(line[i:], " (deleted)")
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, sc.Err()
}
