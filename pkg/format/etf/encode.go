package etf

// ETF encoder for the term types of etf.go, choosing the encodings
// term_to_binary/1 chooses, so that re-encoded files are byte-compatible
// with the broker's. Used to write ets:tab2file dumps (ets_encode.go).

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// AtomEncoding selects how atoms are written.
type AtomEncoding int

// Atom encodings of term_to_binary/1 by OTP release.
const (
	// AtomsLatin1 is OTP ≤ 25: ATOM_EXT (100) for Latin-1 atoms,
	// SMALL_ATOM_UTF8_EXT (119) for the others.
	AtomsLatin1 AtomEncoding = iota
	// AtomsUTF8 is OTP ≥ 26: SMALL_ATOM_UTF8_EXT (119) for every atom.
	AtomsUTF8
)

// EncodeTerm returns term_to_binary(t): the version byte and t. Strings
// are STRING_EXT, lists LIST_EXT; term_to_binary writes a list of small
// integers as STRING_EXT, which callers get by passing a String.
func EncodeTerm(t Term, atoms AtomEncoding) ([]byte, error) {
	return appendTerm([]byte{Version}, t, atoms, 0)
}

func appendTerm(b []byte, t Term, atoms AtomEncoding, depth int) ([]byte, error) {
	if depth > MaxTermDepth {
		return nil, fmt.Errorf("etf encode: nesting deeper than %d", MaxTermDepth)
	}
	var err error
	switch v := t.(type) {
	case Atom:
		return AppendAtom(b, string(v), atoms)
	case int64:
		switch {
		case v >= 0 && v <= 255:
			return append(b, TagSmallInteger, byte(v)), nil
		case v >= math.MinInt32 && v <= math.MaxInt32:
			return binary.BigEndian.AppendUint32(append(b, TagInteger), uint32(int32(v))), nil
		}
		return appendBig(b, big.NewInt(v)), nil
	case int:
		return appendTerm(b, int64(v), atoms, depth)
	case *big.Int:
		if v.IsInt64() {
			return appendTerm(b, v.Int64(), atoms, depth)
		}
		return appendBig(b, v), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, TagNewFloat), math.Float64bits(v)), nil
	case Binary:
		b = binary.BigEndian.AppendUint32(append(b, TagBinary), uint32(len(v)))
		return append(b, v...), nil
	case BitBinary:
		b = binary.BigEndian.AppendUint32(append(b, TagBitBinary), uint32(len(v.Bytes)))
		return append(append(b, v.Bits), v.Bytes...), nil
	case String:
		if len(v) > math.MaxUint16 {
			return nil, fmt.Errorf("etf encode: STRING_EXT of %d bytes", len(v))
		}
		b = binary.BigEndian.AppendUint16(append(b, TagString), uint16(len(v)))
		return append(b, v...), nil
	case Nil:
		return append(b, TagNil), nil
	case List:
		b = binary.BigEndian.AppendUint32(append(b, TagList), uint32(len(v.Elems)))
		for _, e := range v.Elems {
			if b, err = appendTerm(b, e, atoms, depth+1); err != nil {
				return nil, err
			}
		}
		tail := v.Tail
		if tail == nil {
			tail = Nil{}
		}
		return appendTerm(b, tail, atoms, depth+1)
	case Tuple:
		if len(v) <= 255 {
			b = append(b, TagSmallTuple, byte(len(v)))
		} else {
			b = binary.BigEndian.AppendUint32(append(b, TagLargeTuple), uint32(len(v)))
		}
		for _, e := range v {
			if b, err = appendTerm(b, e, atoms, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case Map:
		b = binary.BigEndian.AppendUint32(append(b, TagMap), uint32(len(v)))
		for _, e := range v {
			if b, err = appendTerm(b, e.Key, atoms, depth+1); err != nil {
				return nil, err
			}
			if b, err = appendTerm(b, e.Value, atoms, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case Opaque:
		return append(b, v.Raw...), nil
	}
	return nil, fmt.Errorf("etf encode: unsupported Go type %T", t)
}

func AppendAtom(b []byte, s string, atoms AtomEncoding) ([]byte, error) {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxAtomChars {
		return nil, fmt.Errorf("etf encode: invalid atom %q", s)
	}
	if atoms == AtomsLatin1 {
		latin := make([]byte, 0, len(s))
		for _, r := range s {
			if r > 255 {
				latin = nil
				break
			}
			latin = append(latin, byte(r))
		}
		if latin != nil || s == "" {
			b = binary.BigEndian.AppendUint16(append(b, TagAtom), uint16(len(latin)))
			return append(b, latin...), nil
		}
	}
	if len(s) <= 255 {
		return append(append(b, TagSmallAtomUTF8, byte(len(s))), s...), nil
	}
	b = binary.BigEndian.AppendUint16(append(b, TagAtomUTF8), uint16(len(s)))
	return append(b, s...), nil
}

// appendBig writes SMALL_BIG_EXT (≤255 digit bytes) or LARGE_BIG_EXT.
func appendBig(b []byte, v *big.Int) []byte {
	mag := v.Bytes() // big-endian magnitude
	if len(mag) <= 255 {
		b = append(b, TagSmallBig, byte(len(mag)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, TagLargeBig), uint32(len(mag)))
	}
	sign := byte(0)
	if v.Sign() < 0 {
		sign = 1
	}
	b = append(b, sign)
	for i := len(mag) - 1; i >= 0; i-- {
		b = append(b, mag[i])
	}
	return b
}
