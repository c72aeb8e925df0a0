package salvage

import "encoding/binary"

// specRecord is one {MsgId, TotalSize, Offset} of a scanner.
type specRecord struct {
	id     string
	offset int64
	total  int64
}

// gen2Spec is the generation-2 scanner of RabbitMQ 3.13.1–4.0.2
// (scan_data/6 without a validity Fun), written from §3.2 of
// rabbitmq-format.md for files that fit one 4 MiB scan block (the whole
// file is buffered, so "read more" always hits end of file):
//
//	A. size ≥ 16, the frame fits, marker 0xFF: a new id is accepted and
//	   the scan jumps TotalSize; an id already seen advances one byte;
//	B. the frame does not fit and size < FileSize − pos: read more → EOF:
//	   return what was accepted;
//	C. fewer than 8 bytes left: return;
//	D. otherwise advance one byte.
func gen2Spec(b []byte) []specRecord {
	if len(b) > 4<<20 {
		panic("gen2Spec models single-block files only")
	}
	var acc []specRecord
	seen := map[string]bool{}
	n := len(b)
	for pos := 0; ; {
		rest := n - pos
		if rest < 8 {
			return acc
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
			acc = append(acc, specRecord{id, int64(pos), int64(size) + 9})
			pos += int(size) + 9
			continue
		}
		if !fits && size < uint64(rest) {
			return acc
		}
		pos++
	}
}
