package salvage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/internal/testutil"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// exportWith runs export into a new export dir for dataDir, closes it and
// reads its messages.jsonl back; the data dir must be unchanged.
func exportWith(t *testing.T, dataDir string, export func(w *Writer) (*Report, error)) ([]Message, string, *Report) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	before := testutil.TreeHash(t, dataDir)
	w, err := Create(out, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := export(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, before, testutil.TreeHash(t, dataDir))
	msgs, err := ReadMessages(out)
	if err != nil {
		t.Fatal(err)
	}
	return msgs, out, rep
}

func exportRabbit(t *testing.T, root, vdir string, o Options) (*Report, []Message, string) {
	t.Helper()
	msgs, out, rep := exportWith(t, root, func(w *Writer) (*Report, error) {
		return ExportRabbitMQ(context.Background(), rscan.Config{Root: root, VHostDirs: []string{vdir}}, o, w)
	})
	return rep, msgs, out
}

// TestAtRiskIsExactlyTheVictims: on the misread corpus, --select at-risk
// for 4.0.2 and 3.13.7 (generation 2) exports exactly the records that a
// generation-2 scanner written from the spec (gen.Gen2Spec) does not return:
// every record the corpus made a victim of the zero-hole misread, plus
// the records a cascaded bogus frame inside a victim's body jumps over
// (docs/formats/rabbitmq-classic.md §3.4: the scanner resumes byte-wise
// inside the victim). Payloads are
// byte-identical to the payload bytes inside the frames the corpus wrote.
// Controls export nothing; 4.1.8 (index-validated scanner) nothing.
func TestAtRiskIsExactlyTheVictims(t *testing.T) {
	total, primary := 0, 0
	for _, k := range corpus(t) {
		root := t.TempDir()
		vdir, at := gen.WriteCorpusNode(t, root, k.Parts)
		for _, ver := range []string{"4.0.2", "3.13.7", "4.1.8"} {
			_, msgs, out := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAtRisk}, BrokerVersions: []string{ver}})
			want := map[int64]bool{}
			if ver != "4.1.8" {
				spec, err := gen.Gen2Spec(mustRead(t, filepath.Join(vdir, "msg_store_persistent", "0.rdq")))
				if err != nil {
					t.Fatal(err)
				}
				found := map[int64]bool{}
				for _, r := range spec {
					if a := at[r.Offset]; a != nil && int64(len(a.Frame)) == r.Total {
						found[r.Offset] = true
					}
				}
				for off, r := range at {
					if !found[off] {
						want[off] = true
					}
					if r.Victim && found[off] {
						t.Fatalf("%s: the spec model finds the corpus victim at %d", k.Name, off)
					}
				}
			}
			got := map[int64]bool{}
			for _, m := range msgs {
				got[m.Offset] = true
				r := at[m.Offset]
				if r == nil || !want[m.Offset] {
					t.Errorf("%s/%s: exported %s@%d, not a victim", k.Name, ver, m.MsgID, m.Offset)
					continue
				}
				body, err := ReadBody(out, &m)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(body, r.Payload) || m.MsgID != hex.EncodeToString(r.Frame[8:24]) {
					t.Errorf("%s/%s: body of %s differs from the original payload (%d vs %d bytes)", k.Name, ver, m.MsgID, len(body), len(r.Payload))
				}
				if len(m.SelectedBy) != 1 || m.SelectedBy[0] != SelectAtRisk || len(m.Why) != 1 || m.Queues[0] != "q1" {
					t.Errorf("%s/%s: %+v", k.Name, ver, m)
				}
			}
			for off := range want {
				if !got[off] {
					t.Errorf("%s/%s: victim at %d not exported", k.Name, ver, off)
				}
			}
			if ver == "4.0.2" {
				marked := 0
				for _, r := range at {
					if r.Victim {
						marked++
					}
				}
				if marked != k.Victims || len(want) < marked || (k.Victims == 0) != (len(want) == 0) {
					t.Fatalf("%s: %d marked victims, %d records the model loses, case says %d", k.Name, marked, len(want), k.Victims)
				}
				primary += marked
				total += len(msgs)
				t.Logf("%s: %d records, %d victims (%d marked), %d exported", k.Name, len(at), len(want), marked, len(msgs))
			}
		}
	}
	if primary != 8 || total < primary {
		t.Errorf("%d at-risk messages over the corpus, %d marked victims (want 8)", total, primary)
	}
	t.Logf("at-risk over the corpus: %d exported, %d of them the marked zero-hole victims", total, primary)
}

