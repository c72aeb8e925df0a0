package stream

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
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
			out.strays = append(out.strays, p)
			continue
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
// character outside [A-Za-z0-9_-] became "_", so the split into vhost and
// queue is a guess whenever more than one "_" could be the separator, and
// every "_" may stand for another character.
type Name struct {
	VHost string `json:"vhost"` // best guess ("/" for a leading "_")
	Queue string `json:"queue"` // best guess
	// Created is the stream's creation time from the dir name (native
	// units, nanoseconds on Linux), RFC 3339; "" when the name has none.
	Created string `json:"created,omitempty"`
	// Ambiguous: another split is possible, or a "_" may have been
	// another character.
	Ambiguous  bool        `json:"name_ambiguous"`
	Candidates []Candidate `json:"name_candidates,omitempty"`
}

// Candidate is one possible vhost/queue split.
type Candidate struct {
	VHost string `json:"vhost"`
	Queue string `json:"queue"`
}

var tsSuffix = regexp.MustCompile(`_([0-9]{10,20})$`)

// ParseName splits a stream dir name.
func ParseName(dir string) Name {
	base := dir
	var n Name
	if m := tsSuffix.FindStringSubmatchIndex(base); m != nil {
		if ns, err := strconv.ParseInt(base[m[2]:m[3]], 10, 64); err == nil {
			n.Created = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		}
		base = base[:m[0]]
	} else {
		n.Ambiguous = true
	}
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
		n.Candidates = append(n.Candidates, Candidate{VHost: v, Queue: q})
	}
	switch {
	case len(n.Candidates) == 0:
		n.Queue, n.Ambiguous = base, true
	case strings.HasPrefix(base, "__"):
		// vhost "/" (the default) is by far the most common
		n.VHost, n.Queue = "/", base[2:]
	default:
		n.VHost, n.Queue = n.Candidates[0].VHost, n.Candidates[0].Queue
	}
	if len(n.Candidates) > 1 {
		n.Ambiguous = true
	}
	if strings.Contains(strings.TrimPrefix(base, "__"), "_") {
		n.Ambiguous = true // a "_" may be a sanitised character
	}
	if !n.Ambiguous {
		n.Candidates = nil
	}
	return n
}
