// Package rocketmq5x writes deterministic RocketMQ 5.x stores for
// benchmarks and tests: a timer store (commitlog of rmq_sys_wheel_timer
// messages, its consume queue, the timerlog, the wheel and the checkpoint
// of a broker whose timer is keeping up) and a DLedger store (entries
// around commitlog records, index, checkpoint, currterm, consume queues).
// Files are written as they are filled, so memory stays flat in the store
// size.
package rocketmq5x

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	fdl "github.com/storectl/storectl/pkg/format/dledger"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	ftimer "github.com/storectl/storectl/pkg/format/timer"

	genrmq "github.com/storectl/storectl/internal/gen/rocketmq"
)

// Config says what to write.
type Config struct {
	FileSize   int64 // commitlog (or DLedger data) file size; default 128 MiB
	TotalBytes int64 // stop once this many log bytes hold records
	Seed       uint64
	// Timer store only.
	TimerLogFileSize int64 // default 100 MiB
	SpacingMs        int64 // store time between two timer messages; default 10
	MaxDelayS        int64 // delays are 1..MaxDelayS seconds; default 120
}

// Summary says what was written.
type Summary struct {
	Messages int
	LogBytes int64 // bytes of the log files (commitlog or DLedger data)
	Units    int   // timer units
	Pending  int   // timer units due at or after the checkpoint's read time
	End      int64
}

var realTopics = []string{"TopicA", "TopicB", "TopicC", "%RETRY%GroupX"}

// fileWriter fills fixed-size files of one dir in order.
type fileWriter struct {
	dir  string
	size int64
	f    *os.File
	base int64
	pos  int64
}

func (w *fileWriter) open() error {
	if w.f != nil {
		if err := w.close(); err != nil {
			return err
		}
		w.base += w.size
	}
	f, err := os.Create(filepath.Join(w.dir, rmq.FormatFileName(w.base)))
	if err != nil {
		return err
	}
	w.f, w.pos = f, 0
	return f.Truncate(w.size)
}

func (w *fileWriter) write(b []byte) error {
	if _, err := w.f.WriteAt(b, w.pos); err != nil {
		return err
	}
	w.pos += int64(len(b))
	return nil
}

func (w *fileWriter) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

func (c *Config) fill() {
	if c.FileSize <= 0 {
		c.FileSize = 128 << 20
	}
	if c.TimerLogFileSize <= 0 {
		c.TimerLogFileSize = ftimer.DefaultLogFileSize
	}
	if c.SpacingMs <= 0 {
		c.SpacingMs = 10
	}
	if c.MaxDelayS <= 0 {
		c.MaxDelayS = 120
	}
}

var storeHost = rmq.Host{Addr: netip.MustParseAddr("192.168.0.10"), Port: 10911}

func message(rng *rand.Rand, i int, topic string, qid int32, qoff, phy, storeMs int64, props string) []byte {
	body := make([]byte, 100+rng.IntN(1400))
	for j := range body {
		body[j] = byte('a' + (i+j)%26)
	}
	return genrmq.EncodeMessage(&genrmq.Msg{Topic: topic, QueueID: qid, QueueOffset: qoff, PhysicalOffset: phy,
		BornTimestamp: storeMs - 5, BornHost: rmq.Host{Addr: netip.MustParseAddr("10.1.2.3"), Port: 50001}, StoreTimestamp: storeMs,
		StoreHost: storeHost, Body: body, Properties: props})
}

func uniq(i int) string { return fmt.Sprintf("7F00000100002A9F%016X", i) }

