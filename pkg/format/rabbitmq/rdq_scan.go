package rabbitmq

// Models of RabbitMQ's own .rdq scanners (§3), as pure functions over a
// file's bytes, so a forensic tool can say what a given broker version
// would recover from a file. They reproduce the brokers' results, quirks
// included (4 MiB read blocks, zero-word stop, byte-wise resync, the
// off-by-nine bound); they are not meant as good scanners.

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/format"
)

// ScanBlockSize is SCAN_BLOCK_SIZE (4 MiB) of rabbit_msg_file and
// rabbit_msg_store: the scanners read files in blocks of this size, which
// is visible in their results (generation 1 after a zero word).
const ScanBlockSize = 4 << 20

// ScanRecord is one {MsgId, TotalSize, Offset} a scanner returns.
type ScanRecord struct {
	MsgID     [16]byte
	Offset    int64
	TotalSize int64
}

// ScanGen1Result is what rabbit_msg_file:scan/4 returns: the accepted
// records in file order and the scan offset where it stopped.
type ScanGen1Result struct {
	Records []ScanRecord
	End     int64 // ScanOffset: end of the last frame the scanner walked over
}

// ScanGen1 models rabbit_msg_file:scan/4 (≤3.12.x and 3.13.0, §3.1). Per
// 4 MiB block it walks frames from the last position: an 8-byte zero word
// discards the rest of the block ("stop"; later blocks are still parsed
// from their first byte, with the offset counter left at the zero word, as
// the broker does); a complete frame is accepted if its marker is 0xFF and
// skipped otherwise; an incomplete frame waits for the next block and is
// dropped at end of file. A complete frame with Size < 16 and marker 0xFF
// crashes the broker's scanner ({badmatch, ...}, edge case 13, which takes
// the whole vhost down); the model returns an ErrInvalid CorruptError at
// that frame together with the records found before it.
func ScanGen1(b []byte) (ScanGen1Result, error) { return ScanGen1Reached(b, nil) }

// ReachedStep is how often ScanGen1Reached tells its caller how far it
// has read.
const ReachedStep = 256 << 10

// ScanGen1Reached is ScanGen1 that calls reached(off), when not nil, at
// the start and then about every ReachedStep bytes with the offset it
// has reached: the model reads nothing before off again (a caller that
// maps b lets those pages go).
func ScanGen1Reached(b []byte, reached func(off int64)) (ScanGen1Result, error) {
	var res ScanGen1Result
	fileSize := len(b)
	readOff, dataStart := 0, 0 // buffered data is b[dataStart:readOff]
	next := fileSize + 1       // the next offset to report
	if reached != nil {
		reached(0)
		next = ReachedStep
	}
	for readOff < fileSize {
		readOff += min(ScanBlockSize, fileSize-readOff)
		p := dataStart
		for {
			if p >= next {
				reached(int64(p))
				next = p + ReachedStep
			}
			rest := readOff - p
			if rest == 0 {
				dataStart = p
				break
			}
			if rest >= 8 && binary.BigEndian.Uint64(b[p:]) == 0 {
				dataStart = readOff // scanner returns <<>>: the block's rest is dropped
				break
			}
			if rest < RDQOverhead {
				dataStart = p
				break
			}
			size := binary.BigEndian.Uint64(b[p:])
			if size > uint64(rest-RDQOverhead) {
				dataStart = p // incomplete: keep for the next block
				break
			}
			end := p + RDQSizeFieldLen + int(size)
			total := int64(size) + RDQOverhead
			if b[end] == RDQWriteOK {
				if size < RDQMinSize {
					return res, format.Corrupt(int64(p), "size", format.ErrInvalid)
				}
				var r ScanRecord
				copy(r.MsgID[:], b[p+RDQSizeFieldLen:])
				r.Offset, r.TotalSize = res.End, total
				res.Records = append(res.Records, r)
			}
			res.End += total
			p = end + 1
		}
	}
	return res, nil
}

// Validity is the answer of a generation-3 validity Fun for one candidate.
type Validity int

// Answers of the validity Fun (rabbit_msg_store check_msg/5).
const (
	Valid           Validity = iota // {valid, Entry}: accept, jump TotalSize
	PreviouslyValid                 // previously_valid: jump TotalSize, do not return it
	Invalid                         // invalid: advance one byte
)

// ScanOptions selects the generation-2/3 scanner variant.
type ScanOptions struct {
	// Valid is the validity Fun (4.0.3+, 4.1.0+). Nil accepts every
	// candidate, which is generation 2 (3.13.1–4.0.2) and the same as
	// rabbit_msg_store:scan_file_for_valid_messages/1.
	Valid func(ScanRecord) Validity
	// LargeMessageShortcut enables the single-large-message clause
	// (4.0.7+, 4.1.0+, PR #13250).
	LargeMessageShortcut bool
	// OffByNineFix uses the clause-B bound size+9 <= FileSize-pos
	// (4.1.5+, 4.2.0+, PR #14576) instead of size < FileSize-pos.
	OffByNineFix bool
	// Seen, when not nil, is the map ScanData keeps the ids it took in:
	// cleared first, so a caller that scans many times (harden's
	// planner) saves the map's growth on each call. Nil: a map of its own.
	Seen map[[16]byte]bool
	// Buf, when not nil, is where the result goes (appended to Buf[:0]):
	// a caller that scans many times reuses the storage of a result it
	// no longer needs.
	Buf []ScanRecord
}

