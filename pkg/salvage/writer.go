package salvage

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// File names inside an out dir.
const (
	MessagesFile  = "messages.jsonl"
	BodiesDir     = "bodies"
	ConfirmedFile = "confirmed.jsonl"
)

// ErrOutInsideData is returned when the out dir is the data dir or lies
// inside it: salvage never writes into the data dir.
var ErrOutInsideData = errors.New("salvage: the out dir must not be inside the data dir")

// ErrOutNotEmpty is returned for an out dir that holds files but no
// earlier export (messages.jsonl): salvage does not write over unrelated
// files.
var ErrOutNotEmpty = errors.New("salvage: the out dir is not empty and holds no earlier export")

// ErrOtherExport is returned for an out dir that holds an export made
// with other settings (data dir, store, selection or filters): resuming it
// would mix two exports, and overwriting it would lose one.
var ErrOtherExport = errors.New("salvage: the out dir holds an export made with other settings")

// ExportFile records what an out dir holds an export of; it is rewritten
// with Complete set once the export is durable.
const ExportFile = "export.json"

// Spec is what an export is of: the data dir, the store kind and the
// selection with its filters (canonical text). An out dir is resumed only
// by an export of the same Spec.
type Spec struct {
	DataDir  string      `json:"data_dir"`
	Store    string      `json:"store"`
	Select   []Selection `json:"select"`
	Filters  string      `json:"filters,omitempty"`
	Complete bool        `json:"complete"`
}

func (s Spec) same(o Spec) bool {
	return s.DataDir == o.DataDir && s.Store == o.Store && s.Filters == o.Filters && slices.Equal(s.Select, o.Select)
}

// Durability: bodies are written without a sync each; every syncEvery
// bodies (or syncBytes body bytes) one syncfs(2) makes the batch and the
// manifest lines written so far durable, and Close syncs the rest, then
// messages.jsonl, the bodies dir and the out dir, before export.json says
// the export is complete. A crash loses at most the last batch, which a
// resumed export writes again.
const (
	syncEvery = 1024
	syncBytes = 64 << 20
)

// syncHook, when set (tests), is called for every sync the writer makes
// ("syncfs", "file", "dir").
var syncHook func(kind string)

// Writer writes an export: one body file per message and messages.jsonl,
// appended as messages are added. An out dir that already holds an
// export of the same Spec is resumed: messages it holds intact are not
// written again.
type Writer struct {
	dir  string
	spec Spec
	man  *os.File
	buf  *bufio.Writer
	n    int // body files in the export (the next number)
	// have holds the messages the export already holds (resumed, or
	// written in this run): the resume key's SHA-256, cut to 128 bits,
	// so that it costs about 40 bytes a message, not the key's string.
	have    map[[16]byte]struct{}
	pending int // bodies since the last sync
	pendB   int64
	stats   Stats
	// Filter, when set, keeps only the messages it accepts.
	Filter func(*Message) bool
}

// Stats counts what a Writer did.
type Stats struct {
	Written  int   `json:"written"`  // messages written in this run
	Bytes    int64 `json:"bytes"`    // body bytes written in this run
	Resumed  int   `json:"resumed"`  // messages an earlier run of the same export had written
	Filtered int   `json:"filtered"` // selected messages the filters (queue, id, time) left out
	Syncs    int   `json:"syncs"`    // fsync/syncfs calls
}

// Put results.
const (
	PutWritten  = "written"
	PutResumed  = "resumed"
	PutFiltered = "filtered"
)

// Create opens outDir for an export of dataDir with no Spec beyond the
// data dir (tests, library use). See CreateExport.
func Create(outDir, dataDir string) (*Writer, error) {
	return CreateExport(outDir, Spec{DataDir: dataDir})
}

