// Package streamtest gives tests the real RabbitMQ stream datasets in
// testdata/: each dataset unpacked once per test binary, its stream
// directories, and its oracles (the broker's own per-chunk dump and what
// the restarted broker delivered).
package streamtest

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// Dataset is one real dataset: a node dir written by a broker, with the
// results directory holding its oracles.
type Dataset struct {
	Name    string // S1, S2, S3, Q3, ...
	Version string // RabbitMQ version that wrote it
	Tarball string
	Results string // results/<Name>
	Node    string // node dir inside the tarball, e.g. rmq40@localhost
}

// Datasets40 are the RabbitMQ 4.0.5 (osiris 1.8.5) datasets with streams.
var Datasets40 = []Dataset{ds40("S1"), ds40("S2"), ds40("S3"), ds40("Q3")}

// Datasets310 are the RabbitMQ 3.10.8 (osiris 1.3.1) datasets
// (testdata/rabbitmq-3.10-stream).
var Datasets310 = []Dataset{ds310("T1")}

// All are every dataset with streams.
var All = append(append([]Dataset(nil), Datasets40...), Datasets310...)

func ds310(name string) Dataset {
	base := testutil.Testdata("rabbitmq-3.10-stream")
	return Dataset{Name: name, Version: "3.10.8", Tarball: filepath.Join(base, "datasets", name+".tar.gz"),
		Results: filepath.Join(base, "results", name), Node: "rmq310@localhost"}
}

func ds40(name string) Dataset {
	base := testutil.Testdata("rabbitmq-4.0-qq-stream")
	return Dataset{Name: name, Version: "4.0.5", Tarball: filepath.Join(base, "datasets", name+".tar.gz"),
		Results: filepath.Join(base, "results", name), Node: "rmq40@localhost"}
}

var (
	mu       sync.Mutex
	unpacked = map[string]string{}
	tmpRoot  string
)

// Main runs the tests and removes what Unpack unpacked. Call it from
// TestMain: os.Exit(streamtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	mu.Unlock()
	return code
}

// Unpack unpacks the dataset once per test binary and returns the dir it
// was unpacked into (holding the node dir). Tests must not change it:
// use Copy for a copy to damage.
func Unpack(t testing.TB, d Dataset) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dir, ok := unpacked[d.Tarball]; ok {
		return dir
	}
	if tmpRoot == "" {
		var err error
		if tmpRoot, err = os.MkdirTemp("", "streamtest-"); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(tmpRoot, d.Name+"-"+d.Version)
	if err := testutil.UntarTo(d.Tarball, dir); err != nil {
		t.Fatalf("untar %s: %v", d.Tarball, err)
	}
	unpacked[d.Tarball] = dir
	return dir
}

// NodeDir is the unpacked node dir.
func NodeDir(t testing.TB, d Dataset) string { return filepath.Join(Unpack(t, d), d.Node) }

// StreamDirs lists the unpacked stream directories (absolute, sorted).
func StreamDirs(t testing.TB, d Dataset) []string {
	t.Helper()
	root := filepath.Join(NodeDir(t, d), "stream")
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// Copy copies the unpacked dataset into a new temp dir and returns the
// copy's node dir: for tests that damage or repair it.
func Copy(t testing.TB, d Dataset) string {
	t.Helper()
	src := Unpack(t, d)
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, d.Node)
}

// Open opens path, or path+".gz" through gzip when only that exists.
func Open(t testing.TB, path string) io.ReadCloser {
	t.Helper()
	if f, err := os.Open(path); err == nil {
		return f
	}
	f, err := os.Open(path + ".gz")
	if err != nil {
		t.Fatalf("open %s(.gz): %v", path, err)
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		io.Reader
		io.Closer
	}{gz, f}
}

// Exists reports whether path or path.gz exists.
func Exists(path string) bool {
	for _, p := range []string{path, path + ".gz"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// JSONL decodes every line of the jsonl file at path (or path.gz).
func JSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	rc := Open(t, path)
	defer rc.Close()
	var out []T
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), testutil.MaxJSONLLine)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		d := json.NewDecoder(strings.NewReader(sc.Text()))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// OracleFiles lists, for one stream dir name, the dump oracle's files
// (file names without .jsonl/.gz: "00000000000000000000.segment", ...).
func OracleFiles(t testing.TB, d Dataset, streamDir string) []string {
	t.Helper()
	dir := filepath.Join(d.Results, "oracle", "stream", streamDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".gz"), ".jsonl")
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Oracle reads the dump oracle of one stream file.
func Oracle(t testing.TB, d Dataset, streamDir, file string) []map[string]any {
	return JSONL[map[string]any](t, filepath.Join(d.Results, "oracle", "stream", streamDir, file+".jsonl"))
}

// Delivery is one line of a restart dump: what the restarted broker
// delivered to an AMQP 0-9-1 consumer. The 3.10.8 dumps also record the
// properties the 4.0.5 ones do not (pointers: nil when not recorded).
type Delivery struct {
	N             int            `json:"n"`
	MessageID     string         `json:"message_id"`
	Size          int64          `json:"size"`
	SHA256        string         `json:"sha256"`
	Headers       map[string]any `json:"headers"`
	Timestamp     int64          `json:"timestamp"`
	CorrelationID string         `json:"correlation_id"`
	ContentType   string         `json:"content_type"`
	DeliveryMode  int            `json:"delivery_mode"`
	Offset        int64          `json:"x_stream_offset"`

	ContentEncoding *string `json:"content_encoding"`
	Priority        *int    `json:"priority"`
	Expiration      *string `json:"expiration"`
	ReplyTo         *string `json:"reply_to"`
	Type            *string `json:"type"`
	AppID           *string `json:"app_id"`
}

// Oracle310 reads the 3.10.8 dump oracle of one stream dir (one file per
// dir: osiris 1.3.1's data reader walks every segment).
func Oracle310(t testing.TB, d Dataset, streamDir string) []map[string]any {
	return JSONL[map[string]any](t, filepath.Join(d.Results, "oracle", "stream", streamDir+".jsonl"))
}

// Deliveries reads restart/dump-<queue>.jsonl(.gz).
func Deliveries(t testing.TB, d Dataset, queue string) []Delivery {
	return JSONL[Delivery](t, filepath.Join(d.Results, "restart", "dump-"+queue+".jsonl"))
}
