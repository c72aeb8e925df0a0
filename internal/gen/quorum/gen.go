// Package quorum writes deterministic RabbitMQ quorum queue files (a node
// dir with quorum/<node>/: the shared WAL and, per queue, a replica dir
// with its config and segments) of a given size, as RabbitMQ 4.0 writes
// them: per queue the term-0 entry at index 0, a noop, then rabbit_fifo
// enqueue commands ({e, Seq, #mc{}, Size}) of AMQP 0-9-1 messages; the
// older entries in segments (version 2, 4096 slots, CRC-32 per entry),
// the newest in the WAL, the queues' records interleaved, each writer's
// first record with its UId inline and the others by reference. For
// benchmarks (genstore -kind rabbitmq-quorum) and tests.
package quorum

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/internal/gen/rabbitmq"
	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
)

// Config says what to write.
type Config struct {
	Seed uint64
	// TotalBytes is about the size of the WAL and segments written.
	TotalBytes int64
	// WALBytes is about the size of the WAL (default a quarter of
	// TotalBytes, at most ra's default wal_max_size_bytes of 512 MiB).
	WALBytes int64
	// SegmentEntries is the slots of a segment (ra's default 4096).
	SegmentEntries int
	// BodyMin and BodyMax bound the message bodies (default 100-2000).
	BodyMin, BodyMax int
	// Queues spreads the messages over this many queues (default 4).
	Queues int
}

// Summary is what Generate wrote.
type Summary struct {
	Node       string // the node dir (the target of a scan)
	Segments   int
	WALRecords int
	Messages   int
	Bytes      int64 // WAL and segment bytes
}

const nodeName = "rmqbench@localhost"

type queue struct {
	name, uid, dir string
	next           uint64 // next Raft index
	seq            int64
	segN           int
	seg            *segment
	inWAL          bool // its writer is registered in the WAL
}

// segment is a segment being filled: the data in a temp file after the
// index table, which is written at close.
type segment struct {
	f     *os.File
	w     *bufio.Writer
	slots []byte
	n     int
	off   int64
}

// Generate writes a node dir rmqbench@localhost under out.
func Generate(out string, cfg Config) (Summary, error) {
	if cfg.BodyMax == 0 {
		cfg.BodyMin, cfg.BodyMax = 100, 2000
	}
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	if cfg.SegmentEntries <= 0 {
		cfg.SegmentEntries = ra.DefaultSegmentMaxEntries
	}
	if cfg.WALBytes <= 0 {
		cfg.WALBytes = min(cfg.TotalBytes/4, 512<<20)
	}
	node := filepath.Join(out, nodeName)
	sys := filepath.Join(node, "quorum", nodeName)
	sum := Summary{Node: node}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9ab))
	var qs []*queue
	for i := range cfg.Queues {
		name := fmt.Sprintf("bench%d", i)
		uid := fmt.Sprintf("2F_%s%011X", strings.ToUpper(name), rng.Uint64()>>20)
		q := &queue{name: name, uid: uid, dir: filepath.Join(sys, uid)}
		if err := os.MkdirAll(q.dir, 0o755); err != nil {
			return sum, err
		}
		if err := os.WriteFile(filepath.Join(q.dir, "config"), []byte(configText(name, uid)), 0o644); err != nil {
			return sum, err
		}
		qs = append(qs, q)
	}
	// an empty coordination WAL, as every node has
	coord := filepath.Join(node, "coordination", nodeName)
	if err := os.MkdirAll(coord, 0o755); err != nil {
		return sum, err
	}
	if err := os.WriteFile(filepath.Join(coord, "00000001.wal"), ra.AppendWALHeader(nil), 0o644); err != nil {
		return sum, err
	}
	pid := pidTerm()
	segBytes := cfg.TotalBytes - cfg.WALBytes
	var written int64
	var wal *bufio.Writer
	var walFile *os.File
	var rec []byte
	msgID := 0
	for written < cfg.TotalBytes {
		q := qs[msgID%len(qs)]
		var data []byte
		var err error
		term := uint64(1)
		switch q.next {
		case 0:
			data, term = []byte{131, 119, 9, 'u', 'n', 'd', 'e', 'f', 'i', 'n', 'e', 'd'}, 0
		case 1:
			data, err = ra.EncodeNoopEntry(1796160522135, 5)
		default:
			data, err = enqueueEntry(rng, cfg, q, msgID, pid)
			msgID++
			sum.Messages++
		}
		if err != nil {
			return sum, err
		}
		if written < segBytes {
			n, err := q.appendSegment(cfg, data, term, &sum)
			if err != nil {
				return sum, err
			}
			written += n
		} else {
			if wal == nil {
				for _, q := range qs {
					if err := q.closeSegment(); err != nil {
						return sum, err
					}
				}
				if walFile, err = os.Create(filepath.Join(sys, "00000001.wal")); err != nil {
					return sum, err
				}
				wal = bufio.NewWriterSize(walFile, 1<<20)
				if _, err := wal.Write(ra.AppendWALHeader(nil)); err != nil {
					return sum, err
				}
				written += ra.WALHeaderLen
			}
			r := ra.WALRecord{WriterRef: uint32(slicesIndex(qs, q) + 1), Index: q.next, Term: term, Data: data}
			if !q.inWAL {
				r.UID, q.inWAL = []byte(q.uid), true
			} else {
				r.IsRef = true
			}
			r.Checksum = r.ComputeChecksum()
			rec = ra.AppendWALRecord(rec[:0], r)
			if _, err := wal.Write(rec); err != nil {
				return sum, err
			}
			written += int64(len(rec))
			sum.WALRecords++
		}
		q.next++
	}
	for _, q := range qs {
		if err := q.closeSegment(); err != nil {
			return sum, err
		}
	}
	if wal != nil {
		if err := wal.Flush(); err != nil {
			return sum, err
		}
		if err := walFile.Close(); err != nil {
			return sum, err
		}
	}
	sum.Bytes = written
	return sum, nil
}

