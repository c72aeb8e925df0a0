package dledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/sparse"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// The real 5.3.3 + DLedger 0.3.1.2 datasets; <ds>.decode.jsonl is what the
// real DLedgerEntryCoder and checkMessageAndReturnSize read.
var dlDatasets = []string{"rmq533-dl1-clean", "rmq533-dl2-kill", "rmq533-dl3-hdr"}

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveShared()
	os.Exit(code)
}

// storeDir unpacks a dataset once per test binary (read-only users)
// and returns its store dir.
func storeDir(t testing.TB, ds string) string {
	t.Helper()
	return filepath.Join(testutil.SharedUntar(t, testutil.Testdata("rocketmq-5x", ds+".tar.gz")), "store")
}

func jsonMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// normHost turns Java's "/1.2.3.4:5" and our "1.2.3.4:5" into one form.
func normHost(s string) string {
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(s, "/"))
	if err != nil {
		return "bad:" + s
	}
	return ap.String()
}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// innerLine renders a body decoded by pkg/format/rocketmq in the oracle's
// `inner` shape; phy is the inner record's physical offset (pos + 48).
func innerLine(m *rmq.Message, phy int64) map[string]any {
	sum := sha256.Sum256(m.Body)
	return jsonMap(map[string]any{"pos": 0, "phy_offset": phy, "total_size": m.TotalSize, "stored_phy_offset": m.PhysicalOffset,
		"stored_offset_matches": m.PhysicalOffset == phy, "topic": string(m.Topic), "queue_id": m.QueueID,
		"queue_offset": m.QueueOffset, "sys_flag": m.SysFlag, "tags_code": m.TagsCode(), "store_timestamp": m.StoreTimestamp,
		"born_timestamp": m.BornTimestamp, "born_host": normHost(m.BornHost.String()), "store_host": normHost(m.StoreHost.String()),
		"reconsume_times": m.ReconsumeTimes, "prepared_tx_offset": m.PreparedTransactionOffset, "body_crc": m.BodyCRC,
		"body_len": len(m.Body), "body_sha256": hex.EncodeToString(sum[:]), "msg_id": m.MsgID(), "keys": strOrNil(m.Keys()),
		"uniq_key": strOrNil(m.UniqKey()), "tags": strOrNil(m.Tags()), "properties": string(m.Properties)})
}

