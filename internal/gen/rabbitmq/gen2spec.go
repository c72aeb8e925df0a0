package rabbitmq

import (
	"encoding/binary"
	"errors"
)

// Gen2SpecMaxFile is the largest file Gen2Spec models: one 4 MiB scan
// block of the broker, so that "read more" always means end of file.
const Gen2SpecMaxFile = 4 << 20

// ErrGen2SpecMultiBlock is returned by Gen2Spec for a file larger than
// Gen2SpecMaxFile, which the model does not cover.
var ErrGen2SpecMultiBlock = errors.New("gen2spec: the model covers single-block files only")

// SpecRecord is one {MsgId, TotalSize, Offset} that a scanner model
// accepts.
type SpecRecord struct {
	ID     string // the 16 msg id bytes of the frame, as a string
	Offset int64  // offset of the frame's size field in the file
	Total  int64  // TotalSize: Size + 9 (size field and end marker)
}

// Gen2Spec is the generation-2 scanner of RabbitMQ 3.13.1–4.0.2
// (scan_data/6 without a validity Fun), written from
// docs/formats/rabbitmq-classic.md §3.2 for files that fit one 4 MiB scan block (the whole
// file is buffered, so "read more" always hits end of file). It shares
// no code with pkg/format/rabbitmq's ScanData so that it stays a second
// opinion:
//
//	A. size ≥ 16, the frame fits, marker 0xFF: a new id is accepted and
//	   the scan jumps TotalSize; an id already seen advances one byte;
//	B. the frame does not fit and size < FileSize − pos: read more → EOF:
//	   return what was accepted;
//	C. fewer than 8 bytes left: return;
//	D. otherwise advance one byte.
func Gen2Spec(b []byte) ([]SpecRecord, error) {
	if len(b) > Gen2SpecMaxFile {
		return nil, ErrGen2SpecMultiBlock
	}
	var acc []SpecRecord
	seen := map[string]bool{}
	n := len(b)
	for pos := 0; ; {
		rest := n - pos
		if rest < 8 {
			return acc, nil
		}
		size := binary.BigEndian.Uint64(b[pos:])
		fits := rest >= 9 && size <= uint64(rest-9)
		if fits && size >= 16 && b[pos+8+int(size)] == 0xFF {
			id := string(b[pos+8 : pos+24])
			if seen[id] {
				pos++
				continue
			}
			seen[id] = true
			acc = append(acc, SpecRecord{id, int64(pos), int64(size) + 9})
			pos += int(size) + 9
			continue
		}
		if !fits && size < uint64(rest) {
			return acc, nil
		}
		pos++
	}
}