// GenerateTimer writes a timer store under dir: TotalBytes of timer
// messages in commitlog/, their units in timerlog/ (prevPos chains per
// slot, BLANK file ends), the wheel with the last unit of every slot, the
// timer consume queue and a checkpoint whose read time is 60 s before the
// last message was stored, as a broker that keeps up leaves them.
func GenerateTimer(dir string, cfg Config) (*Summary, error) {
	cfg.fill()
	rng := rand.New(rand.NewPCG(cfg.Seed, 5))
	for _, d := range []string{"commitlog", "timerlog", "config", "consumequeue/rmq_sys_wheel_timer/0"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	cl := &fileWriter{dir: filepath.Join(dir, "commitlog"), size: cfg.FileSize}
	tl := &fileWriter{dir: filepath.Join(dir, "timerlog"), size: cfg.TimerLogFileSize}
	cq := &fileWriter{dir: filepath.Join(dir, "consumequeue/rmq_sys_wheel_timer/0"), size: rmq.DefaultCQFileSize}
	for _, w := range []*fileWriter{cl, tl, cq} {
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	const t0 = 1796163754000
	type slotState struct {
		first, last int64
		num         int32
	}
	slots := map[int64]*slotState{} // slot time -> state
	sum := &Summary{}
	for i := 0; ; i++ {
		storeMs := t0 + int64(i)*cfg.SpacingMs
		delay := (1 + rng.Int64N(cfg.MaxDelayS)) * 1000
		out := (storeMs + delay) / 1000 * 1000
		rt := realTopics[i%len(realTopics)]
		props := genrmq.Props("REAL_TOPIC", rt, "REAL_QID", strconv.Itoa(i%4), "TIMER_OUT_MS", strconv.FormatInt(out, 10),
			"TIMER_DELAY_SEC", strconv.FormatInt(delay/1000, 10), "UNIQ_KEY", uniq(i), "seq", strconv.Itoa(i))
		phy := cl.base + cl.pos
		rec := message(rng, i, "rmq_sys_wheel_timer", 0, int64(i), phy, storeMs, props)
		if cl.pos+int64(len(rec))+rmq.BlankSize > cl.size {
			if err := cl.write(genrmq.AppendBlank(nil, int(cl.size-cl.pos))); err != nil {
				return nil, err
			}
			if cl.base+cl.size >= cfg.TotalBytes {
				break
			}
			if err := cl.open(); err != nil {
				return nil, err
			}
			phy = cl.base
			rec = message(rng, i, "rmq_sys_wheel_timer", 0, int64(i), phy, storeMs, props)
		}
		if err := cl.write(rec); err != nil {
			return nil, err
		}
		sum.Messages++
		// Consume queue unit.
		if cq.pos+rmq.CQUnitSize > cq.size {
			if err := cq.open(); err != nil {
				return nil, err
			}
		}
		if err := cq.write(rmq.AppendCQUnit(nil, rmq.CQUnit{CommitLogOffset: phy, Size: int32(len(rec))})); err != nil {
			return nil, err
		}
		// Timer unit: enqueued one precision tick after it was stored.
		write := (storeMs + 1000) / 1000 * 1000
		if tl.pos+ftimer.UnitSize+ftimer.BlankSize > tl.size {
			if err := tl.write(ftimer.AppendBlank(nil, int32(tl.size-tl.pos))); err != nil {
				return nil, err
			}
			if err := tl.open(); err != nil {
				return nil, err
			}
		}
		off := tl.base + tl.pos
		st := slots[out/1000]
		if st == nil {
			st = &slotState{first: off, last: -1}
			slots[out/1000] = st
		}
		u := ftimer.Unit{Size: ftimer.UnitSize, PrevPos: st.last, Magic: ftimer.MagicDefault, CurrWriteTimeMs: write,
			DelayedMs: int32(out - write), OffsetPy: phy, SizePy: int32(len(rec)), HashTopic: rmq.JavaHashCode([]byte(rt))}
		if err := tl.write(ftimer.AppendUnit(nil, u)); err != nil {
			return nil, err
		}
		st.last, st.num = off, st.num+1
		sum.Units++
		sum.End = phy + int64(len(rec))
	}
	lastStore := t0 + int64(sum.Messages-1)*cfg.SpacingMs
	readMs := (lastStore - 60_000) / 1000 * 1000
	// The wheel: the last unit of every slot still inside the 14 days.
	wf, err := os.Create(filepath.Join(dir, "timerwheel"))
	if err != nil {
		return nil, err
	}
	if err := wf.Truncate(ftimer.WheelSize); err != nil {
		return nil, err
	}
	for t, st := range slots {
		if t*1000 >= readMs {
			sum.Pending += int(st.num)
		}
		b := ftimer.AppendSlot(nil, ftimer.Slot{Time: t, FirstPos: st.first, LastPos: st.last, Num: st.num})
		if _, err := wf.WriteAt(b, int64(ftimer.SlotIndex(t*1000, 1000))*ftimer.SlotSize); err != nil {
			return nil, err
		}
	}
	if err := wf.Close(); err != nil {
		return nil, err
	}
	tlEnd := tl.base + tl.pos
	cp := ftimer.AppendCheckpoint(nil, ftimer.Checkpoint{LastReadTimeMs: readMs, LastTimerLogFlushPos: tlEnd,
		LastTimerQueueOffset: int64(sum.Messages), MasterTimerQueueOffset: int64(sum.Messages), Timestamp: lastStore, Counter: 1})
	if err := os.WriteFile(filepath.Join(dir, "config", "timercheck"), append(cp, make([]byte, ftimer.CheckpointFileSize-len(cp))...), 0o644); err != nil {
		return nil, err
	}
	if err := writeStoreCheckpoint(dir, lastStore); err != nil {
		return nil, err
	}
	for _, w := range []*fileWriter{cl, tl, cq} {
		if err := w.close(); err != nil {
			return nil, err
		}
	}
	sum.LogBytes = cl.base + cl.size
	return sum, nil
}

// GenerateDLedger writes a one-node DLedger store under dir: TotalBytes of
// entries (term 0, index +1) around commitlog records of four topics in
// dledger-n0/data, their index units, a checkpoint committing them all,
// currterm, and the consume queues at the inner offsets (pos + 48).
func GenerateDLedger(dir string, cfg Config) (*Summary, error) {
	cfg.fill()
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	root := filepath.Join(dir, "dledger-n0")
	for _, d := range []string{"data", "index"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	data := &fileWriter{dir: filepath.Join(root, "data"), size: cfg.FileSize}
	idx := &fileWriter{dir: filepath.Join(root, "index"), size: fdl.DefaultIndexFileSize}
	if err := data.open(); err != nil {
		return nil, err
	}
	if err := idx.open(); err != nil {
		return nil, err
	}
	cqs := map[string]*fileWriter{}
	qoffs := map[string]int64{}
	sum := &Summary{}
	const t0 = 1796163800000
	for i := 0; ; i++ {
		topic := realTopics[i%len(realTopics)]
		qid := int32(i/len(realTopics)) % 4
		key := topic + "/" + strconv.Itoa(int(qid))
		pos := data.base + data.pos
		body := message(rng, i, topic, qid, qoffs[key], pos+fdl.BodyOffset, t0+int64(i), genrmq.Props("UNIQ_KEY", uniq(i)))
		if data.pos+fdl.BodyOffset+int64(len(body))+fdl.MinBlankLen > data.size {
			if err := data.write(fdl.AppendBlank(nil, int(data.size-data.pos))); err != nil {
				return nil, err
			}
			if data.base+data.size >= cfg.TotalBytes {
				break
			}
			if err := data.open(); err != nil {
				return nil, err
			}
			pos = data.base
			body = message(rng, i, topic, qid, qoffs[key], pos+fdl.BodyOffset, t0+int64(i), genrmq.Props("UNIQ_KEY", uniq(i)))
		}
		h := fdl.Header{Magic: fdl.Magic1, Index: int64(i), Pos: pos}
		if err := data.write(fdl.AppendEntry(nil, h, body)); err != nil {
			return nil, err
		}
		h.Size = int32(fdl.BodyOffset + len(body))
		if idx.pos+fdl.IndexUnitSize > idx.size {
			if err := idx.open(); err != nil {
				return nil, err
			}
		}
		if err := idx.write(fdl.AppendIndexUnit(nil, h.IndexOf())); err != nil {
			return nil, err
		}
		cq := cqs[key]
		if cq == nil {
			d := filepath.Join(dir, "consumequeue", topic, strconv.Itoa(int(qid)))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			cq = &fileWriter{dir: d, size: rmq.DefaultCQFileSize}
			if err := cq.open(); err != nil {
				return nil, err
			}
			cqs[key] = cq
		}
		if cq.pos+rmq.CQUnitSize > cq.size {
			if err := cq.open(); err != nil {
				return nil, err
			}
		}
		if err := cq.write(rmq.AppendCQUnit(nil, rmq.CQUnit{CommitLogOffset: pos + fdl.BodyOffset, Size: int32(len(body))})); err != nil {
			return nil, err
		}
		qoffs[key]++
		sum.Messages++
		sum.End = pos + int64(h.Size)
	}
	if err := writeStoreCheckpoint(dir, t0+int64(sum.Messages)); err != nil {
		return nil, err
	}
	last := int64(sum.Messages - 1)
	cp := fdl.AppendCheckpoint(nil, fdl.Checkpoint{CommittedIndex: last, EndIndex: last})
	if err := os.WriteFile(filepath.Join(root, "checkpoint"), cp, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "currterm"), []byte("voteLeader=n0\ncurrTerm=0\n"), 0o644); err != nil {
		return nil, err
	}
	for _, w := range append([]*fileWriter{data, idx}, values(cqs)...) {
		if err := w.close(); err != nil {
			return nil, err
		}
	}
	sum.LogBytes = data.base + data.size
	return sum, nil
}

func values(m map[string]*fileWriter) []*fileWriter {
	out := make([]*fileWriter, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// writeStoreCheckpoint writes the store root's checkpoint file (one page).
func writeStoreCheckpoint(dir string, ts int64) error {
	b := rmq.AppendCheckpoint(nil, rmq.Checkpoint{PhysicMsgTimestamp: ts, LogicsMsgTimestamp: ts, IndexMsgTimestamp: ts})
	return os.WriteFile(filepath.Join(dir, "checkpoint"), append(b, make([]byte, 4096-len(b))...), 0o644)
}
