package rocketmq

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/storectl/storectl/internal/sparse"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// Config says what Generate writes.
type Config struct {
	MappedFileSize int64 // commitlog file size; default 1 MiB
	TotalBytes     int64 // stop once this many commitlog bytes hold records
	Seed           uint64
	PropCRC        bool  // write __CRC32# on every record
	CQFileSize     int64 // consume queue file size; default 300000 units
	MaxBody        int   // largest body; default 20000
	// BodyMin and BodyMax, when BodyMax > 0, draw every body size
	// uniformly from [BodyMin, BodyMax] instead of the default mix
	// (small-message stores: 100-200 bytes, millions of records per GiB).
	BodyMin, BodyMax int
	// Topics and QueuesPerTopic, when Topics > 0, spread the records over
	// Topics topics (Topic-000000, ...) of QueuesPerTopic queues each
	// instead of the default five topics (many-queue stores).
	Topics, QueuesPerTopic int
	// DenseCQ writes the consume queue files' zero tails out in full (as a
	// copy that does not keep holes leaves them) instead of as holes.
	DenseCQ bool
	// Index also writes the index files and the checkpoint a broker that
	// dispatched every record and shut down cleanly leaves, with
	// IndexSlots and IndexEntries per index file (the broker's 5,000,000
	// and 20,000,000 when 0).
	Index                    bool
	IndexSlots, IndexEntries int64
}

// Summary describes what Generate wrote.
type Summary struct {
	Files    []string // commitlog file paths, in offset order
	Messages int
	End      int64 // physical offset after the last record
}

type topic struct {
	name   string
	queues int32
}

var topics = []topic{{"TopicA", 4}, {"TopicB", 2}, {"TopicC-v6", 1}, {"%RETRY%GroupX", 1}, {"TopicLongName-V2-" + string(make128x()), 1}}