// TestSelectAllAndUnreferenced: all exports every record of a corpus file
// with its payload; unreferenced exports the one record no queue
// references once q1 loses its reference to it.
func TestSelectAllAndUnreferenced(t *testing.T) {
	k := corpus(t)[3] // two-victims: 4 records
	root := t.TempDir()
	vdir, at := gen.WriteCorpusNode(t, root, k.Parts)
	rep, msgs, out := exportRabbit(t, root, vdir, Options{Select: []Selection{SelectAll}})
	if len(msgs) != len(at) || rep.Selected != len(at) {
		t.Fatalf("all: %d messages, want %d", len(msgs), len(at))
	}
	for _, m := range msgs {
		body, err := ReadBody(out, &m)
		if err != nil || !bytes.Equal(body, at[m.Offset].Payload) {
			t.Errorf("all: %s@%d body differs (%v)", m.MsgID, m.Offset, err)
		}
		if m.Exchange == nil || len(m.RoutingKeys) == 0 || m.Properties["delivery_mode"] == nil || len(m.PropertiesBin) == 0 {
			t.Errorf("all: %s lacks routing/properties: %+v", m.MsgID, m)
		}
	}
	// Drop q1's reference to the last record: rewrite its .qi without it.
	offs := make([]int64, 0, len(at))
	for o := range at {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	qdirs, _ := filepath.Glob(filepath.Join(vdir, "queues", "*", "0.qi"))
	if len(qdirs) != 1 {
		t.Fatal(qdirs)
	}
	qi := mustRead(t, qdirs[0])
	last := at[offs[len(offs)-1]]
	i := bytes.Index(qi, last.Frame[8:24])
	if i < 0 {
		t.Fatal("id not in .qi")
	}
	clear(qi[i-4 : i-4+32])
	if err := os.WriteFile(qdirs[0], qi, 0o644); err != nil {
		t.Fatal(err)
	}
	_, msgs, _ = exportRabbit(t, root, vdir, Options{Select: []Selection{SelectUnreferenced}})
	if len(msgs) != 1 || msgs[0].Offset != offs[len(offs)-1] || msgs[0].Status != rscan.StatusUnreferenced {
		t.Fatalf("unreferenced: %+v", msgs)
	}
}

// TestOutInsideDataRefused: the writer never writes into the data dir.
func TestOutInsideDataRefused(t *testing.T) {
	root := t.TempDir()
	for _, out := range []string{root, filepath.Join(root, "x"), filepath.Join(root, "a", "..", "b")} {
		if _, err := Create(out, root); !errors.Is(err, ErrOutInsideData) {
			t.Errorf("%s: %v", out, err)
		}
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(other, root); !errors.Is(err, ErrOutNotEmpty) {
		t.Errorf("non-empty out: %v", err)
	}
}

// decodeLine is a message line of the RocketMQ decode oracle.
type decodeLine struct {
	Kind       string `json:"kind"`
	PhyOffset  int64  `json:"phy_offset"`
	TotalSize  int64  `json:"total_size"`
	BodySHA256 string `json:"body_sha256"`
	MsgID      string `json:"msg_id"`
	Topic      string `json:"topic"`
}

// TestRocketAfterCorruption: 3000 random bytes over the 6th record of the
// first commitlog file; after-corruption exports exactly the records of
// the decode oracle that start at or after the garbage's end, bodies
// matching the oracle's body_sha256.
func TestRocketAfterCorruption(t *testing.T) {
	root := filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz")), "store")
	var msgs []decodeLine
	f, err := os.Open(testutil.Testdata("rocketmq", "rmq533-a-clean.decode.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d decodeLine
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "msg" {
			msgs = append(msgs, d)
		}
	}
	f.Close()
	start := msgs[5].PhyOffset
	p := filepath.Join(root, "commitlog", "00000000000000000000")
	b := mustRead(t, p)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := start; i < start+3000; i++ {
		b[i] = byte(rng.Uint32())
	}
	binary.BigEndian.PutUint32(b[start:], 0x7FFFFFF0) // certainly not a record
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RecoverFromFirstFile(t, root)
	want := map[int64]string{}
	for _, m := range msgs {
		if m.PhyOffset >= start+3000 {
			want[m.PhyOffset] = m.BodySHA256
		}
	}
	got, out, rep := exportWith(t, root, func(w *Writer) (*Report, error) {
		return ExportRocketMQ(context.Background(), rmqscan.Config{Root: root}, Options{Select: []Selection{SelectAfterCorruption}}, w)
	})
	matched := 0
	for _, m := range got {
		body, err := ReadBody(out, &m)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		if w, ok := want[*m.PhyOffset]; !ok || w != hex.EncodeToString(sum[:]) || m.SHA256 != w {
			t.Errorf("phy %d (%s): not expected or body differs from the oracle", *m.PhyOffset, m.MsgID)
			continue
		}
		matched++
	}
	if matched != len(want) || len(got) != len(want) || rep.Selected != len(want) {
		t.Fatalf("exported %d, matched %d, oracle has %d records after the garbage", len(got), matched, len(want))
	}
	t.Logf("%d records after the garbage exported, bodies match the oracle", matched)
}
