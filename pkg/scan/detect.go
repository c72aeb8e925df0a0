package scan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
)

// Store kinds.
const (
	RocketMQ = "rocketmq"
	RabbitMQ = "rabbitmq"
)

// What a path given on the command line turned out to be.
const (
	TargetRocketStore    = "rocketmq-store"          // store root: commitlog/, consumequeue/, ...
	TargetRocketLogDir   = "rocketmq-commitlog-dir"  // the commitlog directory itself
	TargetRocketLogFile  = "rocketmq-commitlog-file" // one commitlog file
	TargetRabbitNode     = "rabbitmq-node"           // node (mnesia) dir holding msg_stores/vhosts
	TargetRabbitVHost    = "rabbitmq-vhost"          // one vhost dir
	TargetRabbitStoreDir = "rabbitmq-store-dir"      // msg_store_persistent/ (or transient)
	TargetRabbitRDQFile  = "rabbitmq-rdq-file"       // one .rdq file
	// Streams (osiris): the stream/ dir, one stream dir, one file.
	TargetRabbitStreamRoot = "rabbitmq-stream-root" // a node's stream/ dir
	TargetRabbitStream     = "rabbitmq-stream-dir"  // one stream dir (.segment/.index files)
	TargetRabbitStreamFile = "rabbitmq-stream-file" // one .segment or .index file
	// Quorum queues (ra): a quorum/ or coordination/ dir, one ra system dir.
	TargetRabbitRaRoot   = "rabbitmq-ra-root"   // a node's quorum/ or coordination/ dir
	TargetRabbitRaSystem = "rabbitmq-ra-system" // one ra system dir (quorum/<node>/: .wal files, replica dirs)
)

// ErrNotStore means the path is not a store layout storectl knows.
var ErrNotStore = errors.New("not a RocketMQ or RabbitMQ store")

// Target is a detected store location. Detection never guesses
// silently: Evidence lists the files that decided it.
type Target struct {
	Store string // RocketMQ or RabbitMQ
	Kind  string // one of the Target* constants
	// Root is the data dir: reported paths are relative to it.
	Root string
	// Path is the absolute path that was given.
	Path string
	// CommitLogDir is the RocketMQ commitlog directory (all kinds but a file).
	CommitLogDir string
	// VHostDirs are the RabbitMQ vhost directories to scan.
	VHostDirs []string
	// StoreDirs are RabbitMQ message store dirs to scan when no vhost dir is known.
	StoreDirs []string
	// Files are single files to scan (commitlog file, .rdq, or an osiris
	// .segment/.index).
	Files []string
	// StreamRoots are stream/ dirs (every stream dir in them is scanned);
	// StreamDirs single stream dirs.
	StreamRoots []string
	StreamDirs  []string
	// RaDirs are ra system dirs (quorum/<node>/, coordination/<node>/).
	RaDirs   []string
	Evidence []string
}

var streamFileName = regexp.MustCompile(`^[0-9]{20}\.(segment|index)$`)

// IsStreamFileName reports whether name is an osiris segment or index name.
func IsStreamFileName(name string) bool { return streamFileName.MatchString(name) }

// streamRootOf is the data dir of a stream dir: the node dir above its
// stream/ parent, else the parent.
func streamRootOf(streamDir string) string {
	parent := filepath.Dir(streamDir)
	if filepath.Base(parent) == "stream" {
		return filepath.Dir(parent)
	}
	return parent
}

// hasStreamDirs reports whether d holds stream dirs (dirs with osiris files).
func hasStreamDirs(d string) bool {
	for _, s := range subdirs(d) {
		if len(listMatching(s, IsStreamFileName)) > 0 {
			return true
		}
	}
	return false
}

var commitLogName = regexp.MustCompile(`^[0-9]{20}$`)

// IsCommitLogName reports whether name is a 20-digit mapped-file name.
func IsCommitLogName(name string) bool { return commitLogName.MatchString(name) }