// ScanOptionsFor returns the scanner generation (1, 2 or 3) and options of
// a RabbitMQ version, per the version map in §0. Valid is left nil.
func ScanOptionsFor(major, minor, patch int) (gen int, o ScanOptions) {
	v := major*10000 + minor*100 + patch
	switch {
	case v <= 31300:
		return 1, o
	case v < 40003:
		return 2, o
	}
	o.LargeMessageShortcut = v >= 40007 // 4.0.7+ and every 4.1/4.2
	o.OffByNineFix = v >= 40105
	return 3, o
}

// ScanData models rabbit_msg_store:scan/7 and scan_data/7 of 3.13.1+
// (§3.2, §3.3). It returns the accepted records in file order. At each
// position, in clause order:
//
//	A. a whole frame is buffered, Size ≥ 16, marker 0xFF: if its id was
//	   already taken in this file, advance one byte; else ask Valid:
//	   Valid/PreviouslyValid take the id and jump TotalSize, Invalid
//	   advances one byte;
//	L. (LargeMessageShortcut) position 0 and FileSize == Size+9: if the
//	   file's last byte is 0xFF, Valid decides: Valid returns just that
//	   record, PreviouslyValid returns nothing, Invalid advances one byte
//	   (as does a last byte other than 0xFF);
//	B. the frame is not fully buffered and Size < FileSize-pos (fixed:
//	   Size+9 ≤ FileSize-pos): read the next 4 MiB block; at end of file
//	   return what was accepted so far (this drops the rest of the file);
//	C. fewer than 8 bytes buffered: read more, at end of file return;
//	D. otherwise advance one byte.
func ScanData(b []byte, o ScanOptions) []ScanRecord {
	acc := o.Buf[:0]
	seen := o.Seen
	if seen == nil {
		seen = map[[16]byte]bool{}
	}
	clear(seen)
	fileSize := uint64(len(b))
	readEnd := min(ScanBlockSize, len(b))
	pos := 0
	for {
		buf := readEnd - pos
		if buf < 8 {
			if readEnd == len(b) {
				return acc
			}
			readEnd += min(ScanBlockSize, len(b)-readEnd)
			continue
		}
		size := binary.BigEndian.Uint64(b[pos:])
		fits := buf >= RDQOverhead && size <= uint64(buf-RDQOverhead)
		if fits && size >= RDQMinSize && b[pos+RDQSizeFieldLen+int(size)] == RDQWriteOK {
			r := rdqScanRecord(b, pos, size)
			if !seen[r.MsgID] {
				switch rdqAsk(o.Valid, r) {
				case Valid:
					acc = append(acc, r)
					fallthrough
				case PreviouslyValid:
					seen[r.MsgID] = true
					pos += int(r.TotalSize)
					continue
				}
			}
			pos++
			continue
		}
		if o.LargeMessageShortcut && pos == 0 && buf >= RDQHeaderLen && size <= fileSize-RDQOverhead &&
			fileSize == size+RDQOverhead {
			if b[len(b)-1] == RDQWriteOK {
				r := rdqScanRecord(b, 0, size)
				switch rdqAsk(o.Valid, r) {
				case Valid:
					return []ScanRecord{r}
				case PreviouslyValid:
					return nil // check_msg continues with the empty Acc, and the scan ends
				}
			}
			pos++
			continue
		}
		remain := fileSize - uint64(pos)
		more := size < remain
		if o.OffByNineFix {
			more = remain >= RDQOverhead && size <= remain-RDQOverhead
		}
		if !fits && more {
			if readEnd == len(b) {
				return acc
			}
			readEnd += min(ScanBlockSize, len(b)-readEnd)
			continue
		}
		pos++
	}
}

func rdqScanRecord(b []byte, pos int, size uint64) ScanRecord {
	r := ScanRecord{Offset: int64(pos), TotalSize: int64(size) + RDQOverhead}
	copy(r.MsgID[:], b[pos+RDQSizeFieldLen:])
	return r
}

func rdqAsk(valid func(ScanRecord) Validity, r ScanRecord) Validity {
	if valid == nil {
		return Valid
	}
	return valid(r)
}

// ParseVersion reads a RabbitMQ version "MAJOR.MINOR.PATCH" (a leading
// "v", missing trailing parts and "-suffixes" allowed), as
// --broker-version takes it. Each part is 0-999.
func ParseVersion(s string) (major, minor, patch int, err error) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(strings.SplitN(p, "-", 2)[0])
		if err != nil || v < 0 || v > 999 {
			return 0, 0, 0, fmt.Errorf("broker version %q: want MAJOR.MINOR.PATCH", s)
		}
		n[i] = v
	}
	return n[0], n[1], n[2], nil
}

// PredictMisread is the §3.4 analysis of one real record at off, of
// totalSize bytes, in file b: when k >= 1 zero bytes precede it, the
// largest j <= min(k, 7) with C_j = S>>8j >= 16 whose tested byte (offset
// 8-j+C_j inside the record) is 0xFF gives a bogus frame at off-j of
// C_j+9 bytes that generation 2 accepts. ok is false when none does.
func PredictMisread(b []byte, off, totalSize int64) (candOff, candTotal int64, ok bool) {
	m := int(off)
	k := 0
	for k < 7 && m-k-1 >= 0 && b[m-k-1] == 0 {
		k++
	}
	s := uint64(totalSize - RDQOverhead)
	for j := k; j >= 1; j-- {
		c := s >> (8 * uint(j))
		if c < RDQMinSize {
			continue
		}
		if t := uint64(m-j) + 8 + c; t < uint64(len(b)) && b[t] == RDQWriteOK {
			return int64(m - j), int64(c) + RDQOverhead, true
		}
	}
	return 0, 0, false
}
