package scan

import (
	"encoding/hex"
	"io"
)

// MsgIDs is a list of 16-byte message ids (RabbitMQ msg store ids). It is
// kept as bytes, not strings (a queue can name hundreds of thousands), and
// encodes as a JSON array of 32-hex-digit strings; an empty list is the
// zero value for `omitzero`. A list built with a spool (AppendTo) keeps
// only its last, partial chunk in memory: full chunks go to the spool's
// temp file and are read back when the list is encoded.
type MsgIDs struct {
	ids    [][16]byte // the ids after the last spilled chunk (all of them without a spool)
	chunks []int64    // offsets of the spilled chunks in spool, in order
	spool  *IDSpool
}

// NewMsgIDs returns a list holding ids (no spool).
func NewMsgIDs(ids ...[16]byte) MsgIDs { return MsgIDs{ids: ids} }

// Append adds id in memory.
func (m *MsgIDs) Append(id [16]byte) { m.ids = append(m.ids, id) }

// AppendTo adds id; once the in-memory part holds a full chunk it is
// written to spool (kept in memory if that fails). spool may be nil.
func (m *MsgIDs) AppendTo(spool *IDSpool, id [16]byte) {
	m.ids = append(m.ids, id)
	if spool == nil || len(m.ids) < spool.chunk || (m.spool != nil && m.spool != spool) || spool.file.Broken() {
		return
	}
	if off, ok := spool.put(m.ids); ok {
		m.spool = spool
		m.chunks = append(m.chunks, off)
		m.ids = m.ids[:0]
	}
}

// Len returns the number of ids.
func (m MsgIDs) Len() int {
	if m.spool == nil {
		return len(m.ids)
	}
	return len(m.chunks)*m.spool.chunk + len(m.ids)
}

// Spilled reports whether some of the ids are in a spool's file.
func (m MsgIDs) Spilled() bool { return len(m.chunks) > 0 }

// IsZero reports whether m is empty (encoding/json's omitzero).
func (m MsgIDs) IsZero() bool { return m.Len() == 0 }

// Each calls fn for every id in order. The error is from reading a
// spilled chunk back.
func (m MsgIDs) Each(fn func(id [16]byte)) error {
	if len(m.chunks) > 0 {
		buf := make([]byte, m.spool.chunk*16)
		for _, off := range m.chunks {
			if err := m.spool.get(buf, off); err != nil {
				return err
			}
			for i := 0; i < len(buf); i += 16 {
				fn([16]byte(buf[i : i+16]))
			}
		}
	}
	for _, id := range m.ids {
		fn(id)
	}
	return nil
}

// Strings returns the ids in hex (nil for an empty list). A spilled
// chunk that cannot be read back panics: tests and small lists use it.
func (m MsgIDs) Strings() []string {
	if m.Len() == 0 {
		return nil
	}
	out := make([]string, 0, m.Len())
	if err := m.Each(func(id [16]byte) { out = append(out, hex.EncodeToString(id[:])) }); err != nil {
		panic(err)
	}
	return out
}

// AppendJSON appends m as a JSON array of hex strings.
func (m MsgIDs) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '[')
	n := 0
	err := m.Each(func(id [16]byte) {
		b = appendIDJSON(b, id, n)
		n++
	})
	return append(b, ']'), err
}

// appendIDJSON appends id as a JSON string, the i-th of an array.
func appendIDJSON(b []byte, id [16]byte, i int) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = hex.AppendEncode(b, id[:])
	return append(b, '"')
}

// WriteJSON writes m as AppendJSON encodes it, a few KiB at a time: a
// queue can name hundreds of thousands of ids (35 bytes each in JSON),
// and a spilled list is read back chunk by chunk, so memory does not grow
// with the list. The error is the first from reading back or writing.
func (m MsgIDs) WriteJSON(w io.Writer) error {
	const flushAt = 32 << 10 // a buffered writer's size: large writes, small memory
	b := make([]byte, 0, flushAt+64)
	b = append(b, '[')
	n := 0
	var werr error
	err := m.Each(func(id [16]byte) {
		if werr != nil {
			return
		}
		b = appendIDJSON(b, id, n)
		n++
		if len(b) >= flushAt {
			_, werr = w.Write(b)
			b = b[:0]
		}
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	_, err = w.Write(append(b, ']'))
	return err
}

// MarshalJSON encodes m as AppendJSON does.
func (m MsgIDs) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, 2+m.Len()*35))
}

// IDSpool is the temp file of the spilled MsgIDs chunks of one run (a
// Spill). It is safe for concurrent use.
type IDSpool struct {
	chunk int   // ids per chunk
	file  Spill // the chunks, 16*chunk bytes each
}

// NewIDSpool returns a spool that writes chunks of chunk ids (at least 1).
// The file is created at the first write.
func NewIDSpool(chunk int) *IDSpool {
	return &IDSpool{chunk: max(chunk, 1), file: Spill{Pattern: "storectl-msgids-*"}}
}

func (s *IDSpool) put(ids [][16]byte) (int64, bool) {
	if s.file.Broken() {
		return 0, false // do not copy the list for nothing
	}
	buf := make([]byte, 0, len(ids)*16)
	for _, id := range ids {
		buf = append(buf, id[:]...)
	}
	return s.file.Put(buf)
}

func (s *IDSpool) get(buf []byte, off int64) error { return s.file.ReadAt(buf, off, "msg ids") }