// CreateExport opens outDir for an export of spec. outDir is created if
// missing; an existing outDir must be empty, or hold an export of the
// same spec (resumed: what it holds intact stays, a torn tail of the
// manifest is cut), else ErrOutNotEmpty or ErrOtherExport. Its confirm log
// is kept, so a publish can resume.
func CreateExport(outDir string, spec Spec) (*Writer, error) {
	out, err := realAbs(outDir)
	if err != nil {
		return nil, err
	}
	data, err := realAbs(spec.DataDir)
	if err != nil {
		return nil, err
	}
	if out == data || strings.HasPrefix(out, data+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: %s is inside %s", ErrOutInsideData, out, data)
	}
	spec.DataDir, spec.Complete = data, false
	w := &Writer{dir: out, spec: spec, have: map[[16]byte]struct{}{}}
	ents, err := os.ReadDir(out)
	resume := false
	if err == nil && len(ents) > 0 {
		prev, perr := readSpec(out)
		if perr != nil {
			if _, err := os.Stat(filepath.Join(out, MessagesFile)); err == nil {
				return nil, fmt.Errorf("%w: %s holds an export without %s (made by an older storectl); use a new --out", ErrOtherExport, out, ExportFile)
			}
			return nil, fmt.Errorf("%w: %s", ErrOutNotEmpty, out)
		}
		if !prev.same(spec) {
			return nil, fmt.Errorf("%w: %s holds an export of %s (%s, --select %s%s); use a new --out, or the same settings to resume it",
				ErrOtherExport, out, prev.DataDir, prev.Store, joinSel(prev.Select), filtersText(prev.Filters))
		}
		resume = true
	}
	if err := os.MkdirAll(filepath.Join(out, BodiesDir), 0o755); err != nil {
		return nil, err
	}
	if resume {
		if err := w.loadExisting(); err != nil {
			return nil, err
		}
	}
	if err := writeSpec(out, spec); err != nil {
		return nil, err
	}
	w.man, err = os.OpenFile(filepath.Join(out, MessagesFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w.buf = bufio.NewWriterSize(w.man, 1<<16)
	return w, nil
}

func joinSel(s []Selection) string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = string(x)
	}
	return strings.Join(out, ",")
}

func filtersText(f string) string {
	if f == "" {
		return ""
	}
	return ", " + f
}

func readSpec(dir string) (Spec, error) {
	var s Spec
	b, err := os.ReadFile(filepath.Join(dir, ExportFile))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// writeSpec replaces export.json durably (temp file, fsync, rename, dir).
func writeSpec(dir string, s Spec) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+ExportFile+".tmp")
	if err := writeSync(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ExportFile)); err != nil {
		return err
	}
	return syncDir(dir)
}

