package scan

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Component is one instance of a registry component in a data dir: the
// `components` entries of the run record.
type Component struct {
	Name string `json:"name"` // a Components key
	// Path is where the component's files are, relative to the data dir
	// ("." = the data dir itself). Two components can share a path
	// (metadata files sit beside the stores they describe).
	Path  string `json:"path"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"` // sum of the regular files' sizes
	// Checked: the command ran the scanner that reads this component.
	Checked bool `json:"checked"`
	// HoldsMessages: the component's kind holds messages and at least one
	// of its files is larger than an empty file of its format (a 5-byte
	// ra WAL with only its header holds nothing).
	HoldsMessages bool   `json:"holds_messages"`
	ReadBy        string `json:"read_by,omitempty"` // the scanner that reads it, when there is one
	What          string `json:"what"`
	// Examples names a few of its files (unrecognised files only).
	Examples []string `json:"examples,omitempty"`
	// Root is the data dir Path is relative to, when a run has several
	// targets.
	Root string `json:"root,omitempty"`
}

// maxExamples bounds Component.Examples.
const maxExamples = 10

// Inventory is every file of a target, by component.
type Inventory struct {
	Store      string
	Root       string // the data dir component paths are relative to
	Components []Component
	// Errors are the directories that could not be listed: what is in
	// them is not known, so the run is incomplete.
	Errors []string
}

// Placement is where one file belongs: its component and that
// component's path, and whether its bytes count as messages.
type Placement struct {
	Name     string
	Path     string // component path, relative to the data dir
	Messages bool   // the file can hold messages (HoldsMessages when larger than Empty)
	Empty    int64  // the size of an empty file of its format (a header)
}

// TakeInventory walks everything t.Path holds (without following
// symlinks) and puts every file into exactly one component. It never
// fails: a directory it cannot list goes to Errors.
func TakeInventory(t Target) *Inventory {
	inv := &Inventory{Store: t.Store, Root: t.Root}
	idx := map[[2]string]int{}
	add := func(rel string, d fs.DirEntry) {
		p := Classify(t, rel)
		k := [2]string{p.Name, p.Path}
		i, ok := idx[k]
		if !ok {
			spec := Components[p.Name]
			i = len(inv.Components)
			idx[k] = i
			inv.Components = append(inv.Components, Component{Name: p.Name, Path: p.Path, ReadBy: spec.ReadBy, What: spec.What})
		}
		c := &inv.Components[i]
		c.Files++
		var size int64
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size = fi.Size()
			}
		}
		c.Bytes += size
		if p.Messages && Components[p.Name].Messages && size > p.Empty {
			c.HoldsMessages = true
		}
		if strings.HasSuffix(p.Name, ".unrecognised") && len(c.Examples) < maxExamples {
			c.Examples = append(c.Examples, rel)
		}
	}
	start := t.Path
	if start == "" {
		start = t.Root
	}
	st, err := os.Lstat(start)
	if err != nil {
		inv.Errors = append(inv.Errors, fmt.Sprintf("inventory: %v", err))
		return inv
	}
	if !st.IsDir() {
		add(relTo(t.Root, start), fs.FileInfoToDirEntry(st))
		inv.sort()
		return inv
	}
	_ = filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			inv.Errors = append(inv.Errors, fmt.Sprintf("inventory: cannot list %s: %v", relTo(t.Root, p), errText(err)))
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		add(relTo(t.Root, p), d)
		return nil
	})
	inv.sort()
	return inv
}