func sortedNames(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// ours decodes a dataset's DLedger files in the oracle's line shapes.
func ours(t *testing.T, store string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	add := func(kind string, m map[string]any) {
		m = jsonMap(m)
		m["kind"] = kind
		out[kind] = append(out[kind], m)
	}
	data := filepath.Join(store, "dledger-n0", DataDir)
	for _, name := range sortedNames(t, data) {
		base, _ := rmq.ParseFileName(name)
		f, err := os.Open(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r := NewReader(f, st.Size(), base, 0)
		n := 0
		for r.Next() {
			h, body := r.Header(), r.Body()
			n++
			m, err := rmq.DecodeMessage(body, h.Pos+BodyOffset, 0)
			ok := err == nil && m.Verify() == nil
			line := map[string]any{"file": name, "pos": h.Pos - base, "dledger_pos": h.Pos, "magic": h.Magic, "size": h.Size,
				"index": h.Index, "term": h.Term, "entry_pos_field": h.Pos, "pos_matches": true, "channel": h.Channel,
				"chain_crc": h.ChainCRC, "body_crc": h.BodyCRC, "body_len": h.BodyLen, "body_len_matches": true,
				"inner_check_ok": ok, "inner_check_msg_size": m.TotalSize, "inner": innerLine(&m, h.Pos+BodyOffset)}
			add("dledger_entry", line)
		}
		end, pos := r.End()
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if end == EndBlank {
			add("dledger_blank", map[string]any{"file": name, "pos": pos, "dledger_pos": base + pos, "size": st.Size() - pos})
		}
		add("dledger_file_summary", map[string]any{"file": name, "file_from_offset": base, "file_size": st.Size(),
			"entries": n, "end": end, "end_pos": pos})
		f.Close()
	}
	idx := filepath.Join(store, "dledger-n0", IndexDir)
	for _, name := range sortedNames(t, idx) {
		f, err := os.Open(filepath.Join(idx, name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		var units [][]int64
		err = sparse.Extents(f, st.Size(), func(from, to int64) error {
			from &^= IndexUnitSize - 1
			b := make([]byte, to-from)
			if _, err := f.ReadAt(b, from); err != nil {
				return err
			}
			for off := 0; off+IndexUnitSize <= len(b); off += IndexUnitSize {
				u, _ := DecodeIndexUnit(b[off:], from+int64(off))
				if !u.IsZero() {
					units = append(units, []int64{(from + int64(off)) / IndexUnitSize, int64(u.Magic), u.Pos, int64(u.Size), u.Index, u.Term})
				}
			}
			return nil
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		add("dledger_index_file", map[string]any{"file": name, "file_size": st.Size(), "units": len(units),
			"unit_format": "[slot, magic, pos, size, index, term]", "entries": units})
	}
	for _, name := range []string{CheckpointFile, TermFile} {
		b, err := os.ReadFile(filepath.Join(store, "dledger-n0", name))
		if err != nil {
			t.Fatal(err)
		}
		p, err := DecodeProperties(b)
		if err != nil {
			t.Fatal(err)
		}
		add("dledger_props", map[string]any{"file": "dledger-n0/" + name, "content": string(AppendProperties(nil, p))})
	}
	return out
}

// oracle reads the DLedger lines of <ds>.decode.jsonl, with the Java
// host strings normalised.
func oracle(t *testing.T, ds string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, l := range testutil.ReadJSONL[map[string]any](t, testutil.Testdata("rocketmq-5x", ds+".decode.jsonl")) {
		k := l["kind"].(string)
		if !strings.HasPrefix(k, "dledger_") {
			continue
		}
		if in, ok := l["inner"].(map[string]any); ok {
			in["born_host"] = normHost(in["born_host"].(string))
			in["store_host"] = normHost(in["store_host"].(string))
		}
		out[k] = append(out[k], l)
	}
	return out
}

// TestOracleDecode: every DLedger entry (header and inner message), BLANK,
// file summary, index unit and properties file of DL1-DL3 equals the real
// code's decode.
func TestOracleDecode(t *testing.T) {
	for _, ds := range dlDatasets {
		t.Run(ds, func(t *testing.T) {
			want, got := oracle(t, ds), ours(t, storeDir(t, ds))
			diffs, compared, units := 0, 0, 0
			for k, w := range want {
				g := got[k]
				if len(g) != len(w) {
					t.Errorf("%s: %d lines, oracle has %d", k, len(g), len(w))
					diffs++
				}
				for i := range min(len(w), len(g)) {
					compared++
					if k == "dledger_index_file" {
						units += len(w[i]["entries"].([]any))
					}
					if !reflect.DeepEqual(w[i], g[i]) {
						diffs++
						if diffs < 4 {
							t.Errorf("%s[%d]:\n got  %v\n want %v", k, i, g[i], w[i])
						}
					}
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: not in the oracle", k)
				}
			}
			t.Logf("%s: %d lines compared (%d entries, %d index units), %d differences", ds, compared,
				len(want["dledger_entry"]), units, diffs)
			if compared == 0 || diffs != 0 {
				t.Fatalf("%d differences over %d lines", diffs, compared)
			}
		})
	}
}

// TestEntryRoundTrip: AppendEntry, AppendIndexUnit, AppendBlank and
// AppendCheckpoint reproduce the real files' bytes.
func TestEntryRoundTrip(t *testing.T) {
	store := storeDir(t, dlDatasets[0])
	b, _ := os.ReadFile(filepath.Join(store, "dledger-n0", DataDir, "00000000000000000000"))
	r := NewReader(readerAt(b), int64(len(b)), 0, 0)
	var rebuilt, rebuiltIdx []byte
	for r.Next() {
		h := r.Header()
		rebuilt = AppendEntry(rebuilt, h, r.Body())
		rebuiltIdx = AppendIndexUnit(rebuiltIdx, h.IndexOf())
	}
	_, end := r.End()
	rebuilt = AppendBlank(rebuilt, len(b)-int(end))
	if string(rebuilt) != string(b) {
		t.Fatal("data file does not round-trip")
	}
	idx := make([]byte, len(rebuiltIdx))
	if f, err := os.Open(filepath.Join(store, "dledger-n0", IndexDir, "00000000000000000000")); err != nil {
		t.Fatal(err)
	} else if _, err := f.ReadAt(idx, 0); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if string(rebuiltIdx) != string(idx) {
		t.Fatal("index units do not round-trip")
	}
	cpb, _ := os.ReadFile(filepath.Join(store, "dledger-n0", CheckpointFile))
	cp, err := DecodeCheckpoint(cpb)
	if err != nil || cp.CommittedIndex != 299 || cp.EndIndex != 299 {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	if got := AppendCheckpoint(nil, cp); string(got) != string(cpb) {
		t.Fatalf("checkpoint does not round-trip: %q", got)
	}
	tb, _ := os.ReadFile(filepath.Join(store, "dledger-n0", TermFile))
	if tm, err := DecodeTerm(tb); err != nil || tm.CurrTerm != 0 || tm.VoteLeader != "n0" {
		t.Fatalf("currterm %+v %v", tm, err)
	}
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, errors.New("EOF")
	}
	n := copy(p, r[off:])
	if n < len(p) {
		return n, fmt.Errorf("short read")
	}
	return n, nil
}
