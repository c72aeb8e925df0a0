package stream

import (
	"sync/atomic"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// The checks of a segment's chunk data (CRC, entries, AMQP sections: most
// of a scan's CPU) need nothing but the chunk, so a segment scan hands
// batches of chunks to other goroutines when the scan has a job to spare
// (a stream of 3 segments on 2 jobs would otherwise run its last segment
// on one CPU), and accounts the batches in file order as they come back:
// the findings and counts are those of a walk that checks each chunk as
// it reads it. The chunks are slices of the segment's mapping (fileview
// Slice), valid until the segment is closed, so a batch costs no copy.
var (
	splitBatchBytes  = 512 << 10 // chunk data in a batch (or one larger chunk)
	splitBatchChunks = 64
)

// splitMaxPending bounds the batches out at once: what they hold stays
// below fileview.SliceBehind, so their pages are still mapped.
const splitMaxPending = 4

// mapSegments reads chunks from the segment's mapping (false: with pread
// into SegmentReader's buffer, as where a file can't be mapped; for tests).
var mapSegments = true

// helperBatches counts the batches helpers checked (for tests).
var helperBatches atomic.Int64

// chunkBatch is a run of chunks and their checks.
type chunkBatch struct {
	chunks []osiris.Chunk
	checks []chunkCheck
	bytes  int
	done   chan struct{} // closed when a helper has checked them; nil: checked here
	err    error         // a helper's memory fault (the file shrank)
}

func (b *chunkBatch) check(decode bool) {
	if cap(b.checks) < len(b.chunks) {
		b.checks = append(b.checks[:cap(b.checks)], make([]chunkCheck, len(b.chunks)-cap(b.checks))...)
	}
	b.checks = b.checks[:len(b.chunks)]
	for i := range b.chunks {
		checkChunk(&b.chunks[i], decode, &b.checks[i])
	}
}

// splitter batches a segment's chunks and has them checked, here or on a
// helper goroutine when one of the scan's job tokens is free.
type splitter struct {
	decode     bool
	tokens     chan struct{} // the scan's jobs: a send takes one
	maxPending int
	pending    []*chunkBatch // in file order
	cur        *chunkBatch
	free       []*chunkBatch
}

func newSplitter(sc *scanCtx) *splitter {
	if sc.tokens == nil {
		return nil
	}
	return &splitter{decode: sc.decode, tokens: sc.tokens, maxPending: min(cap(sc.tokens), splitMaxPending)}
}

// add takes the next chunk (copied: its slices alias the mapping) and
// accounts the batches that are checked, in order, through take.
func (p *splitter) add(c *osiris.Chunk, take func(*osiris.Chunk, *chunkCheck) error) error {
	if p.cur == nil {
		if n := len(p.free); n > 0 {
			p.cur, p.free = p.free[n-1], p.free[:n-1]
		} else {
			p.cur = &chunkBatch{}
		}
	}
	b := p.cur
	b.chunks = append(b.chunks, *c)
	b.bytes += len(c.Data)
	if b.bytes < splitBatchBytes && len(b.chunks) < splitBatchChunks {
		return nil
	}
	p.cur = nil
	p.submit(b)
	return p.drain(take, false)
}

// flush checks and accounts every chunk taken.
func (p *splitter) flush(take func(*osiris.Chunk, *chunkCheck) error) error {
	if b := p.cur; b != nil {
		p.cur = nil
		p.submit(b)
	}
	return p.drain(take, true)
}

func (p *splitter) submit(b *chunkBatch) {
	b.done, b.err = nil, nil
	select {
	case p.tokens <- struct{}{}:
		b.done = make(chan struct{})
		go func() {
			defer func() { <-p.tokens }()
			defer close(b.done)
			defer fileview.Guard(&b.err)()
			b.check(p.decode)
			helperBatches.Add(1)
		}()
	default:
		b.check(p.decode)
	}
	p.pending = append(p.pending, b)
}

// drain accounts the checked batches at the front, waiting for a helper
// only when all is set or too many batches are out.
func (p *splitter) drain(take func(*osiris.Chunk, *chunkCheck) error, all bool) error {
	for len(p.pending) > 0 {
		b := p.pending[0]
		if b.done != nil {
			if all || len(p.pending) >= p.maxPending {
				<-b.done
			} else {
				select {
				case <-b.done:
				default:
					return nil
				}
			}
		}
		copy(p.pending, p.pending[1:])
		p.pending = p.pending[:len(p.pending)-1]
		if b.err != nil {
			p.wait()
			return b.err
		}
		for i := range b.chunks {
			if err := take(&b.chunks[i], &b.checks[i]); err != nil {
				p.wait()
				return err
			}
		}
		clear(b.chunks) // drop the slices of the mapping
		b.chunks, b.bytes = b.chunks[:0], 0
		p.free = append(p.free, b)
	}
	return nil
}

// wait lets the batches still out finish (they read the mapping, which
// the segment's Close unmaps).
func (p *splitter) wait() {
	for _, b := range p.pending {
		if b.done != nil {
			<-b.done
		}
	}
	p.pending = p.pending[:0]
}
