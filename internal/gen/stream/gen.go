// Package stream writes deterministic RabbitMQ stream files (a node dir
// with stream/<dir>/ segments and indexes) of a given size, as RabbitMQ
// 4.0 writes them: AMQP 1.0 messages (header, message annotations,
// properties, application properties, data) in chunks of 1-50 entries
// with the writer's tracking trailer, a tracking-snapshot chunk at the
// start of every segment after the first, one index record per chunk.
// For benchmarks (genstore -kind rabbitmq-stream) and tests.
package stream

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// Config says what to write.
type Config struct {
	Seed uint64
	// TotalBytes is about the size of the segments written.
	TotalBytes int64
	// MaxSegmentSize rolls a segment over once it is exceeded (osiris'
	// default 500 MB when 0).
	MaxSegmentSize int64
	// BodyMin and BodyMax bound the message bodies (default 100-2000).
	BodyMin, BodyMax int
	// Streams spreads the data over this many streams (default 1).
	Streams int
}

// Summary is what Generate wrote.
type Summary struct {
	Node     string // the node dir (the target of a scan)
	Segments int
	Chunks   int
	Messages int
	Bytes    int64
}

// Generate writes a node dir rmqbench@localhost under out.
func Generate(out string, cfg Config) (Summary, error) {
	if cfg.MaxSegmentSize == 0 {
		cfg.MaxSegmentSize = osiris.DefaultMaxSegmentSize
	}
	if cfg.BodyMax == 0 {
		cfg.BodyMin, cfg.BodyMax = 100, 2000
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 1
	}
	node := filepath.Join(out, "rmqbench@localhost")
	sum := Summary{Node: node}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	per := cfg.TotalBytes / int64(cfg.Streams)
	for i := range cfg.Streams {
		dir := filepath.Join(node, "stream", fmt.Sprintf("__bench%d_%d", i, 1796159969530842441+int64(i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sum, err
		}
		if err := writeStream(dir, fmt.Sprintf("bench%d", i), per, cfg, rng, &sum); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

type segWriter struct {
	seg, idx *os.File
	sw, iw   *bufio.Writer
	size     int64
}

func (s *segWriter) close() error {
	for _, w := range []*bufio.Writer{s.sw, s.iw} {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if err := s.seg.Close(); err != nil {
		return err
	}
	return s.idx.Close()
}

func openSegment(dir string, first uint64) (*segWriter, error) {
	name := fmt.Sprintf("%020d", first)
	seg, err := os.Create(filepath.Join(dir, name+".segment"))
	if err != nil {
		return nil, err
	}
	idx, err := os.Create(filepath.Join(dir, name+".index"))
	if err != nil {
		seg.Close()
		return nil, err
	}
	s := &segWriter{seg: seg, idx: idx, sw: bufio.NewWriterSize(seg, 1<<20), iw: bufio.NewWriterSize(idx, 64<<10)}
	s.sw.Write(osiris.AppendSegmentHeader(nil))
	s.iw.Write(osiris.AppendIndexHeader(nil))
	s.size = osiris.FileHeaderSize
	return s, nil
}

func writeStream(dir, queue string, total int64, cfg Config, rng *rand.Rand, sum *Summary) error {
	writer := []byte(fmt.Sprintf("<0.%d.0>_bench-writer-0123456789ab", 700))[:33]
	var next uint64
	ts := int64(1796159969639)
	var written int64
	s, err := openSegment(dir, 0)
	if err != nil {
		return err
	}
	sum.Segments++
	seq := uint64(0)
	body := make([]byte, cfg.BodyMax)
	var chunk, msg []byte
	write := func(b []byte, h osiris.ChunkHeader) error {
		if _, err := s.sw.Write(b); err != nil {
			return err
		}
		if _, err := s.iw.Write(osiris.AppendIndexRecord(nil, osiris.IndexRecordFor(h, s.size))); err != nil {
			return err
		}
		s.size += int64(len(b))
		written += int64(len(b))
		sum.Bytes += int64(len(b))
		sum.Chunks++
		return nil
	}
	for written < total {
		if s.size > cfg.MaxSegmentSize {
			if err := s.close(); err != nil {
				return err
			}
			if s, err = openSegment(dir, next); err != nil {
				return err
			}
			sum.Segments++
			// the tracking snapshot osiris writes first in a new segment
			snap := osiris.AppendTracking(nil, osiris.Tracking{Type: osiris.TrackingSequence, ID: writer, ChunkID: next, Value: seq}, true)
			chunk = osiris.AppendChunk(chunk[:0], osiris.ChunkSpec{Type: osiris.ChunkTrackingSnapshot, Timestamp: ts, Epoch: 1, ChunkID: next,
				Entries: []osiris.Entry{osiris.SimpleEntry(snap)}})
			h, _ := osiris.DecodeChunkHeader(chunk, 0)
			if err := write(chunk, h); err != nil {
				return err
			}
			next++
		}
		n := 1 + rng.IntN(50)
		entries := make([]osiris.Entry, 0, n)
		var bodies []byte
		starts := make([]int, 0, n)
		for range n {
			size := cfg.BodyMin + rng.IntN(cfg.BodyMax-cfg.BodyMin+1)
			for i := 0; i < size; i += 8 {
				v := rng.Uint64()
				for j := 0; j < 8 && i+j < size; j++ {
					body[i+j] = byte(v >> (8 * j))
				}
			}
			msg = message(msg[:0], queue, seq, ts, body[:size])
			starts = append(starts, len(bodies))
			bodies = append(bodies, msg...)
			seq++
		}
		for i, st := range starts {
			end := len(bodies)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			entries = append(entries, osiris.SimpleEntry(bodies[st:end]))
		}
		trailer := osiris.AppendTracking(nil, osiris.Tracking{Type: osiris.TrackingSequence, ID: writer, Value: seq}, false)
		chunk = osiris.AppendChunk(chunk[:0], osiris.ChunkSpec{Type: osiris.ChunkUser, Timestamp: ts, Epoch: 1, ChunkID: next, Entries: entries, Trailer: trailer})
		h, _ := osiris.DecodeChunkHeader(chunk, 0)
		if err := write(chunk, h); err != nil {
			return err
		}
		next += uint64(n)
		sum.Messages += n
		ts += int64(rng.IntN(3))
	}
	return s.close()
}

// message encodes one message as RabbitMQ 4.0 stores an AMQP 0-9-1
// publish to the default exchange.
func message(dst []byte, queue string, seq uint64, ts int64, body []byte) []byte {
	m := amqp10.Message{Sections: []amqp10.Section{
		amqp10.NewSection(amqp10.SectionHeader, amqp10.FieldList(amqp10.Bool(true), amqp10.NullValue(), amqp10.NullValue(), amqp10.Bool(true), amqp10.UintValue(0))),
		amqp10.NewSection(amqp10.SectionMessageAnnotations, amqp10.MapValue(
			amqp10.SymbolValue("x-exchange"), amqp10.StringValue(""),
			amqp10.SymbolValue("x-routing-key"), amqp10.StringValue(queue))),
		amqp10.NewSection(amqp10.SectionProperties, amqp10.FieldList(amqp10.StringValue(fmt.Sprintf("m%09d", seq)),
			amqp10.NullValue(), amqp10.NullValue(), amqp10.NullValue(), amqp10.NullValue(), amqp10.NullValue(),
			amqp10.SymbolValue("application/octet-stream"), amqp10.NullValue(), amqp10.NullValue(), amqp10.TimestampValue(ts))),
		amqp10.NewSection(amqp10.SectionApplicationProperties, amqp10.MapValue(amqp10.StringValue("seq"), amqp10.LongValue(int64(seq)))),
		amqp10.NewSection(amqp10.SectionData, amqp10.BinaryValue(body)),
	}}
	out, err := amqp10.AppendMessage(dst, m)
	if err != nil {
		panic(err) // the values above always encode
	}
	return out
}
