// Package rocketmq decodes Apache RocketMQ store files: commitlog records,
// consume queue units, index files, the checkpoint file and mapped-file
// names. It turns bytes into structs and does no I/O.
//
// The byte layouts, with their upstream sources, are in
// docs/formats/rocketmq.md (§2 commitlog, §4 consume queue, §5 index file,
// §6.1 checkpoint; section numbers in comments refer to it), read from
// apache/rocketmq CommitLog.checkMessageAndReturnSize and
// MessageExtEncoder. All integers are big-endian and, as in Java, signed.
package rocketmq

import (
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format"
)

// Magic codes at bytes 4..8 of every commitlog entry (§2.1).
const (
	MagicMessageV1 uint32 = 0xDAA320A7 // topic length is 1 signed byte
	MagicMessageV2 uint32 = 0xDAA320AB // topic length is 2 signed bytes (5.1.0+)
	MagicBlank     uint32 = 0xCBD43194 // end-of-file filler: 8 bytes, size = rest of file
)

// BlankSize is the number of bytes a BLANK record occupies on disk
// (END_FILE_MIN_BLANK_LENGTH): its TOTALSIZE and its magic.
const BlankSize = 8

// DefaultMaxMessageSize mirrors the broker's default maxMessageSize, which
// limits the body of one message.
const DefaultMaxMessageSize = 4 << 20

// DefaultMaxRecordSize is the largest whole record the broker's encoder can
// produce with the default settings: body limit plus the encoder's 64 KiB of
// headroom for headers, topic and properties (MessageExtEncoder).
const DefaultMaxRecordSize = DefaultMaxMessageSize + 64<<10

// MinRecordSize is calMsgLength of the smallest possible V1 record: IPv4
// hosts, empty body, empty topic, no properties. Anything smaller cannot
// be a message.
const MinRecordSize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2

// Message is one commitlog record. Body, Topic, Properties and Raw alias
// the slice passed to DecodeMessage; copy them to keep them past the next
// read. For a BLANK record only Offset, TotalSize and Magic are set.
type Message struct {
	Offset                    int64 // offset of the TOTALSIZE field, as passed to DecodeMessage
	TotalSize                 int32
	Magic                     uint32
	BodyCRC                   int32 // stored BODYCRC (masked CRC32, so never negative when valid)
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64 // stored PHYSICALOFFSET field
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  Host
	StoreTimestamp            int64
	StoreHost                 Host
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     []byte
	Properties                []byte // raw properties text, key 0x01 value 0x02 ...
	Raw                       []byte // the whole record, TotalSize bytes
	// propCRC memoizes PropCRC for this decoded record.
	propCRC     PropCRC
	propCRCDone bool
}

// IsBlank reports whether m is the BLANK end-of-file record.
func (m *Message) IsBlank() bool { return m.Magic == MagicBlank }

// Version is 1 for MagicMessageV1, 2 for MagicMessageV2 and 0 otherwise.
func (m *Message) Version() int {
	switch m.Magic {
	case MagicMessageV1:
		return 1
	case MagicMessageV2:
		return 2
	}
	return 0
}

