package rabbitmq

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/storectl/storectl/pkg/format/etf"

	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// segEntries is the v2 index segment size the broker writes by default.
const segEntries = rfmt.QIDefaultSegmentEntryCount

// QIFile returns a v2 .qi segment S whose first len(ids) slots are
// persistent shared-store publishes of ids, with payload size psize[i].
func QIFile(seg uint64, ids [][16]byte, psize []uint32) []byte {
	b := make([]byte, rfmt.QIHeaderSize+rfmt.QIEntrySize*len(ids))
	binary.BigEndian.PutUint32(b, rfmt.QIMagic)
	b[4] = rfmt.QIVersion
	binary.BigEndian.PutUint64(b[5:], seg*segEntries)
	binary.BigEndian.PutUint64(b[13:], (seg+1)*segEntries)
	for i, id := range ids {
		e := b[rfmt.QIHeaderSize+rfmt.QIEntrySize*i:]
		e[0], e[1], e[3] = 1, 1, 1
		copy(e[4:20], id[:])
		if i < len(psize) {
			binary.BigEndian.PutUint32(e[20:], psize[i])
		}
	}
	return b
}

// WriteQueue writes queues/<QueueDirName(vhost, queue)>/ under vhostDir:
// .queue_name and as many .qi segments as ids need.
func WriteQueue(vhostDir, vhost, queue string, ids [][16]byte) error {
	dir := filepath.Join(vhostDir, "queues", rfmt.QueueDirName(vhost, queue))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := "VHOST: " + vhost + "\nQUEUE: " + queue + "\nINDEX: v2\n"
	if err := os.WriteFile(filepath.Join(dir, ".queue_name"), []byte(name), 0o644); err != nil {
		return err
	}
	for seg := 0; seg*segEntries < len(ids) || seg == 0; seg++ {
		part := ids[seg*segEntries : min(len(ids), (seg+1)*segEntries)]
		p := filepath.Join(dir, strconv.Itoa(seg)+".qi")
		if err := os.WriteFile(p, QIFile(uint64(seg), part, nil), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Config says what Generate writes.
type Config struct {
	Seed       uint64
	Kind       TermKind // body term shape
	TotalBytes int64    // stop once the store holds this many bytes
	FileLimit  int64    // msg_store_file_size_limit; default 16 MiB
	Queues     int      // queues q1..qN; default 4
	// HoleEvery, when > 0, puts a zero hole of 1..HoleMax bytes before
	// roughly every HoleEvery-th record, as 3.13.2+/4.x compaction leaves.
	// Records after a hole never meet the §3.4 misread condition: the
	// generator keeps its output free of hazards unless asked.
	HoleEvery, HoleMax int
	// UnrefEvery, when > 0, leaves every UnrefEvery-th record unreferenced.
	UnrefEvery int
	// BodyMin and BodyMax bound the payload sizes (bytes); 0, 0 is the
	// fixtures' 4096..20000.
	BodyMin, BodyMax int
	// CleanShutdown writes what a clean stop leaves in msg_store_persistent:
	// clean.dot (one client ref per queue), msg_store_index.ets (one entry,
	// ref count 1, per referenced record) and file_summary.ets (each
	// file's referenced bytes and size).
	CleanShutdown bool
	// KeepRecords lists every record written in Summary.Written: the
	// truth a scan of the store is tested against.
	KeepRecords bool
}

// Summary says what Generate wrote.
type Summary struct {
	VHostDir string
	Files    []string // .rdq paths in numeric order
	Records  int
	Bytes    int64
	Refs     map[[16]byte]string // referenced id -> queue
	Written  []Written           // with Config.KeepRecords: every record, in write order
}

// Written is one record Generate wrote.
type Written struct {
	File   int   // N of N.rdq (an index into Summary.Files)
	Offset int64 // where its frame starts
	Size   int64 // frame bytes: 8-byte size, 16-byte id, body, 0xFF marker
	ID     [16]byte
	Queue  string // the queue referencing it; "" when unreferenced
}

// Generate writes a vhost dir (msg_store_persistent/N.rdq and
// queues/*/S.qi) for vhost "/" under dir and returns what it wrote.
func Generate(dir string, cfg Config) (*Summary, error) {
	if cfg.FileLimit <= 0 {
		cfg.FileLimit = 16 << 20
	}
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	if cfg.HoleMax <= 0 {
		cfg.HoleMax = 300
	}
	vdir := filepath.Join(dir, rfmt.VHostDirName("/"))
	store := filepath.Join(vdir, "msg_store_persistent")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9E3779B97F4A7C15))
	s := &Summary{VHostDir: vdir, Refs: map[[16]byte]string{}}
	queueIDs := make([][][16]byte, cfg.Queues)
	var cur []byte
	var locs []rfmt.MsgLocation
	var sums []rfmt.FileSummary
	valid := int64(0)
	flush := func() error {
		p := filepath.Join(store, strconv.Itoa(len(s.Files))+".rdq")
		// Left, Right and Readers nil: EncodeFileSummary writes undefined.
		sums = append(sums, rfmt.FileSummary{File: int64(len(s.Files)), ValidTotalSize: valid, FileSize: int64(len(cur))})
		valid = 0
		s.Files = append(s.Files, p)
		s.Bytes += int64(len(cur))
		err := os.WriteFile(p, cur, 0o644)
		cur = cur[:0]
		return err
	}
	for seq := 0; s.Bytes+int64(len(cur)) < cfg.TotalBytes; seq++ {
		m := genMessage(rng, seq, cfg.BodyMin, cfg.BodyMax)
		rec := Record(cfg.Kind, m)
		if cfg.HoleEvery > 0 && len(cur) > 0 && rng.IntN(cfg.HoleEvery) == 0 {
			if k := 1 + rng.IntN(cfg.HoleMax); !HoleMisreads(rec, k) {
				cur = append(cur, make([]byte, k)...)
			}
		}
		at := int64(len(cur))
		cur = append(cur, rec...)
		s.Records++
		w := Written{File: len(s.Files), Offset: at, Size: int64(len(rec)), ID: m.ID}
		if cfg.UnrefEvery <= 0 || seq%cfg.UnrefEvery != cfg.UnrefEvery-1 {
			q := seq % cfg.Queues
			queueIDs[q] = append(queueIDs[q], m.ID)
			s.Refs[m.ID] = fmt.Sprintf("q%d", q+1)
			w.Queue = s.Refs[m.ID]
			if cfg.CleanShutdown {
				locs = append(locs, rfmt.MsgLocation{MsgID: m.ID, RefCount: 1, File: int64(len(s.Files)), Offset: at,
					TotalSize: int64(len(rec))})
				valid += int64(len(rec))
			}
		}
		if cfg.KeepRecords {
			s.Written = append(s.Written, w)
		}
		if int64(len(cur)) >= cfg.FileLimit {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if len(cur) > 0 || len(s.Files) == 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	for q, ids := range queueIDs {
		if err := WriteQueue(vdir, "/", fmt.Sprintf("q%d", q+1), ids); err != nil {
			return nil, err
		}
	}
	if cfg.CleanShutdown {
		if err := writeCleanShutdown(store, rng, cfg.Queues, locs, sums); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// writeCleanShutdown writes clean.dot, msg_store_index.ets and
// file_summary.ets into store.
func writeCleanShutdown(store string, rng *rand.Rand, clients int, locs []rfmt.MsgLocation, sums []rfmt.FileSummary) error {
	dot := rfmt.CleanDot{ClientRefs: make([][16]byte, clients), IndexModule: "rabbit_msg_store_ets_index"}
	for i := range dot.ClientRefs {
		for j := range dot.ClientRefs[i] {
			dot.ClientRefs[i][j] = byte(rng.IntN(256))
		}
	}
	opts := rfmt.ETSEncodeOptions{Atoms: etf.AtomsUTF8}
	idx, err := rfmt.EncodeMsgStoreIndex(locs, opts)
	if err != nil {
		return err
	}
	fsum, err := rfmt.EncodeFileSummary(sums, opts)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"clean.dot": rfmt.EncodeCleanDot(dot), "msg_store_index.ets": idx, "file_summary.ets": fsum} {
		if err := os.WriteFile(filepath.Join(store, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// genMessage is the publisher scheme of the fixtures: payload 4096..20000
// bytes (lo..hi when hi > 0), content by seq%6 (zeros, 0xFF, 0xFF runs +
// text, random, fake .rdq frames, text with a 0xFF tail).
func genMessage(rng *rand.Rand, seq, lo, hi int) *Message {
	m := &Message{Exchange: "fx.direct", RoutingKey: "k" + strconv.Itoa(1+seq%4),
		MessageID: fmt.Sprintf("m%06d", seq), Timestamp: 1795998643560 + int64(seq)}
	for i := 0; i < 16; i += 8 {
		binary.BigEndian.PutUint64(m.ID[i:], rng.Uint64())
	}
	if hi <= 0 {
		lo, hi = 4096, 20000
	}
	n := lo + (seq*7919)%(hi-lo+1)
	p := make([]byte, n)
	switch seq % 6 {
	case 1:
		for i := range p {
			p[i] = 0xFF
		}
	case 2:
		for i := 0; i < n; {
			r := 1 + rng.IntN(600)
			for j := 0; j < r && i < n; j++ {
				p[i] = 0xFF
				i++
			}
			i += copy(p[i:], fmt.Sprintf("<seq=%d off=%d>", seq, i))
		}
	case 3:
		for i := range p {
			if rng.IntN(2) == 0 {
				p[i] = 0xFF
			} else {
				p[i] = byte(rng.IntN(256))
			}
		}
	case 4:
		for i := 0; i+25 < n; {
			l := 16 + rng.IntN(40)
			binary.BigEndian.PutUint64(p[i:], uint64(l))
			for j := 0; j < l && i+8+j < n; j++ {
				p[i+8+j] = byte(rng.IntN(256))
			}
			if i+8+l < n {
				p[i+8+l] = 0xFF
			}
			i += l + 9
		}
	case 5:
		for i := range p {
			if i >= n*3/4 {
				p[i] = 0xFF
			} else {
				p[i] = 'a' + byte(i%26)
			}
		}
	}
	m.Payload = p
	return m
}

// HoleMisreads reports whether a zero hole of k bytes right before rec
// meets the §3.4 condition: for the largest j ≤ min(k,7) with
// C_j = Size>>(8j) ≥ 16, the byte at 8−j+C_j inside rec is 0xFF.
func HoleMisreads(rec []byte, k int) bool {
	s := binary.BigEndian.Uint64(rec)
	for j := min(k, 7); j >= 1; j-- {
		c := s >> (8 * uint(j))
		if c < 16 {
			continue
		}
		r := uint64(8-j) + c
		if r < uint64(len(rec)) && rec[r] == 0xFF {
			return true
		}
	}
	return false
}