// loadExisting reads the manifest of the export being resumed and keeps
// the longest prefix of it whose body files are intact (a crash can leave
// a torn last line, or lines whose bodies never reached the disk): the
// manifest is cut there, and those messages are not written again.
func (w *Writer) loadExisting() error {
	p := filepath.Join(w.dir, MessagesFile)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // EOF: a last line without its newline is torn
			break
		}
		var m Message
		if json.Unmarshal(line, &m) != nil || !bodyIntact(w.dir, &m) {
			break
		}
		good += int64(len(line))
		w.have[resumeKey(&m)] = struct{}{}
		w.n++
	}
	if st, err := f.Stat(); err == nil && st.Size() != good {
		if err := f.Truncate(good); err != nil {
			return err
		}
		w.sync("file")
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// bodyIntact checks a body file's size and sha256 against its line.
func bodyIntact(dir string, m *Message) bool {
	_, err := ReadBody(dir, m)
	return err == nil
}

// resumeKey identifies a message of the store: its record's place and id.
func resumeKey(m *Message) [16]byte {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s\x00%s", m.Path, m.Offset, m.MsgID, m.Location))
	return [16]byte(sum[:16])
}

// realAbs is filepath.Abs with symlinks resolved as far as the path exists.
func realAbs(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	dir, rest := abs, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// Dir is the absolute out dir.
func (w *Writer) Dir() string { return w.dir }

// Stats says what the writer did so far.
func (w *Writer) Stats() Stats { return w.stats }

// Add is Put without its result.
func (w *Writer) Add(m Message, body []byte) error {
	_, err := w.Put(m, body)
	return err
}

// Put adds one message: PutFiltered when the Filter leaves it out,
// PutResumed when the export already holds it, else it writes body to a
// new body file and m (with BodyFile, Size and SHA256 filled in) to the
// manifest, and returns PutWritten.
func (w *Writer) Put(m Message, body []byte) (string, error) {
	if w.Filter != nil && !w.Filter(&m) {
		w.stats.Filtered++
		return PutFiltered, nil
	}
	if _, ok := w.have[resumeKey(&m)]; ok {
		w.stats.Resumed++
		return PutResumed, nil
	}
	sum := sha256.Sum256(body)
	id := m.MsgID
	if len(id) > 64 || strings.ContainsAny(id, "/\\.") || id == "" {
		id = "msg"
	}
	m.BodyFile = filepath.ToSlash(filepath.Join(BodiesDir, fmt.Sprintf("%06d-%s.bin", w.n, id)))
	m.Size, m.SHA256 = int64(len(body)), hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(w.dir, m.BodyFile), body, 0o644); err != nil {
		return "", err
	}
	line, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	w.n++
	w.have[resumeKey(&m)] = struct{}{}
	if _, err := w.buf.Write(append(line, '\n')); err != nil {
		return "", err
	}
	w.stats.Written++
	w.stats.Bytes += int64(len(body))
	w.pending++
	w.pendB += int64(len(body))
	if w.pending >= syncEvery || w.pendB >= syncBytes {
		if err := w.syncBatch(); err != nil {
			return "", err
		}
	}
	return PutWritten, nil
}

// syncBatch makes the bodies written since the last batch and the
// manifest lines naming them durable with one syncfs of the out dir's
// file system.
func (w *Writer) syncBatch() error {
	if err := w.buf.Flush(); err != nil {
		return err
	}
	w.pending, w.pendB = 0, 0
	w.sync("syncfs")
	return unix.Syncfs(int(w.man.Fd()))
}

func (w *Writer) sync(kind string) {
	w.stats.Syncs++
	if syncHook != nil {
		syncHook(kind)
	}
}

// Messages reads back what the export holds so far (resumed and added)
// from its manifest (ReadMessages): the writer keeps no message in
// memory (it did, 3 KiB each with their properties: 573 MiB of RSS for a
// 64 MiB store of small messages).
func (w *Writer) Messages() ([]Message, error) {
	if w.man != nil {
		if err := w.buf.Flush(); err != nil {
			return nil, err
		}
	}
	return ReadMessages(w.dir)
}

// Close makes the export durable and marks it complete: the last batch of
// bodies (syncfs), messages.jsonl, the bodies dir and the out dir, then
// export.json with Complete set.
func (w *Writer) Close() error {
	if w.man == nil {
		return nil
	}
	man := w.man
	w.man = nil
	err := w.buf.Flush()
	if err == nil && w.pending > 0 {
		w.sync("syncfs")
		err = unix.Syncfs(int(man.Fd()))
	}
	if err == nil {
		w.sync("file")
		err = man.Sync()
	}
	if cerr := man.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		w.sync("dir")
		err = syncDir(filepath.Join(w.dir, BodiesDir))
	}
	if err == nil {
		w.sync("dir")
		err = syncDir(w.dir)
	}
	if err == nil {
		spec := w.spec
		spec.Complete = true
		w.sync("file") // writeSpec: the file and its dir
		w.sync("dir")
		err = writeSpec(w.dir, spec)
	}
	return err
}

// Abort stops the export where it is: what was written stays, flushed (a
// later run of the same export resumes it), and the export stays marked
// incomplete.
func (w *Writer) Abort() {
	if w.man != nil {
		w.buf.Flush()
		w.man.Close()
		w.man = nil
	}
}

func writeSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadMessages reads messages.jsonl of an export.
func ReadMessages(outDir string) ([]Message, error) {
	f, err := os.Open(filepath.Join(outDir, MessagesFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxManifestLine)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", MessagesFile, len(out)+1, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// maxManifestLine bounds one manifest line: properties (headers) of an
// AMQP message are at most a frame (128 KiB by default), RocketMQ
// properties at most 32 KiB; 64 MiB leaves room for base64 and JSON
// escaping of anything a broker accepts.
const maxManifestLine = 64 << 20

// ReadBody reads a message's body file and checks its size and sha256.
func ReadBody(outDir string, m *Message) ([]byte, error) {
	if strings.Contains(m.BodyFile, "..") || filepath.IsAbs(m.BodyFile) {
		return nil, fmt.Errorf("body file %q is outside the export", m.BodyFile)
	}
	b, err := os.ReadFile(filepath.Join(outDir, filepath.FromSlash(m.BodyFile)))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != m.Size || hex.EncodeToString(sum[:]) != m.SHA256 {
		return nil, fmt.Errorf("body file %s changed since the export (size or sha256 differs)", m.BodyFile)
	}
	return b, nil
}