// errText is err without the path a *fs.PathError repeats.
func errText(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

func (inv *Inventory) sort() {
	sort.Slice(inv.Components, func(i, j int) bool {
		a, b := inv.Components[i], inv.Components[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Name < b.Name
	})
}

// relTo is p relative to root with forward slashes ("." for root
// itself; "../x" above it).
func relTo(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return filepath.ToSlash(p)
	}
	return filepath.ToSlash(r)
}

// Check marks the components whose scanner command runs as checked.
func (inv *Inventory) Check(command string) {
	for i := range inv.Components {
		c := &inv.Components[i]
		c.Checked = c.ReadBy != "" && Reads(command, c.ReadBy)
	}
}

// Findings are the coverage findings: one per component that was not
// checked, a warning when it holds messages, info otherwise.
func (inv *Inventory) Findings() []Finding {
	var out []Finding
	for _, c := range inv.Components {
		if c.Checked {
			continue
		}
		where := inv.where(c.Path)
		size := fmt.Sprintf("%d file(s), %s", c.Files, humanBytes(c.Bytes))
		sev := Info
		var msg string
		switch {
		case c.HoldsMessages:
			sev = Warning
			msg = fmt.Sprintf("%s (%s) was not read: %s in %d file(s) that hold messages; the verdict does not cover them", where, c.What, humanBytes(c.Bytes), c.Files)
		case strings.HasSuffix(c.Name, ".unrecognised"):
			msg = fmt.Sprintf("files storectl does not recognise were not read (%s): %s", size, strings.Join(c.Examples, ", "))
			if c.Files > len(c.Examples) {
				msg += ", ..."
			}
		case Components[c.Name].Messages:
			msg = fmt.Sprintf("%s (%s) was not read: %s, empty of messages", where, c.What, size)
		default:
			msg = fmt.Sprintf("%s (%s) was not read: %s, no messages", where, c.What, size)
		}
		out = append(out, Finding{Code: UncheckedCode(inv.Store), Severity: sev, Path: c.Path, Length: c.Bytes, Repair: RepairNone,
			Message: msg, Details: map[string]any{"component": c.Name, "files": c.Files, "bytes": c.Bytes, "holds_messages": c.HoldsMessages}})
	}
	return out
}

// where writes a component path for people: "quorum/", "checkpoint",
// "the data dir".
func (inv *Inventory) where(p string) string {
	if p == "." || p == "" {
		return "the data dir"
	}
	if st, err := os.Stat(filepath.Join(inv.Root, filepath.FromSlash(p))); err == nil && st.IsDir() {
		return p + "/"
	}
	return p
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

// Classify says which component the file at rel (relative to t.Root,
// forward slashes) belongs to. Every path gets exactly one answer.
func Classify(t Target, rel string) Placement {
	if t.Store == RocketMQ {
		return classifyRocket(t, rel)
	}
	return classifyRabbit(t, rel)
}

// The RabbitMQ layout (docs/coverage.md): a node dir holds
// msg_stores/vhosts/<vhost>/{msg_store_persistent,msg_store_transient,queues}/,
// quorum/, stream/, coordination/, and mnesia's tables and logs.
func classifyRabbit(t Target, rel string) Placement {
	segs := strings.Split(rel, "/")
	base := segs[len(segs)-1]
	// The data dir itself can be a message store or a queues dir.
	all := append([]string{filepath.Base(t.Root)}, segs...)
	dirOf := func(i int) string { // component path for all[:i+1]
		if i == 0 {
			return "."
		}
		return path.Join(all[1 : i+1]...)
	}
	if strings.HasSuffix(base, ".dets") {
		return Placement{Name: RabbitMetadata, Path: "."}
	}
	if segs[0] == ".." {
		return rabbitTopLevel(base)
	}
	if len(segs) > 1 {
		switch segs[0] {
		case "quorum":
			return Placement{Name: RabbitQuorum, Path: "quorum", Messages: quorumMessages(base), Empty: quorumEmpty(base)}
		case "stream":
			return Placement{Name: RabbitStream, Path: "stream", Messages: true, Empty: streamEmpty(base)}
		case "coordination":
			return Placement{Name: RabbitCoordination, Path: "coordination"}
		case "khepri":
			return Placement{Name: RabbitMetadata, Path: "."}
		}
	}
	for i := len(all) - 2; i >= 0; i-- { // the innermost store or queues dir above the file
		switch all[i] {
		case "msg_store_persistent", "msg_store_transient":
			return Placement{Name: RabbitMsgStore, Path: dirOf(i), Messages: strings.HasSuffix(base, ".rdq")}
		case "queues":
			return Placement{Name: RabbitQueueIndex, Path: dirOf(i), Messages: base != ".queue_name"}
		}
	}
	if strings.HasSuffix(base, ".rdq") {
		return Placement{Name: RabbitMsgStore, Path: path.Dir(rel), Messages: true}
	}
	return rabbitTopLevel(base)
}

// rabbitTopLevel places a file that is in no store, queues or ra dir.
func rabbitTopLevel(base string) Placement {
	switch base {
	case ".vhost", ".config", "schema_version", "cluster_nodes.config", "nodes_running_at_shutdown",
		"rabbit_serial", "node-type.txt", "quorum_queues_dir_name", "coordination_dir_name":
		return Placement{Name: RabbitMetadata, Path: "."}
	}
	switch path.Ext(base) {
	case ".DCD", ".DCL", ".DAT", ".LOG", ".BUP", ".TMP", ".pid":
		return Placement{Name: RabbitMetadata, Path: "."}
	}
	if strings.HasSuffix(base, "-feature_flags") {
		return Placement{Name: RabbitMetadata, Path: "."}
	}
	return Placement{Name: RabbitUnrecognised, Path: "."}
}

// quorumMessages: which files of quorum/ carry log entries or snapshots
// (config, the per-server `config` text, is not).
func quorumMessages(base string) bool {
	return strings.HasSuffix(base, ".wal") || strings.HasSuffix(base, ".segment") || base == "snapshot.dat"
}

// quorumEmpty: an ra WAL is "RAWA" + version byte before its first record.
func quorumEmpty(base string) int64 {
	if strings.HasSuffix(base, ".wal") {
		return 5
	}
	return 0
}

// streamEmpty: an osiris segment or index is "OSIL"/"OSII" + u32 version
// before its first chunk.
func streamEmpty(base string) int64 {
	if strings.HasSuffix(base, ".segment") || strings.HasSuffix(base, ".index") {
		return 8
	}
	return 0
}

// rocksDBFile reports whether a file name is one RocksDB keeps in its
// database dir.
func rocksDBFile(base string) bool {
	switch base {
	case "CURRENT", "IDENTITY", "LOCK", "LOG":
		return true
	}
	return strings.HasPrefix(base, "MANIFEST-") || strings.HasPrefix(base, "OPTIONS-") || strings.HasPrefix(base, "LOG.old.") ||
		strings.HasSuffix(base, ".sst") || strings.HasSuffix(base, ".log")
}

var dledgerDir = func(s string) bool { return strings.HasPrefix(s, "dledger-") }

// The RocketMQ layout: a store root holds commitlog/, consumequeue/,
// index/, checkpoint, abort, lock, config/, and in 5.x timerlog/,
// timerwheel, compaction/ and, in DLedger mode, dledger-<id>/.
func classifyRocket(t Target, rel string) Placement {
	segs := strings.Split(rel, "/")
	base := segs[len(segs)-1]
	if segs[0] == ".." || rel == "." {
		return Placement{Name: RocketUnrecognised, Path: "."}
	}
	// A commitlog dir or file given on its own (not under a store root).
	if t.Kind == TargetRocketLogDir || t.Kind == TargetRocketLogFile {
		if rel == base && filepath.Clean(t.CommitLogDir) == filepath.Clean(t.Root) && IsCommitLogName(base) {
			return Placement{Name: RocketCommitLog, Path: ".", Messages: true}
		}
	}
	if len(segs) == 1 {
		switch base {
		case "checkpoint":
			return Placement{Name: RocketCheckpoint, Path: "checkpoint"}
		case "timerwheel":
			return Placement{Name: RocketTimerWheel, Path: "timerwheel"}
		case "abort", "lock", "abort.bak", "checkpoint.bak", "storeCheckpoint":
			return Placement{Name: RocketMetadata, Path: "."}
		}
		return Placement{Name: RocketUnrecognised, Path: "."}
	}
	switch top := segs[0]; {
	case top == "commitlog" && len(segs) == 2 && IsCommitLogName(base):
		return Placement{Name: RocketCommitLog, Path: "commitlog", Messages: true}
	case top == "consumequeue":
		if len(segs) == 2 && rocksDBFile(base) {
			return Placement{Name: RocketRocksDBCQ, Path: "consumequeue"}
		}
		return Placement{Name: RocketConsumeQueue, Path: "consumequeue"}
	case top == "consumequeue_ext":
		return Placement{Name: RocketConsumeQueueExt, Path: "consumequeue_ext"}
	case top == "index":
		return Placement{Name: RocketIndex, Path: "index"}
	case top == "timerlog":
		return Placement{Name: RocketTimerLog, Path: "timerlog", Messages: true}
	case top == "compaction":
		return Placement{Name: RocketCompaction, Path: "compaction", Messages: len(segs) > 2 && segs[1] == "compactionLog"}
	case top == "config" && len(segs) == 2:
		switch base {
		case "topics.json":
			return Placement{Name: RocketTopics, Path: "config/topics.json"}
		case "timercheck":
			return Placement{Name: RocketTimerCheck, Path: "config/timercheck"}
		case "timermetrics", "timermetrics.bak":
			return Placement{Name: RocketTimerMetrics, Path: "config"}
		}
		return Placement{Name: RocketConfig, Path: "config"}
	case dledgerDir(top):
		if len(segs) > 2 && segs[1] == "data" {
			return Placement{Name: RocketDLedger, Path: top + "/data", Messages: true}
		}
		if len(segs) > 2 && segs[1] == "index" {
			return Placement{Name: RocketDLedgerIndex, Path: top + "/index"}
		}
		return Placement{Name: RocketDLedgerState, Path: top}
	}
	return Placement{Name: RocketUnrecognised, Path: "."}
}