func make128x() []byte {
	b := make([]byte, 120)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

var bodySizes = []int{0, 1, 7, 64, 100, 255, 256, 1000, 1500, 3000, 4096, 8000, 12000, 20000}

// Generate writes a deterministic store under dir: commitlog files of
// MappedFileSize ending in BLANK records, the last one zero-filled after
// its last record, and matching consumequeue files.
func Generate(dir string, cfg Config) (*Summary, error) {
	if cfg.MappedFileSize <= 0 {
		cfg.MappedFileSize = 1 << 20
	}
	if cfg.CQFileSize <= 0 {
		cfg.CQFileSize = rmq.DefaultCQFileSize
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 20000
	}
	if cfg.MaxBody+1024 > int(cfg.MappedFileSize)/2 {
		return nil, fmt.Errorf("gen: MaxBody %d too large for mapped size %d", cfg.MaxBody, cfg.MappedFileSize)
	}
	if cfg.BodyMax > 0 && (cfg.BodyMin < 0 || cfg.BodyMin > cfg.BodyMax || cfg.BodyMax > cfg.MaxBody) {
		return nil, fmt.Errorf("gen: body sizes %d-%d out of range", cfg.BodyMin, cfg.BodyMax)
	}
	tops := topics
	if cfg.Topics > 0 {
		qpt := int32(max(cfg.QueuesPerTopic, 1))
		tops = make([]topic, cfg.Topics)
		for i := range tops {
			tops[i] = topic{fmt.Sprintf("Topic-%06d", i), qpt}
		}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	cl := filepath.Join(dir, "commitlog")
	if err := os.MkdirAll(cl, 0o755); err != nil {
		return nil, err
	}
	sum := &Summary{}
	cq := map[string][]byte{}
	qoff := map[string]int64{}
	buf := make([]byte, 0, cfg.MappedFileSize)
	var base int64
	body := make([]byte, cfg.MaxBody)
	ts := int64(1795996087591)
	flush := func(last bool) error {
		out := buf[:cfg.MappedFileSize]
		clear(out[len(buf):])
		p := filepath.Join(cl, rmq.FormatFileName(base))
		sum.Files = append(sum.Files, p)
		base += cfg.MappedFileSize
		buf = buf[:0]
		return os.WriteFile(p, out, 0o644)
	}
	var idx *indexGen
	if cfg.Index {
		lay := rmq.IndexLayout{Slots: cfg.IndexSlots, Entries: cfg.IndexEntries}
		if lay.Slots <= 0 {
			lay.Slots = rmq.DefaultIndexSlots
		}
		if lay.Entries <= 0 {
			lay.Entries = rmq.DefaultIndexEntries
		}
		var err error
		if idx, err = newIndexGen(dir, lay); err != nil {
			return nil, err
		}
	}
	var physicTS, logicsTS int64
	var rec []byte
	for i := 0; base+int64(len(buf)) < cfg.TotalBytes; i++ {
		t := tops[rng.IntN(len(tops))]
		q := rng.Int32N(t.queues)
		m := &Msg{Topic: t.name, QueueID: q, BornTimestamp: 1700000000000 + int64(i)*1000,
			BornHost:  rmq.Host{Addr: netip.AddrFrom4([4]byte{10, 1, 2, 3}), Port: 50000 + int32(i%1000)},
			StoreHost: rmq.Host{Addr: netip.AddrFrom4([4]byte{192, 168, 0, 10}), Port: 10911},
			PropCRC:   cfg.PropCRC}
		if t.name == "TopicC-v6" || i%17 == 0 {
			m.BornHost = rmq.Host{Addr: netip.MustParseAddr("2001:db8::1234:5678"), Port: 41234}
		}
		if t.name == "TopicC-v6" && i%2 == 0 {
			m.StoreHost = rmq.Host{Addr: netip.IPv6Loopback(), Port: 10911}
		}
		n := min(bodySizes[rng.IntN(len(bodySizes))], cfg.MaxBody)
		if cfg.BodyMax > 0 {
			n = cfg.BodyMin + rng.IntN(cfg.BodyMax-cfg.BodyMin+1)
		}
		fillBody(body[:n], rng, i)
		m.Body = body[:n]
		kv := []string{rmq.PropUniqKey, fmt.Sprintf("7F00000100002A9F%016X", i)}
		switch i % 3 {
		case 1:
			kv = append(kv, rmq.PropTags, "TagA")
		case 2:
			kv = append(kv, rmq.PropTags, "TagB")
		}
		switch i % 4 {
		case 1:
			kv = append(kv, rmq.PropKeys, "key-"+strconv.Itoa(i))
		case 2:
			kv = append(kv, rmq.PropKeys, fmt.Sprintf("multi-%d k2-%d", i, i))
		}
		kv = append(kv, "seq", strconv.Itoa(i), "unicode", "café-✓-中")
		m.Properties = Props(kv...)
		if i%23 == 5 {
			m.SysFlag = rmq.TxPrepared // written, not dispatched
		}
		if i%11 == 3 {
			m.ReconsumeTimes = 2
		}
		key := t.name + "/" + strconv.Itoa(int(q))
		if m.SysFlag&rmq.FlagTransactionMask == rmq.TxNotType {
			m.QueueOffset = qoff[key]
		}
		ts += int64(rng.IntN(3))
		m.StoreTimestamp = ts
		// Size first, so the BLANK decision matches the broker's.
		rec = AppendMessage(rec[:0], m)
		if int64(len(buf)+len(rec)+rmq.BlankSize) > cfg.MappedFileSize {
			buf = AppendBlank(buf, int(cfg.MappedFileSize)-len(buf))
			if err := flush(false); err != nil {
				return nil, err
			}
		}
		m.PhysicalOffset = base + int64(len(buf))
		rec = AppendMessage(rec[:0], m)
		buf = append(buf, rec...)
		sum.Messages++
		dm, _ := rmq.DecodeMessage(rec, m.PhysicalOffset, 0)
		if m.SysFlag&rmq.FlagTransactionMask == rmq.TxNotType {
			cq[key] = rmq.AppendCQUnit(cq[key], rmq.CQUnit{CommitLogOffset: m.PhysicalOffset, Size: int32(len(rec)), TagsCode: dm.TagsCode()})
			qoff[key]++
			logicsTS = m.StoreTimestamp
		}
		physicTS = m.StoreTimestamp
		if idx != nil {
			if err := idx.record(&dm, m.PhysicalOffset); err != nil {
				return nil, err
			}
		}
	}
	sum.End = base + int64(len(buf))
	if err := flush(true); err != nil {
		return nil, err
	}
	if idx != nil {
		if err := idx.close(); err != nil {
			return nil, err
		}
		if err := writeCheckpoint(dir, physicTS, logicsTS, idx.lastFull); err != nil {
			return nil, err
		}
	}
	return sum, writeCQ(dir, cq, cfg.CQFileSize, cfg.DenseCQ)
}

func fillBody(b []byte, rng *rand.Rand, i int) {
	switch i % 5 {
	case 0:
		for j := range b {
			b[j] = 0xFF
		}
	case 1:
		for j := range b {
			b[j] = byte('a' + j%26)
		}
	case 2:
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
	case 3: // fake record headers, to trip naive magic scanners
		for j := 0; j+8 <= len(b); j += 8 {
			copy(b[j:], []byte{0, 0, 0, 0x5c, 0xda, 0xa3, 0x20, 0xa7})
		}
	default:
		for j := range b {
			b[j] = byte(j & 1 * 0xFF)
		}
	}
}

// writeCQ writes every queue's units as the broker leaves them: files of
// fileSize bytes, the last one sparse (the broker's FileChannel.map
// extends a new file to its full size without writing it, so what follows
// the last unit is a hole), or with its zeros written when dense.
func writeCQ(dir string, cq map[string][]byte, fileSize int64, dense bool) error {
	for key, units := range cq {
		qdir := filepath.Join(dir, "consumequeue", filepath.FromSlash(key))
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			return err
		}
		for off := int64(0); off < int64(len(units)); off += fileSize {
			p := filepath.Join(qdir, rmq.FormatFileName(off))
			b := units[off:min(off+fileSize, int64(len(units)))]
			if dense {
				b = append(b[:len(b):len(b)], make([]byte, fileSize-int64(len(b)))...)
			}
			if err := sparse.WriteFile(p, b, fileSize); err != nil {
				return err
			}
		}
	}
	return nil
}