func isDir(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
func isFile(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }

// Detect works out what path is. force ("", "rocketmq" or "rabbitmq")
// restricts the store kind (--store). A missing path is an *os.PathError;
// an unknown layout wraps ErrNotStore.
func Detect(path, force string) (Target, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Target{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return Target{}, err
	}
	var cands []Target
	if st.Mode().IsRegular() {
		cands = detectFile(abs)
		if e := notDataFile(path, abs); e != nil && !claimed(cands) {
			return Target{}, e
		}
	} else if st.IsDir() {
		cands = detectDir(abs)
	} else {
		// A FIFO, socket or device is never read (an open could block or
		// act on a device): say what it is, not only that it is no store.
		return Target{}, fmt.Errorf("%s is %s, not a store file or directory: %w", path, storefile.TypeName(st.Mode()), ErrNotStore)
	}
	for _, c := range cands {
		if force == "" || force == c.Store {
			c.Path = abs
			return c, nil
		}
	}
	if force != "" && len(cands) > 0 {
		return Target{}, fmt.Errorf("%s: looks like a %s %s, not --store %s: %w", path, cands[0].Store, cands[0].Kind, force, ErrNotStore)
	}
	return Target{}, fmt.Errorf("%s: %w (expected a RocketMQ store root, commitlog dir or file, or a RabbitMQ node, vhost, message-store or stream dir, .rdq or osiris .segment/.index file)", path, ErrNotStore)
}

func detectFile(abs string) []Target {
	dir, name := filepath.Split(abs)
	dir = filepath.Clean(dir)
	var out []Target
	if IsCommitLogName(name) {
		root := dir
		if filepath.Base(dir) == "commitlog" {
			root = filepath.Dir(dir)
		}
		out = append(out, Target{Store: RocketMQ, Kind: TargetRocketLogFile, Root: root, CommitLogDir: dir, Files: []string{abs},
			Evidence: []string{"20-digit commitlog file name " + name}})
	}
	if IsStreamFileName(name) {
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitStreamFile, Root: streamRootOf(dir), Files: []string{abs},
			Evidence: []string{"osiris file name " + name}})
	}
	if strings.HasSuffix(name, ".rdq") {
		root := dir
		if v := filepath.Dir(dir); isRabbitVHost(v) {
			root = v
		}
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitRDQFile, Root: root, Files: []string{abs},
			Evidence: []string{".rdq file " + name}})
	}
	return out
}

func isRabbitVHost(d string) bool {
	return isDir(filepath.Join(d, "msg_store_persistent")) || (isDir(filepath.Join(d, "queues")) && isFile(filepath.Join(d, ".vhost")))
}

func detectDir(abs string) []Target {
	var out []Target
	// RocketMQ store root.
	if dl := dledgerData(abs); isDir(filepath.Join(abs, "commitlog")) || len(dl) > 0 {
		var ev []string
		if isDir(filepath.Join(abs, "commitlog")) {
			ev = append(ev, "commitlog/")
		}
		ev = append(ev, dl...)
		for _, f := range []string{"checkpoint", "consumequeue", "index", "abort", "lock", "config/topics.json"} {
			if _, err := os.Stat(filepath.Join(abs, f)); err == nil {
				ev = append(ev, f)
			}
		}
		out = append(out, Target{Store: RocketMQ, Kind: TargetRocketStore, Root: abs, CommitLogDir: filepath.Join(abs, "commitlog"), Evidence: ev})
	}
	// RocketMQ commitlog dir.
	if names := listMatching(abs, IsCommitLogName); len(names) > 0 && !isDir(filepath.Join(abs, "commitlog")) {
		root := abs
		if filepath.Base(abs) == "commitlog" {
			root = filepath.Dir(abs)
		}
		out = append(out, Target{Store: RocketMQ, Kind: TargetRocketLogDir, Root: root, CommitLogDir: abs,
			Evidence: []string{fmt.Sprintf("%d file(s) with 20-digit names, first %s", len(names), names[0])}})
	}
	// RabbitMQ node dir, or a mnesia base holding exactly one node dir.
	if vh := filepath.Join(abs, "msg_stores", "vhosts"); isDir(vh) {
		t := Target{Store: RabbitMQ, Kind: TargetRabbitNode, Root: abs, VHostDirs: subdirs(vh), Evidence: []string{"msg_stores/vhosts/"}}
		out = append(out, withStreams(t, abs))
	} else if nodes := nodeDirsIn(abs); len(nodes) == 1 {
		vh := filepath.Join(nodes[0], "msg_stores", "vhosts")
		t := Target{Store: RabbitMQ, Kind: TargetRabbitNode, Root: nodes[0], VHostDirs: subdirs(vh),
			Evidence: []string{filepath.Base(nodes[0]) + "/msg_stores/vhosts/"}}
		out = append(out, withStreams(t, nodes[0]))
	} else if sr := filepath.Join(abs, "stream"); isDir(sr) && hasStreamDirs(sr) {
		// a node dir holding streams only
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitNode, Root: abs, StreamRoots: []string{sr}, Evidence: []string{"stream/ with osiris files"}})
	}
	// A quorum/ or coordination/ dir, one ra system dir.
	if b := filepath.Base(abs); (b == "quorum" || b == "coordination") && len(raSystems(abs)) > 0 {
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitRaRoot, Root: filepath.Dir(abs), RaDirs: raSystems(abs),
			Evidence: []string{b + "/ dir of a node"}})
	}
	if isRaSystem(abs) {
		root := abs
		if b := filepath.Base(filepath.Dir(abs)); b == "quorum" || b == "coordination" {
			root = filepath.Dir(filepath.Dir(abs))
		}
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitRaSystem, Root: root, RaDirs: []string{abs},
			Evidence: []string{"ra system dir (.wal, names.dets)"}})
	}
	// A stream/ dir, one stream dir.
	if filepath.Base(abs) == "stream" && hasStreamDirs(abs) || filepath.Base(abs) == "stream" && isDir(filepath.Join(filepath.Dir(abs), "msg_stores")) {
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitStreamRoot, Root: filepath.Dir(abs), StreamRoots: []string{abs},
			Evidence: []string{"stream/ dir of a node"}})
	}
	if names := listMatching(abs, IsStreamFileName); len(names) > 0 {
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitStream, Root: streamRootOf(abs), StreamDirs: []string{abs},
			Evidence: []string{fmt.Sprintf("%d osiris file(s), first %s", len(names), names[0])}})
	}
	if isRabbitVHost(abs) {
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitVHost, Root: abs, VHostDirs: []string{abs}, Evidence: vhostEvidence(abs)})
	}
	if rdqs := listMatching(abs, func(n string) bool { return strings.HasSuffix(n, ".rdq") }); len(rdqs) > 0 || strings.HasPrefix(filepath.Base(abs), "msg_store_") {
		root := abs
		var vhosts []string
		if v := filepath.Dir(abs); isRabbitVHost(v) {
			root = v
		}
		out = append(out, Target{Store: RabbitMQ, Kind: TargetRabbitStoreDir, Root: root, StoreDirs: []string{abs}, VHostDirs: vhosts,
			Evidence: []string{fmt.Sprintf("%d .rdq file(s) in %s", len(rdqs), filepath.Base(abs))}})
	}
	return out
}

