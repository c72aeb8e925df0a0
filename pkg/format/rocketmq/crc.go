package rocketmq

import (
	"bytes"

	"github.com/storectl/storectl/pkg/format"
)

// PropCRCReservedLen is CRC32_RESERVED_LEN: the bytes a property CRC
// occupies at the very end of a record: "__CRC32#", 0x01, 10 digits, 0x02.
const PropCRCReservedLen = len(PropCRC32) + 1 + 10 + 1

// BodyCRCOK reports whether the stored BODYCRC matches the body. As in the
// broker, an empty body is not checked.
func (m *Message) BodyCRCOK() bool {
	return len(m.Body) == 0 || CRC32(m.Body) == m.BodyCRC
}

var propCRC32Key = []byte(PropCRC32)

// PropCRC describes the optional whole-record CRC of rocketmq 5.2+
// (enabledAppendPropCRC, §2.5).
type PropCRC struct {
	Present  bool  // the record carries a __CRC32# property
	Stored   int64 // value rebuilt from the digits, least significant first
	Computed int32 // CRC32 of Raw[:TotalSize-20]
	OK       bool  // Present, well formed in the last 20 bytes, and equal
}

// PropCRC returns the property CRC state of m. A __CRC32# property that is
// not the record's last 20 bytes, or has non-digits, is Present but not OK.
// It is worked out once per decoded record (a CRC of the whole record):
// Verify, the scan's counts and the record output all ask for it.
func (m *Message) PropCRC() PropCRC {
	if !m.propCRCDone {
		m.propCRC, m.propCRCDone = m.computePropCRC(), true
	}
	return m.propCRC
}

func (m *Message) computePropCRC() PropCRC {
	var p PropCRC
	// Fast path: the key can't be there (vectorised searches, no property
	// walk). The key ends in '#', rare in property text: look for that
	// byte first, then for the key from 7 bytes before it.
	i := bytes.IndexByte(m.Properties, propCRC32Key[len(propCRC32Key)-1])
	if i < 0 || !bytes.Contains(m.Properties[max(0, i-(len(propCRC32Key)-1)):], propCRC32Key) {
		return p
	}
	v, ok := m.Property(PropCRC32)
	if !ok {
		return p
	}
	p.Present = true
	for i := len(v) - 1; i >= 0; i-- {
		d := v[i]
		if d < '0' || d > '9' || len(v) > 10 {
			return p
		}
		p.Stored = p.Stored*10 + int64(d-'0')
	}
	n := len(m.Raw) - PropCRCReservedLen
	if n < 0 {
		return p
	}
	tail := m.Raw[n:]
	if !bytes.HasPrefix(tail, []byte(PropCRC32+"\x01")) || tail[len(tail)-1] != PropertySeparator ||
		!bytes.Equal(tail[len(PropCRC32)+1:len(tail)-1], v) {
		return p
	}
	p.Computed = CRC32(m.Raw[:n])
	p.OK = p.Stored == int64(p.Computed)
	return p
}

// Verify checks m's checksums the way a careful reader should: the body
// CRC always (CommitLog with forceVerifyPropCRC=false) and the property
// CRC whenever present. It returns nil or a *format.CorruptError with
// Field "bodyCRC" or "propCRC" and cause format.ErrChecksum. BLANK records
// have nothing to verify.
func (m *Message) Verify() error {
	if m.IsBlank() {
		return nil
	}
	if !m.BodyCRCOK() {
		return format.Corrupt(m.Offset+8, "bodyCRC", format.ErrChecksum)
	}
	if p := m.PropCRC(); p.Present && !p.OK {
		return format.Corrupt(m.Offset+int64(len(m.Raw)-PropCRCReservedLen), "propCRC", format.ErrChecksum)
	}
	return nil
}
