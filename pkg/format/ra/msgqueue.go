package ra

import (
	"fmt"
	"iter"
)

// MsgChunk is how many messages a MsgQueue keeps per chunk (160 KiB).
const MsgChunk = 4096

// MsgSpiller keeps chunks of a MsgQueue out of memory: Spill stores a
// full chunk and returns where (ok false: it cannot, the chunk stays in
// memory), Load reads one back into dst (len(dst) messages).
type MsgSpiller interface {
	Spill(msgs []FifoMsg) (at int64, ok bool)
	Load(dst []FifoMsg, at int64) error
}

// MsgQueue is a FIFO of messages (rabbit_fifo's message and returns
// queues) in chunks of MsgChunk: pushed at the back, taken from the front.
// With a Spiller, every full chunk but the front one is handed to it, so
// a queue of millions of messages keeps two chunks in memory; the zero
// value is an empty queue that keeps everything in memory.
type MsgQueue struct {
	chunks  []*msgChunk // chunks[0] is the front, in memory
	head    int         // the front message's position in chunks[0]
	n       int
	Spiller MsgSpiller
	// Chunk is the chunk size; <= 0 is MsgChunk (tests force small ones).
	Chunk int
}

func (q *MsgQueue) chunk() int {
	if q.Chunk > 0 {
		return q.Chunk
	}
	return MsgChunk
}

type msgChunk struct {
	msgs    []FifoMsg // nil while spilled
	n       int       // messages in the chunk
	at      int64     // where the Spiller has it
	spilled bool
}

// NewMsgQueue returns a queue holding msgs in order.
func NewMsgQueue(msgs []FifoMsg) MsgQueue {
	var q MsgQueue
	for _, m := range msgs {
		q.PushBack(m)
	}
	return q
}

// Len is the number of messages in the queue.
func (q *MsgQueue) Len() int { return q.n }

// PushBack appends m.
func (q *MsgQueue) PushBack(m FifoMsg) {
	nc := len(q.chunks)
	if nc == 0 || q.chunks[nc-1].n == q.chunk() {
		if nc > 1 && q.Spiller != nil {
			// the full back chunk is not the front one: out of memory
			c := q.chunks[nc-1]
			if at, ok := q.Spiller.Spill(c.msgs); ok {
				c.at, c.spilled, c.msgs = at, true, nil
			}
		}
		q.chunks = append(q.chunks, &msgChunk{msgs: make([]FifoMsg, 0, q.chunk())})
		nc++
	}
	c := q.chunks[nc-1]
	c.msgs = append(c.msgs, m)
	c.n++
	q.n++
}

// Front returns the front message (ok false when the queue is empty).
func (q *MsgQueue) Front() (FifoMsg, bool) {
	if q.n == 0 {
		return FifoMsg{}, false
	}
	return q.chunks[0].msgs[q.head], true
}

// PopFront removes and returns the front message.
func (q *MsgQueue) PopFront() (FifoMsg, bool) {
	if q.n == 0 {
		return FifoMsg{}, false
	}
	c := q.chunks[0]
	m := c.msgs[q.head]
	q.head++
	q.n--
	if q.head == c.n {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.head = 0
		if len(q.chunks) > 0 {
			q.load(q.chunks[0])
		} else {
			q.chunks = nil
		}
	}
	return m, true
}

// load brings a spilled chunk back into memory. A Spiller that cannot
// read its own chunk back is a failure the queue cannot hide: it panics
// with the error (the replay recovers it as the queue's failure).
func (q *MsgQueue) load(c *msgChunk) {
	if !c.spilled {
		return
	}
	c.msgs = make([]FifoMsg, c.n, q.chunk())
	if err := q.Spiller.Load(c.msgs, c.at); err != nil {
		panic(fmt.Errorf("reading a message queue chunk back: %w", err))
	}
	c.spilled = false
}

// Reset empties the queue (its Spiller stays).
func (q *MsgQueue) Reset() { *q = MsgQueue{Spiller: q.Spiller, Chunk: q.Chunk} }

// All yields the messages front to back (spilled chunks are read back
// one at a time and not kept).
func (q *MsgQueue) All() iter.Seq[FifoMsg] {
	return func(yield func(FifoMsg) bool) {
		var buf []FifoMsg
		for i, c := range q.chunks {
			msgs := c.msgs
			if c.spilled {
				if buf == nil {
					buf = make([]FifoMsg, q.chunk())
				}
				msgs = buf[:c.n]
				if err := q.Spiller.Load(msgs, c.at); err != nil {
					panic(fmt.Errorf("reading a message queue chunk back: %w", err))
				}
			}
			from := 0
			if i == 0 {
				from = q.head
			}
			for _, m := range msgs[from:c.n] {
				if !yield(m) {
					return
				}
			}
		}
	}
}
