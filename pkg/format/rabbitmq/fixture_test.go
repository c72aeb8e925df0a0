package rabbitmq

import (
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// The decoders' tests read the brokers' queue index and vhost files from
// the fixture tarballs in memory (testutil.ReadTar): they need bytes, not
// directories.

// qxDatasets are the fixture tarballs whose vhost dirs the tests read.
var qxDatasets = []struct{ name, tarball string }{
	{"3.10/clean-shutdown", "rabbitmq/datasets/clean-shutdown.tar.gz"},
	{"3.10/crash", "rabbitmq/datasets/crash.tar.gz"},
	{"3.10/crash-mid-write-confirmed", "rabbitmq/datasets/crash-mid-write-confirmed.tar.gz"},
	{"3.10/crash-cqv2", "rabbitmq/datasets/crash-cqv2.tar.gz"},
	{"4.0/clean-shutdown", "rabbitmq-4.0/datasets/clean-shutdown.tar.gz"},
	{"4.0/crash", "rabbitmq-4.0/datasets/crash.tar.gz"},
}

// qxFiles caches, per tarball, the files of every vhost dir except the
// message stores (the .rdq files are large and not needed here).
var (
	qxMu    sync.Mutex
	qxFiles = map[string]map[string][]byte{}
)

// qxLoad returns the vhost files of a tarball (under testdata/), keyed by
// their path in the archive.
func qxLoad(t testing.TB, tarball string) map[string][]byte {
	t.Helper()
	qxMu.Lock()
	defer qxMu.Unlock()
	if m, ok := qxFiles[tarball]; ok {
		return m
	}
	m := map[string][]byte{}
	for name, b := range testutil.ReadTar(t, testutil.Testdata(tarball)) {
		if strings.Contains(name, "/msg_stores/vhosts/") && !strings.Contains(name, "/msg_store_") {
			m[name] = b
		}
	}
	qxFiles[tarball] = m
	return m
}

// qxVHost returns the vhost dir's path in the archive (the one and only
// dir under msg_stores/vhosts) and its files.
func qxVHost(t testing.TB, tarball string) (string, map[string][]byte) {
	t.Helper()
	files := qxLoad(t, tarball)
	for name := range files {
		i := strings.Index(name, "/msg_stores/vhosts/")
		rest := name[i+len("/msg_stores/vhosts/"):]
		return path.Join(name[:i], "msg_stores", "vhosts", strings.SplitN(rest, "/", 2)[0]), files
	}
	t.Fatalf("%s: no vhost dir", tarball)
	return "", nil
}

// qxFixtureFiles returns the files of every dataset whose name ends in
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
