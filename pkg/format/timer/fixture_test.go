package timer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// The real 5.3.3 timer datasets; <ds>.tdecode.jsonl is what the real
// TimerLog, TimerWheel.getRawSlot and TimerCheckpoint.decode read.
var timerDatasets = []string{"rmq533-t1-clean", "rmq533-t2-kill", "rmq533-t3-cltrunc"}

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

// oracle lines of .tdecode.jsonl, kept as generic maps so every field the
// real code printed is compared.
func readOracle(t testing.TB, ds string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, l := range testutil.ReadJSONL[map[string]any](t, testutil.Testdata("rocketmq-5x", ds+".tdecode.jsonl")) {
		k := l["kind"].(string)
		out[k] = append(out[k], l)
	}
	return out
}

// ours renders what this package decodes in the oracle's line shapes.
func ours(t *testing.T, store string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	add := func(kind string, v map[string]any) {
		v["kind"] = kind
		b, _ := json.Marshal(v) // same number handling as the oracle's lines
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		out[kind] = append(out[kind], m)
	}
	dir := filepath.Join(store, "timerlog")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		base, err := rmq.ParseFileName(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r := NewLogReader(f, st.Size(), base)
		units, end := 0, "eof"
		for r.Next() {
			e := r.Entry()
			pos := r.Offset() - base
			switch e.Kind {
			case EntryUnit:
				u := e.Unit
				units++
				add("timer_unit", map[string]any{"file": name, "pos": pos, "offset": u.Offset, "size": u.Size,
					"prev_pos": u.PrevPos, "magic": u.Magic, "magic_flags": MagicFlags(u.Magic) + " ",
					"curr_write_time_ms": u.CurrWriteTimeMs, "delayed_ms": u.DelayedMs, "deliver_ms": u.DeliverMs(),
					"offset_py": u.OffsetPy, "size_py": u.SizePy, "hash_topic": u.HashTopic, "reserved": u.Reserved, "valid": u.Valid()})
			case EntryBlank:
				end = "blank"
				add("timer_blank", map[string]any{"file": name, "pos": pos, "offset": r.Offset(), "size": e.Rest})
			case EntryZero:
				end = "zero"
			}
		}
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f.Close()
		add("timer_file_summary", map[string]any{"file": name, "file_from_offset": base, "file_size": st.Size(), "units": units,
			"end": end, "end_pos": r.End(), "last_unit_offset_limit": OffsetForLastUnit(st.Size())})
	}
	w, err := os.Open(filepath.Join(store, "timerwheel"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, _ := w.Stat()
	n := 0
	err = ReadWheel(w, st.Size(), func(i int, s Slot) error {
		n++
		tm := s.TimeMs(DefaultPrecisionMs)
		add("wheel_slot", map[string]any{"slot_index": i, "time_ms": tm, "first_pos": s.FirstPos, "last_pos": s.LastPos,
			"num": s.Num, "magic": s.Magic, "time_matches_index": SlotIndex(tm, DefaultPrecisionMs) == i})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	add("wheel_summary", map[string]any{"file_size": st.Size(), "slots": WheelSlots, "non_empty": n})
	b, err := os.ReadFile(filepath.Join(store, "config", "timercheck"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := DecodeCheckpoint(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	add("timercheck", map[string]any{"last_read_time_ms": cp.LastReadTimeMs, "last_timerlog_flush_pos": cp.LastTimerLogFlushPos,
		"last_timer_queue_offset": cp.LastTimerQueueOffset, "master_timer_queue_offset": cp.MasterTimerQueueOffset,
		"data_version": fmt.Sprintf("DataVersion[timestamp=%d, counter=%d]", cp.Timestamp, cp.Counter)})
	return out
}

// TestOracleDecode: every timer unit, BLANK, file summary, wheel slot and
// the checkpoint of T1-T3 equal the real code's decode, field by field.
func TestOracleDecode(t *testing.T) {
	for _, ds := range timerDatasets {
		t.Run(ds, func(t *testing.T) {
			want := readOracle(t, ds)
			got := ours(t, storeDir(t, ds))
			kinds := map[string]bool{}
			for k := range want {
				kinds[k] = true
			}
			for k := range got {
				kinds[k] = true
			}
			diffs, compared := 0, 0
			for k := range kinds {
				w, g := want[k], got[k]
				if len(w) != len(g) {
					t.Errorf("%s: %d lines, oracle has %d", k, len(g), len(w))
					diffs++
				}
				for i := range min(len(w), len(g)) {
					compared++
					if !reflect.DeepEqual(w[i], g[i]) {
						diffs++
						if diffs < 5 {
							t.Errorf("%s[%d]:\n got  %v\n want %v", k, i, g[i], w[i])
						}
					}
				}
			}
			t.Logf("%s: %d lines compared (%d units, %d slots), %d differences", ds, compared,
				len(want["timer_unit"]), len(want["wheel_slot"]), diffs)
			if compared == 0 {
				t.Fatal("nothing compared")
			}
		})
	}
}

// TestUnitRoundTrip: AppendUnit, AppendSlot and AppendCheckpoint give back
// the fixture's bytes.
func TestUnitRoundTrip(t *testing.T) {
	store := storeDir(t, timerDatasets[0])
	b, err := os.ReadFile(filepath.Join(store, "timerlog", "00000000000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off+UnitSize <= 4056; off += UnitSize {
		u, err := DecodeUnit(b[off:], int64(off))
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendUnit(nil, u); string(got) != string(b[off:off+UnitSize]) {
			t.Fatalf("unit at %d does not round-trip", off)
		}
	}
	if got := AppendBlank(nil, 40); string(got) != string(b[4056:4072]) {
		t.Fatalf("blank does not round-trip: %x vs %x", got, b[4056:4072])
	}
	cpb, _ := os.ReadFile(filepath.Join(store, "config", "timercheck"))
	cp, _ := DecodeCheckpoint(cpb, 0)
	if got := AppendCheckpoint(nil, cp); string(got) != string(cpb[:CheckpointSize]) {
		t.Fatal("checkpoint does not round-trip")
	}
	w, _ := os.ReadFile(filepath.Join(store, "timerwheel"))
	_ = ReadWheel(readerAt(w), int64(len(w)), func(i int, s Slot) error {
		if got := AppendSlot(nil, s); string(got) != string(w[i*SlotSize:(i+1)*SlotSize]) {
			t.Fatalf("slot %d does not round-trip", i)
		}
		return nil
	})
	mb, _ := os.ReadFile(filepath.Join(store, "config", "timermetrics"))
	m, err := DecodeMetrics(mb)
	if err != nil || len(m.TimingCount) != 5 || m.DataVersion.Counter != 226 {
		t.Fatalf("timermetrics: %+v, %v", m, err)
	}
	m2, err := DecodeMetrics(AppendMetrics(nil, m))
	if err != nil || !reflect.DeepEqual(m, m2) {
		t.Fatalf("timermetrics does not round-trip: %v", err)
	}
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, fmt.Errorf("EOF")
	}
	return copy(p, r[off:]), nil
}