func slicesIndex(qs []*queue, q *queue) int {
	for i, x := range qs {
		if x == q {
			return i
		}
	}
	return -1
}

// appendSegment adds one entry to q's current segment (opening the next
// one when it is full) and returns the bytes it adds to the file.
func (q *queue) appendSegment(cfg Config, data []byte, term uint64, sum *Summary) (int64, error) {
	if q.seg != nil && q.seg.n == cfg.SegmentEntries {
		if err := q.closeSegment(); err != nil {
			return 0, err
		}
	}
	var added int64
	if q.seg == nil {
		q.segN++
		f, err := os.Create(filepath.Join(q.dir, ra.FileName(uint64(q.segN), ra.NameWidthV1, "segment")))
		if err != nil {
			return 0, err
		}
		h := ra.SegmentHeader{Version: 2, MaxCount: uint16(cfg.SegmentEntries)}
		start := h.DataStart()
		if _, err := f.Seek(start, 0); err != nil {
			return 0, err
		}
		q.seg = &segment{f: f, w: bufio.NewWriterSize(f, 1<<20), off: start,
			slots: ra.AppendSegmentHeader(make([]byte, 0, start), h)}
		sum.Segments++
		added = start
	}
	s := q.seg
	sl := ra.SegmentSlot{Index: q.next, Term: term, Offset: uint64(s.off), Length: uint32(len(data)), CRC: crc32.ChecksumIEEE(data)}
	s.slots = ra.AppendSegmentSlot(s.slots, sl, 2)
	if _, err := s.w.Write(data); err != nil {
		return 0, err
	}
	s.off += int64(len(data))
	s.n++
	return added + int64(len(data)) + ra.SegmentSlotV2, nil
}

func (q *queue) closeSegment() error {
	s := q.seg
	if s == nil {
		return nil
	}
	q.seg = nil
	if err := s.w.Flush(); err != nil {
		return err
	}
	if _, err := s.f.WriteAt(s.slots, 0); err != nil {
		return err
	}
	return s.f.Close()
}

// enqueueEntry is {'$usr', #{ts}, {e, Seq, #mc{}, {0, BodySize}},
// {notify, Seq, Pid}}: a publish with confirms through a channel.
func enqueueEntry(rng *rand.Rand, cfg Config, q *queue, n int, pid etf.Term) ([]byte, error) {
	size := cfg.BodyMin + rng.IntN(cfg.BodyMax-cfg.BodyMin+1)
	body := make([]byte, size)
	for i := 0; i < size; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(body[i:], w[:])
	}
	var id [16]byte
	binary.BigEndian.PutUint64(id[:], uint64(n)+1)
	binary.BigEndian.PutUint64(id[8:], rng.Uint64())
	m := &rabbitmq.Message{ID: id, RoutingKey: q.name, MessageID: fmt.Sprintf("m%09d", n), Payload: body, Timestamp: 1796160522136 + int64(n)}
	q.seq++
	cmd := etf.Tuple{etf.Atom(ra.CmdEnqueueV2), q.seq, rabbitmq.BodyTerm(rabbitmq.MC, m), etf.Tuple{int64(0), int64(size)}}
	return ra.EncodeUserEntry(1796160522136+int64(n), cmd, etf.Tuple{etf.Atom("notify"), q.seq, pid})
}

// pidTerm is a NEW_PID_EXT of a channel process on the node.
func pidTerm() etf.Term {
	b := []byte{etf.TagNewPid, 119, byte(len(nodeName))}
	b = append(b, nodeName...)
	b = binary.BigEndian.AppendUint32(b, 1234)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 1796160522)
	return etf.Opaque{Tag: etf.TagNewPid, Raw: b}
}

// configText is a 4.0 replica's config file for queue name.
func configText(name, uid string) string {
	ra := "'%2F_" + name + "'"
	res := `{resource,<<"/">>,queue,<<"` + name + `">>}`
	return `#{id => {` + ra + `,` + nodeName + `},
  machine =>
      {module,rabbit_fifo,
          #{name => ` + ra + `,max_length => undefined,max_bytes => undefined,
            queue_resource => ` + res + `,
            created => 1796160522144,dead_letter_handler => undefined,
            become_leader_handler => {rabbit_quorum_queue,become_leader,[` + res + `]},
            overflow_strategy => drop_head,delivery_limit => 20,
            expires => undefined,msg_ttl => undefined,
            single_active_consumer_on => false}},
  membership => voter,friendly_name => "queue '` + name + `' in vhost '/'",
  cluster_name => ` + ra + `,uid => <<"` + uid + `">>,
  initial_members => [{` + ra + `,` + nodeName + `}],
  log_init_args =>
      #{max_checkpoints => 3,min_checkpoint_interval => 8192,
        snapshot_interval => 8192,uid => <<"` + uid + `">>},
  metrics_key => ` + res + `,
  tick_timeout => 5000,broadcast_time => 100,
  install_snap_rpc_timeout => 120000,await_condition_timeout => 30000}.
`
}