// dledgerData lists the dledger-<id>/data/ dirs of a RocketMQ store root
// in DLedger mode (enableDLegerCommitLog: they take commitlog/'s place).
func dledgerData(d string) []string {
	m, _ := filepath.Glob(filepath.Join(d, "dledger-*", "data"))
	var out []string
	for _, p := range m {
		if isDir(p) {
			out = append(out, filepath.Base(filepath.Dir(p))+"/data/")
		}
	}
	return out
}

// withStreams adds a node dir's stream/ (and its ra systems) to t.
func withStreams(t Target, node string) Target {
	if sr := filepath.Join(node, "stream"); isDir(sr) {
		t.StreamRoots = []string{sr}
		t.Evidence = append(t.Evidence, "stream/")
	}
	return withRa(t, node)
}

// withRa adds a node dir's ra system dirs (quorum/<node>/,
// coordination/<node>/) to t.
func withRa(t Target, node string) Target {
	for _, sys := range []string{"quorum", "coordination"} {
		d := filepath.Join(node, sys)
		if ds := raSystems(d); len(ds) > 0 {
			t.RaDirs = append(t.RaDirs, ds...)
			t.Evidence = append(t.Evidence, sys+"/")
		}
	}
	return t
}

// raSystems lists the ra system dirs in a quorum/ or coordination/ dir.
func raSystems(d string) []string {
	var out []string
	for _, s := range subdirs(d) {
		if isRaSystem(s) {
			out = append(out, s)
		}
	}
	// a FIFO, socket or device there is in the place of a node's system
	// dir: that dir, unreadable (the quorum scanner says so), not nothing
	if ents, err := storefile.ReadDir(d); err == nil {
		for _, e := range ents {
			if e.Type()&(os.ModeNamedPipe|os.ModeSocket|os.ModeDevice|os.ModeCharDevice) != 0 {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out
}

// isRaSystem: a dir with a .wal file or ra's names.dets/meta.dets.
func isRaSystem(d string) bool {
	if len(listMatching(d, func(n string) bool { return strings.HasSuffix(n, ".wal") })) > 0 {
		return true
	}
	return isFile(filepath.Join(d, "names.dets")) || isFile(filepath.Join(d, "meta.dets"))
}

func vhostEvidence(d string) []string {
	var ev []string
	for _, f := range []string{".vhost", "msg_store_persistent/", "queues/", "recovery.dets"} {
		if _, err := os.Stat(filepath.Join(d, strings.TrimSuffix(f, "/"))); err == nil {
			ev = append(ev, f)
		}
	}
	return ev
}

func nodeDirsIn(d string) []string {
	var out []string
	for _, s := range subdirs(d) {
		if isDir(filepath.Join(s, "msg_stores", "vhosts")) {
			out = append(out, s)
		}
	}
	return out
}

func subdirs(d string) []string {
	ents, err := storefile.ReadDir(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

func listMatching(d string, ok func(string) bool) []string {
	ents, err := storefile.ReadDir(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if ok(e.Name()) && storefile.IsRegular(d, e) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// Rel returns p relative to root with forward slashes, or p itself when
// it is not under root.
func Rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(r)
}
