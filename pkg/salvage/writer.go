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
	"strings"
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

// Writer writes an export. Bodies go straight to their files; the
// manifest goes to a temporary file renamed to messages.jsonl by Close,
// so a reader never sees a half-written manifest.
type Writer struct {
	dir  string
	tmp  *os.File
	buf  *bufio.Writer
	n    int
	msgs []Message
}

// Create opens outDir for an export of dataDir. outDir is created if
// missing; an existing outDir must be empty or hold an earlier export
// (whose messages.jsonl and bodies are replaced; its confirm log is kept,
// so a publish can resume).
func Create(outDir, dataDir string) (*Writer, error) {
	out, err := realAbs(outDir)
	if err != nil {
		return nil, err
	}
	data, err := realAbs(dataDir)
	if err != nil {
		return nil, err
	}
	if out == data || strings.HasPrefix(out, data+string(filepath.Separator)) {
		return nil, fmt.Errorf("%w: %s is inside %s", ErrOutInsideData, out, data)
	}
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(out, MessagesFile)); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrOutNotEmpty, out)
		}
		if err := os.RemoveAll(filepath.Join(out, BodiesDir)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(out, BodiesDir), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(out, ".messages-*.jsonl")
	if err != nil {
		return nil, err
	}
	return &Writer{dir: out, tmp: tmp, buf: bufio.NewWriterSize(tmp, 1<<16)}, nil
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

// Add writes body to a new body file and m (with BodyFile, Size and
// SHA256 filled in) to the manifest.
func (w *Writer) Add(m Message, body []byte) error {
	sum := sha256.Sum256(body)
	id := m.MsgID
	if len(id) > 64 || strings.ContainsAny(id, "/\\.") || id == "" {
		id = "msg"
	}
	m.BodyFile = filepath.ToSlash(filepath.Join(BodiesDir, fmt.Sprintf("%06d-%s.bin", w.n, id)))
	m.Size, m.SHA256 = int64(len(body)), hex.EncodeToString(sum[:])
	if err := writeSync(filepath.Join(w.dir, m.BodyFile), body); err != nil {
		return err
	}
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	w.n++
	w.msgs = append(w.msgs, m)
	_, err = w.buf.Write(append(line, '\n'))
	return err
}

// Messages returns what was added so far.
func (w *Writer) Messages() []Message { return w.msgs }

// Close flushes, fsyncs and renames the manifest into place.
func (w *Writer) Close() error {
	if w.tmp == nil {
		return nil
	}
	tmp := w.tmp
	w.tmp = nil
	err := w.buf.Flush()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(w.dir, MessagesFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(w.dir)
}

// Abort drops the manifest being written (the body files stay).
func (w *Writer) Abort() {
	if w.tmp != nil {
		w.tmp.Close()
		os.Remove(w.tmp.Name())
		w.tmp = nil
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
