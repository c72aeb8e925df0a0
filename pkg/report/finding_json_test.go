package report

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/scan"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
	mscan "github.com/storectl/storectl/pkg/scan/rocketmq"

	genrabbit "github.com/storectl/storectl/internal/gen/rabbitmq"
)

// encodingJSON is the reference: the emitter's settings on encoding/json.
func encodingJSON(t *testing.T, f scan.Finding) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func checkSame(t *testing.T, what string, f scan.Finding) {
	t.Helper()
	got, err := newFindingEncoder().appendFinding(nil, &f)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if want := encodingJSON(t, f); !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// TestFindingJSONHostileStrings: every string field and detail value,
// filled with random bytes (invalid UTF-8, control characters, quotes,
// backslashes, U+2028/2029, HTML characters), encodes exactly as
// encoding/json encodes it.
func TestFindingJSONHostileStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "<", ">", "&", "\u2028", "\u2029",
		"é", "\xff", "\xc3", "\xe2\x80", "€", "𝄞", "plain", " "}
	str := func() string {
		var s string
		for range rng.IntN(8) {
			if rng.IntN(3) == 0 {
				s += string(rune(rng.IntN(0x11000)))
			} else {
				s += pieces[rng.IntN(len(pieces))]
			}
		}
		return s
	}
	for i := 0; i < 3000; i++ {
		f := scan.Finding{Code: str(), Severity: scan.Severity(rng.IntN(3)), Path: str(), Offset: rng.Int64() - rng.Int64(),
			Length: rng.Int64N(1 << 40), Expected: str(), Actual: str(), Repair: str(), Message: str(), MsgID: str()}
		if rng.IntN(2) == 0 {
			f.Evidence = map[string]string{str(): str(), str(): str()}
		}
		if rng.IntN(2) == 0 {
			f.Details = map[string]any{str(): str(), "n": rng.IntN(1000) - 500, "i64": rng.Int64(), "b": rng.IntN(2) == 0,
				"list": []string{str(), str()}, "f": rng.Float64() * 1e6, "nested": map[string]any{"x": str()}, "nil": nil}
		}
		checkSame(t, "random finding", f)
	}
}

// TestFindingJSONFixtures: every finding storectl makes on the bundled
// real-broker RabbitMQ and RocketMQ fixtures, on a generated RabbitMQ
// store with zero holes (generation-1 stops losing hundreds of victims,
// of which they name the first InlineVictims)
// and on the misread corpus encodes exactly as encoding/json encodes it.
func TestFindingJSONFixtures(t *testing.T) {
	n, victims := 0, 0
	check := func(name string, res *scan.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range res.Findings {
			checkSame(t, name+" "+f.Code, f)
			n++
			if vs, ok := f.Details["victims"].(rscan.Victims); ok {
				n, _ := f.Details["victim_count"].(int)
				victims = max(victims, n)
				if len(vs) > rscan.InlineVictims || len(vs) != min(n, rscan.InlineVictims) {
					t.Errorf("%s %s@%d: %d victims inline of %d (at most %d)", name, f.Code, f.Offset, len(vs), n, rscan.InlineVictims)
				}
			}
		}
	}
	rabbit := func(name, root string, vdirs []string) {
		res, err := rscan.Scan(context.Background(), rscan.Config{Root: root, VHostDirs: vdirs}, scan.Options{})
		check(name, res, err)
		res, err = rscan.Verify(context.Background(), rscan.Config{Root: root, VHostDirs: vdirs}, scan.Options{})
		check(name+" verify", res, err)
	}
	edge := testutil.Untar(t, testutil.Testdata("rabbitmq/datasets/edge-cases.tar.gz"))
	files, _ := filepath.Glob(filepath.Join(edge, "*.rdq"))
	res, err := rscan.Scan(context.Background(), rscan.Config{Root: edge, Files: files}, scan.Options{})
	check("edge-cases", res, err)
	for _, ds := range []string{"rabbitmq/datasets/crash.tar.gz", "rabbitmq/datasets/crash-cqv2.tar.gz", "rabbitmq-4.0/datasets/crash.tar.gz"} {
		root := testutil.Untar(t, testutil.Testdata(ds))
		vdirs, _ := filepath.Glob(filepath.Join(root, "*", "msg_stores", "vhosts", "*"))
		if len(vdirs) == 0 {
			t.Fatalf("%s: no vhost dir", ds)
		}
		rabbit(ds, root, vdirs)
	}
	gdir := t.TempDir()
	sum, err := genrabbit.Generate(gdir, genrabbit.Config{Seed: 3, Kind: genrabbit.BasicMessage, TotalBytes: 6 << 20,
		FileLimit: 1 << 20, HoleEvery: 50, UnrefEvery: 20})
	if err != nil {
		t.Fatal(err)
	}
	rabbit("generated", gdir, []string{sum.VHostDir})
	for _, c := range genrabbit.MisreadCorpus(t, testutil.Testdata()) {
		root := t.TempDir()
		vdir, _ := genrabbit.WriteCorpusNode(t, root, c.Parts)
		rabbit("corpus "+c.Name, root, []string{vdir})
	}
	for _, ds := range []string{"rmq533-c-stale", "rmq533-d-torn-crc", "rmq497-c-stale"} {
		root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", ds+".tar.gz")), "store")
		res, err := mscan.ScanCommitLog(context.Background(), mscan.Config{Root: root}, scan.Options{})
		check(ds, res, err)
		res, err = mscan.Verify(context.Background(), mscan.VerifyConfig{Config: mscan.Config{Root: root}}, scan.Options{})
		check(ds+" verify", res, err)
	}
	if victims < 10 {
		t.Fatalf("no finding with 10 or more victims (largest list %d)", victims)
	}
	if n < 100 {
		t.Fatalf("only %d fixture findings compared", n)
	}
	t.Logf("%d findings compared, the most victims of one %d", n, victims)
}
