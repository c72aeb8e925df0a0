package stream

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/storectl/storectl/internal/storefile"
)

// fileName matches the names osiris gives its files (make_file_name/2:
// "~20..0B.segment" / ".index").
var fileName = regexp.MustCompile(`^([0-9]{20})\.(segment|index)$`)

// IsStreamFileName reports whether name is an osiris segment or index name.
func IsStreamFileName(name string) bool { return fileName.MatchString(name) }

// pair is one segment and its index, by their shared 20-digit name.
type pair struct {
	name    string // 20 digits
	first   uint64 // the name's number: the first chunk id
	segment string // absolute path, "" when missing
	index   string // absolute path, "" when missing
}

// dirFiles is what a stream dir holds.
type dirFiles struct {
	pairs  []pair   // sorted by name (the order osiris sorts them in)
	strays []string // absolute paths of anything else
	err    error
}

// listStreamDir sorts a stream dir's entries into pairs and strays.
func listStreamDir(dir string) dirFiles {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return dirFiles{err: err}
	}
	byName := map[string]*pair{}
	var out dirFiles
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			// A dir, FIFO, socket or device under a segment's or an
			// index's name is that file, unreadable (its open fails
			// without blocking): what it holds is unknown, not absent.
			if _, irregular := storefile.Irregular(dir, e); m == nil || !irregular {
				out.strays = append(out.strays, p)
				continue
			}
		}
		pr := byName[m[1]]
		if pr == nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			pr = &pair{name: m[1], first: n}
			byName[m[1]] = pr
		}
		if m[2] == "segment" {
			pr.segment = p
		} else {
			pr.index = p
		}
	}
	for _, pr := range byName {
		out.pairs = append(out.pairs, *pr)
	}
	sort.Slice(out.pairs, func(i, j int) bool { return out.pairs[i].name < out.pairs[j].name })
	sort.Strings(out.strays)
	return out
}

// StreamDirs lists the stream directories under a stream/ root: every
// subdirectory (a dir without osiris files is still reported, as a
// stray-free empty stream).
func StreamDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// HasStreamFiles reports whether dir directly holds osiris files.
func HasStreamFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if fileName.MatchString(e.Name()) {
			return true
		}
	}
	return false
}

// Name is what a stream dir's name says about the stream. RabbitMQ names
// the dir osiris_util:to_base64uri(VHost ++ "_" ++ Queue ++ "_" ++
// erlang:system_time()) (rabbit_stream_queue:stream_name/1): every
// character outside [A-Za-z0-9_-] became "_". The split into vhost and
// queue is certain only when exactly one known vhost (the node's
// msg_stores/vhosts/*/.vhost files) names the prefix; otherwise it is a
// guess. Either way a "_" may stand for another character (Lossy).
type Name struct {
	VHost string `json:"vhost"` // the known vhost, or the best guess
	Queue string `json:"queue"`
	// VHostFrom says where VHost comes from: "vhost-dirs" (a vhost of the
	// node with that name) or "guess".
	VHostFrom string `json:"vhost_from"`
	// Created is the stream's creation time from the dir name (native
	// units, nanoseconds on Linux), RFC 3339; "" when the name has none.
	Created string `json:"created,omitempty"`
	// Ambiguous: another split into vhost and queue is possible.
	Ambiguous bool `json:"name_ambiguous"`
	// Lossy: the name has a "_" that may stand for another character.
	Lossy      bool        `json:"name_lossy"`
	Candidates []Candidate `json:"name_candidates,omitempty"`
}

// Candidate is one possible vhost/queue split.
type Candidate struct {
	VHost string `json:"vhost"`
	Queue string `json:"queue"`
}

var tsSuffix = regexp.MustCompile(`_([0-9]{10,20})$`)

// Sanitize is osiris_util:to_base64uri/1: every character that is not
// [A-Za-z0-9_-] becomes "_".
func Sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ParseName splits a stream dir name without knowing the node's vhosts.
func ParseName(dir string) Name { return ParseNameWith(dir, nil) }

// ParseNameWith splits a stream dir name, preferring the splits whose
// vhost part is one of vhosts (sanitised as RabbitMQ does).
func ParseNameWith(dir string, vhosts []string) Name {
	base := dir
	n := Name{VHostFrom: "guess"}
	if m := tsSuffix.FindStringSubmatchIndex(base); m != nil {
		if ns, err := strconv.ParseInt(base[m[2]:m[3]], 10, 64); err == nil {
			n.Created = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		}
		base = base[:m[0]]
	} else {
		n.Ambiguous = true
	}
	var all []Candidate
	for i := 0; i < len(base); i++ {
		if base[i] != '_' {
			continue
		}
		v, q := base[:i], base[i+1:]
		if v == "" || q == "" {
			continue
		}
		if v == "_" {
			v = "/"
		}
		all = append(all, Candidate{VHost: v, Queue: q})
	}
	// The splits whose prefix is a known vhost, sanitised.
	var known []Candidate
	for _, c := range all {
		for _, vh := range vhosts {
			if Sanitize(vh) == c.VHost || vh == "/" && c.VHost == "/" {
				known = append(known, Candidate{VHost: vh, Queue: c.Queue})
			}
		}
	}
	switch {
	case len(known) == 1:
		n.VHost, n.Queue, n.VHostFrom = known[0].VHost, known[0].Queue, "vhost-dirs"
	case len(known) > 1:
		n.VHost, n.Queue, n.Ambiguous = known[0].VHost, known[0].Queue, true
		all = known
	case len(all) == 0:
		n.Queue, n.Ambiguous = base, true
	case strings.HasPrefix(base, "__"):
		// vhost "/" (the default) is by far the most common
		n.VHost, n.Queue = "/", base[2:]
	default:
		n.VHost, n.Queue = all[0].VHost, all[0].Queue
	}
	if len(known) != 1 && len(all) > 1 {
		n.Ambiguous = true
	}
	n.Lossy = strings.Contains(n.Queue, "_") || n.VHostFrom == "guess" && n.VHost != "/" && strings.Contains(n.VHost, "_")
	if n.Ambiguous {
		n.Candidates = all
	}
	return n
}

// VHostNames reads the vhost names of a node dir: the .vhost file of each
// msg_stores/vhosts/<hash>/ (RabbitMQ 3.7+).
func VHostNames(node string) []string {
	m, _ := filepath.Glob(filepath.Join(node, "msg_stores", "vhosts", "*", ".vhost"))
	var out []string
	for _, p := range m {
		if b, err := storefile.ReadFileLimit(p, 1023); err == nil && len(b) > 0 {
			out = append(out, strings.TrimRight(string(b), "\n"))
		}
	}
	sort.Strings(out)
	return out
}
