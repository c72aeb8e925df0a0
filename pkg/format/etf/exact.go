package etf

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/format"
)

// IsExactTerm reports whether b is exactly one complete, valid term: what
// SkipTerm accepts, using all of b. A message store scanner asks it of
// every framed candidate, millions of times a GiB of small messages, so
// the tags of a message term (integers, atoms, binaries, strings, lists,
// tuples) are walked here on the bytes directly, without the decoder's
// cursor and field names; any other tag is handed to the decoder at its
// position (the same rules, the same result).
func IsExactTerm(b []byte) bool {
	if len(b) < 2 || b[0] != Version || b[1] == TagCompressed {
		return false
	}
	n, ok := skipExact(b, 1, 0)
	return ok && n == len(b)
}

// skipExact walks the term at b[p] as decoder.term does at depth with
// build off and returns the offset after it.
func skipExact(b []byte, p, depth int) (int, bool) {
	if depth > MaxTermDepth || p >= len(b) {
		return 0, false
	}
	left := len(b) - p - 1 // bytes after the tag
	switch b[p] {
	case TagSmallInteger:
		return p + 2, left >= 1
	case TagInteger:
		return p + 5, left >= 4
	case TagSmallAtom, TagSmallAtomUTF8:
		if left < 1 {
			return 0, false
		}
		n := int(b[p+1])
		q := p + 2
		if n > len(b)-q {
			return 0, false
		}
		return q + n, b[p] == TagSmallAtom || validAtom(b[q:q+n])
	case TagAtom, TagAtomUTF8:
		if left < 2 {
			return 0, false
		}
		n := int(binary.BigEndian.Uint16(b[p+1:]))
		q := p + 3
		if n > len(b)-q {
			return 0, false
		}
		if b[p] == TagAtom {
			return q + n, n <= maxAtomChars
		}
		a := b[q : q+n]
		return q + n, validAtom(a) && (n <= maxAtomChars || utf8.RuneCount(a) <= maxAtomChars)
	case TagBinary:
		if left < 4 {
			return 0, false
		}
		n := uint64(binary.BigEndian.Uint32(b[p+1:]))
		q := p + 5
		if n > uint64(len(b)-q) {
			return 0, false
		}
		return q + int(n), true
	case TagString:
		if left < 2 {
			return 0, false
		}
		n := int(binary.BigEndian.Uint16(b[p+1:]))
		q := p + 3
		return q + n, n <= len(b)-q
	case TagNil:
		return p + 1, true
	case TagSmallTuple:
		if left < 1 {
			return 0, false
		}
		return skipElems(b, p+2, int(b[p+1]), depth)
	case TagLargeTuple, TagList:
		if left < 4 {
			return 0, false
		}
		n := uint64(binary.BigEndian.Uint32(b[p+1:]))
		q := p + 5
		if n > uint64(len(b)-q) { // at least a byte an element (decoder.count)
			return 0, false
		}
		q, ok := skipElems(b, q, int(n), depth)
		if !ok || b[p] == TagLargeTuple {
			return q, ok
		}
		return skipExact(b, q, depth+1) // the list's tail
	}
	d := decoder{Cursor: format.Cursor{B: b, Off: p}}
	d.term(depth)
	return d.Off, !d.Failed()
}

// skipElems walks n terms from b[p], each one level below depth.
func skipElems(b []byte, p, n, depth int) (int, bool) {
	for range n {
		var ok bool
		if p, ok = skipExact(b, p, depth+1); !ok {
			return 0, false
		}
	}
	return p, true
}

// validAtom reports whether a UTF-8 atom's bytes are valid UTF-8: an ASCII
// name (every atom of a message term) without a call.
func validAtom(a []byte) bool {
	for _, c := range a {
		if c >= utf8.RuneSelf {
			return utf8.Valid(a)
		}
	}
	return true
}
