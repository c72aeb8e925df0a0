// Package format holds what every store decoder shares: the error
// vocabulary and a bounds-checked big-endian cursor.
//
// Decoders in the sub-packages turn bytes into structs. They never open
// files, never print and never panic on any input: corruption is returned
// as a *CorruptError that names the field and the absolute byte offset.
package format

import (
	"errors"
	"fmt"
)

// Causes of a decoding failure. Callers match them with errors.Is.
var (
	ErrShort       = errors.New("record runs past end of data")
	ErrMagic       = errors.New("unknown magic code")
	ErrChecksum    = errors.New("checksum mismatch")
	ErrTooLarge    = errors.New("declared length exceeds limit")
	ErrInvalid     = errors.New("invalid field value")
	ErrUnsupported = errors.New("unsupported encoding")
)

// CorruptError says where a record failed to decode. The decoder fills
// Offset and Field; the layer that opened the file fills Path.
type CorruptError struct {
	Path   string // file name; empty for in-memory input
	Offset int64  // absolute offset of the byte where decoding failed
	Field  string // field that failed, e.g. "totalSize"
	Err    error  // one of the Err* causes, possibly wrapped
}

func (e *CorruptError) Error() string {
	p := e.Path
	if p == "" {
		p = "<input>"
	}
	if e.Field == "" {
		return fmt.Sprintf("%s@%d: %v", p, e.Offset, e.Err)
	}
	return fmt.Sprintf("%s@%d: %s: %v", p, e.Offset, e.Field, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Corrupt builds a *CorruptError for in-memory input.
func Corrupt(off int64, field string, err error) *CorruptError {
	return &CorruptError{Offset: off, Field: field, Err: err}
}

// WithPath sets Path on err when it is a *CorruptError and returns err.
func WithPath(err error, path string) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.Path == "" {
		ce.Path = path
	}
	return err
}
