package rabbitmq

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// qxDataset describes one fixture tarball and its oracle directory.
type qxDataset struct {
	name    string // test name
	tarball string // under testdata/
	results string // under testdata/
	v4      bool   // rabbitmq-4.0 fixture (has qi-refs.tsv)
}

var qxDatasets = []qxDataset{
	{"3.10/clean-shutdown", "rabbitmq/datasets/clean-shutdown.tar.gz", "rabbitmq/results/clean-shutdown", false},
	{"3.10/crash", "rabbitmq/datasets/crash.tar.gz", "rabbitmq/results/crash", false},
	{"3.10/crash-mid-write-confirmed", "rabbitmq/datasets/crash-mid-write-confirmed.tar.gz", "rabbitmq/results/crash-mid-write-confirmed", false},
	{"3.10/crash-cqv2", "rabbitmq/datasets/crash-cqv2.tar.gz", "rabbitmq/results/crash-cqv2", false},
	{"4.0/clean-shutdown", "rabbitmq-4.0/datasets/clean-shutdown.tar.gz", "rabbitmq-4.0/results/clean-shutdown", true},
	{"4.0/crash", "rabbitmq-4.0/datasets/crash.tar.gz", "rabbitmq-4.0/results/crash", true},
}

// qxFiles caches, per tarball, the files of every vhost dir except the
// message stores (the .rdq files are large and not needed here).
var (
	qxMu    sync.Mutex
	qxFiles = map[string]map[string][]byte{}
)

func qxLoad(t testing.TB, tarball string) map[string][]byte {
	t.Helper()
	qxMu.Lock()
	defer qxMu.Unlock()
	if m, ok := qxFiles[tarball]; ok {
		return m
	}
	f, err := os.Open(testutil.Testdata(tarball))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || !strings.Contains(name, "/msg_stores/vhosts/") ||
			strings.Contains(name, "/msg_store_") || strings.HasPrefix(name, "..") {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		m[name] = b
	}
	qxFiles[tarball] = m
	return m
}

// qxExtract writes the cached vhost files into a temp dir and returns the
// vhost dir (the one and only dir under msg_stores/vhosts).
func qxExtract(t testing.TB, tarball string) string {
	t.Helper()
	root := t.TempDir()
	vhost := ""
	for name, b := range qxLoad(t, tarball) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		i := strings.Index(name, "/msg_stores/vhosts/")
		rest := name[i+len("/msg_stores/vhosts/"):]
		vhost = filepath.Join(root, name[:i], "msg_stores", "vhosts", strings.SplitN(rest, "/", 2)[0])
	}
	if vhost == "" {
		t.Fatalf("%s: no vhost dir", tarball)
	}
	return vhost
}

// qxFixtureFiles returns the cached files of a tarball whose name ends in
// suffix, for fuzz seeds.
func qxFixtureFiles(t testing.TB, suffix string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, ds := range qxDatasets {
		for name, b := range qxLoad(t, ds.tarball) {
			if strings.HasSuffix(name, suffix) {
				out = append(out, b)
			}
		}
	}
	return out
}

// qxTSV returns the rows of a tab-separated file.
func qxTSV(t testing.TB, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata(path))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}