// DecodeMessage decodes the commitlog entry that starts at b[0]. off is the
// offset of b[0] (file or physical, the caller chooses); it is used for
// Message.Offset and error positions only. maxSize bounds TOTALSIZE
// (DefaultMaxRecordSize when <= 0).
//
// It mirrors CommitLog.checkMessageAndReturnSize without the CRC checks
// (see Message.Verify): signed lengths, host widths per SYSFLAG and the
// calMsgLength consistency check. A BLANK record decodes without error
// and its TOTALSIZE is not checked, as in the broker.
func DecodeMessage(b []byte, off int64, maxSize int) (Message, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	c := format.Cursor{B: b}
	m := Message{Offset: off}
	m.TotalSize = int32(c.U32("totalSize"))
	m.Magic = c.U32("magic")
	if c.Failed() {
		return m, c.Err(off)
	}
	switch m.Magic {
	case MagicBlank:
		return m, nil
	case MagicMessageV1, MagicMessageV2:
	default:
		c.FailAt(4, "magic", format.ErrMagic)
		return m, c.Err(off)
	}
	switch {
	case m.TotalSize < MinRecordSize:
		c.FailAt(0, "totalSize", format.ErrInvalid)
	case int(m.TotalSize) > maxSize:
		c.FailAt(0, "totalSize", format.ErrTooLarge)
	case int(m.TotalSize) > len(b):
		c.FailAt(0, "totalSize", format.ErrShort)
	}
	if c.Failed() {
		return m, c.Err(off)
	}
	c.B = b[:m.TotalSize] // nothing below may read past this entry
	m.Raw = c.B
	m.BodyCRC = int32(c.U32("bodyCRC"))
	m.QueueID = int32(c.U32("queueId"))
	m.Flag = int32(c.U32("flag"))
	m.QueueOffset = int64(c.U64("queueOffset"))
	m.PhysicalOffset = int64(c.U64("physicalOffset"))
	m.SysFlag = int32(c.U32("sysFlag"))
	m.BornTimestamp = int64(c.U64("bornTimestamp"))
	m.BornHost = readHost(&c, "bornHost", m.SysFlag&FlagBornHostV6 != 0)
	m.StoreTimestamp = int64(c.U64("storeTimestamp"))
	m.StoreHost = readHost(&c, "storeHost", m.SysFlag&FlagStoreHostV6 != 0)
	m.ReconsumeTimes = int32(c.U32("reconsumeTimes"))
	m.PreparedTransactionOffset = int64(c.U64("preparedTransactionOffset"))
	bodyLen := int32(c.U32("bodyLength"))
	if bodyLen < 0 {
		c.FailAt(c.Off-4, "bodyLength", format.ErrInvalid)
	}
	m.Body = c.Take("body", int(bodyLen))
	var topicLen int
	if m.Magic == MagicMessageV2 {
		topicLen = int(int16(c.U16("topicLength")))
	} else {
		topicLen = int(int8(c.U8("topicLength"))) // signed: >= 0x80 is negative in Java
	}
	if topicLen < 0 {
		c.FailAt(c.Off-topicLenSize(m.Magic), "topicLength", format.ErrInvalid)
	}
	m.Topic = c.Take("topic", topicLen)
	propLen := int(int16(c.U16("propertiesLength")))
	if propLen < 0 {
		c.FailAt(c.Off-2, "propertiesLength", format.ErrInvalid)
	}
	m.Properties = c.Take("properties", propLen)
	if c.Failed() {
		return m, c.Err(off)
	}
	want := CalMsgLength(m.Magic, m.SysFlag, len(m.Body), len(m.Topic), len(m.Properties))
	if want != int(m.TotalSize) || c.Remaining() != 0 {
		c.FailAt(0, "totalSize", format.ErrInvalid)
		return m, c.Err(off)
	}
	return m, nil
}

func topicLenSize(magic uint32) int {
	if magic == MagicMessageV2 {
		return 2
	}
	return 1
}

// CalMsgLength is MessageExtEncoder.calMsgLength: the TOTALSIZE a record
// with these field lengths must declare.
func CalMsgLength(magic uint32, sysFlag int32, bodyLen, topicLen, propLen int) int {
	born, store := 8, 8
	if sysFlag&FlagBornHostV6 != 0 {
		born = 20
	}
	if sysFlag&FlagStoreHostV6 != 0 {
		store = 20
	}
	return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 +
		4 + bodyLen + topicLenSize(magic) + topicLen + 2 + propLen
}

