package format

import "encoding/binary"

// Cursor reads big-endian fields from B with bounds checks. The first
// failure is sticky: later reads return zero values, and Err reports the
// first cause, the field it happened in and its absolute offset.
type Cursor struct {
	B     []byte
	Off   int
	field string
	at    int
	err   error
}

// NewCursor returns a cursor over b starting at 0.
func NewCursor(b []byte) *Cursor { return &Cursor{B: b} }

// Take returns the next n bytes (aliasing B, capacity-limited) or nil and
// ErrShort when n is negative or runs past the end.
func (c *Cursor) Take(field string, n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > len(c.B)-c.Off {
		c.fail(field, ErrShort)
		return nil
	}
	p := c.B[c.Off : c.Off+n : c.Off+n]
	c.Off += n
	return p
}

// Skip advances n bytes.
func (c *Cursor) Skip(field string, n int) { c.Take(field, n) }

// Remaining is the number of unread bytes.
func (c *Cursor) Remaining() int {
	if c.Off > len(c.B) {
		return 0
	}
	return len(c.B) - c.Off
}

// U8 reads one byte.
func (c *Cursor) U8(field string) uint8 {
	p := c.Take(field, 1)
	if p == nil {
		return 0
	}
	return p[0]
}

// U16 reads a big-endian uint16.
func (c *Cursor) U16(field string) uint16 {
	p := c.Take(field, 2)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

// U32 reads a big-endian uint32.
func (c *Cursor) U32(field string) uint32 {
	p := c.Take(field, 4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

// U64 reads a big-endian uint64.
func (c *Cursor) U64(field string) uint64 {
	p := c.Take(field, 8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// Fail records a semantic failure (bad magic, value over a limit) at the
// current position unless an earlier failure is already recorded.
func (c *Cursor) Fail(field string, err error) {
	if c.err == nil {
		c.fail(field, err)
	}
}

// FailAt records a failure at an explicit position inside B.
func (c *Cursor) FailAt(pos int, field string, err error) {
	if c.err == nil {
		c.err, c.field, c.at = err, field, pos
	}
}

func (c *Cursor) fail(field string, err error) {
	c.err, c.field, c.at = err, field, c.Off
}

// Failed reports whether a read or a Fail has already failed.
func (c *Cursor) Failed() bool { return c.err != nil }

// Err returns nil or a *CorruptError whose Offset is base plus the
// position inside B where the failure happened.
func (c *Cursor) Err(base int64) error {
	if c.err == nil {
		return nil
	}
	return &CorruptError{Offset: base + int64(c.at), Field: c.field, Err: c.err}
}