// DecodeMessageInto is DecodeMessage into *m, for a walk that reuses one
// Message: m is overwritten whole, with the same fields and the same
// error as DecodeMessage gives. A well-formed record is decoded by one
// pass of direct reads; anything else (a BLANK, a bad size or magic, a
// length that does not add up) goes through DecodeMessage, which names
// the failing field.
func DecodeMessageInto(m *Message, b []byte, off int64, maxSize int) error {
	if maxSize <= 0 {
		maxSize = DefaultMaxRecordSize
	}
	if len(b) >= 8 {
		ts := int32(binary.BigEndian.Uint32(b))
		magic := binary.BigEndian.Uint32(b[4:])
		if (magic == MagicMessageV1 || magic == MagicMessageV2) && ts >= MinRecordSize && int(ts) <= maxSize &&
			int(ts) <= len(b) && decodeFast(m, b[:ts], off, magic) {
			return nil
		}
	}
	var err error
	*m, err = DecodeMessage(b, off, maxSize)
	return err
}

// decodeFast decodes r, exactly one record of TotalSize len(r) and a
// message magic, into m when every length is in bounds and they add up to
// len(r) (what DecodeMessage accepts), and reports whether it did; m is
// left unspecified when it did not.
func decodeFast(m *Message, r []byte, off int64, magic uint32) bool {
	const sysFlagAt = 36
	be := binary.BigEndian
	sysFlag := int32(be.Uint32(r[sysFlagAt:]))
	born, store := 8, 8
	if sysFlag&FlagBornHostV6 != 0 {
		born = 20
	}
	if sysFlag&FlagStoreHostV6 != 0 {
		store = 20
	}
	bornAt := sysFlagAt + 4 + 8
	storeTSAt := bornAt + born
	storeAt := storeTSAt + 8
	reconsumeAt := storeAt + store
	bodyLenAt := reconsumeAt + 4 + 8
	bodyAt := bodyLenAt + 4
	if bodyAt > len(r) {
		return false
	}
	bodyLen := int(int32(be.Uint32(r[bodyLenAt:])))
	tls := topicLenSize(magic)
	if bodyLen < 0 || bodyLen > len(r)-bodyAt-tls {
		return false
	}
	p := bodyAt + bodyLen
	var topicLen int
	if tls == 2 {
		topicLen = int(int16(be.Uint16(r[p:])))
	} else {
		topicLen = int(int8(r[p]))
	}
	p += tls
	if topicLen < 0 || topicLen > len(r)-p-2 {
		return false
	}
	q := p + topicLen
	propLen := int(int16(be.Uint16(r[q:])))
	q += 2
	if propLen < 0 || propLen != len(r)-q {
		return false
	}
	// Field by field into m, not *m = Message{...}: that literal is built
	// on the stack with 8-byte stores and copied with 16-byte loads, which
	// the CPU cannot forward from the stores in flight (perf put 8.5% of
	// decodeFast's samples on that copy in a scan of small messages).
	m.Offset = off
	m.TotalSize = int32(len(r))
	m.Magic = magic
	m.BodyCRC = int32(be.Uint32(r[8:]))
	m.QueueID = int32(be.Uint32(r[12:]))
	m.Flag = int32(be.Uint32(r[16:]))
	m.QueueOffset = int64(be.Uint64(r[20:]))
	m.PhysicalOffset = int64(be.Uint64(r[28:]))
	m.SysFlag = sysFlag
	m.BornTimestamp = int64(be.Uint64(r[sysFlagAt+4:]))
	m.BornHost = hostAt(r[bornAt:], born)
	m.StoreTimestamp = int64(be.Uint64(r[storeTSAt:]))
	m.StoreHost = hostAt(r[storeAt:], store)
	m.ReconsumeTimes = int32(be.Uint32(r[reconsumeAt:]))
	m.PreparedTransactionOffset = int64(be.Uint64(r[reconsumeAt+4:]))
	m.Body = r[bodyAt : bodyAt+bodyLen : bodyAt+bodyLen]
	m.Topic = r[p : q-2 : q-2]
	m.Properties = r[q:len(r):len(r)]
	m.Raw = r
	m.propCRC, m.propCRCDone = PropCRC{}, false
	return true
}
