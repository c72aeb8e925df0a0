package rocketmq

import (
	"bytes"
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/storectl/storectl/internal/crc32x"
)

// CRC32 is RocketMQ's UtilAll.crc32: IEEE CRC-32 masked to 31 bits.
func CRC32(b []byte) int32 { return int32(crc32x.ChecksumIEEE(b) & 0x7FFFFFFF) }

// JavaHashCode is Java's String.hashCode of the UTF-8 text b:
// h = 31*h + c over UTF-16 code units with int32 wrap-around. Invalid
// UTF-8 decodes to U+FFFD, as Java's decoder does in most cases.
func JavaHashCode(b []byte) int32 { return JavaHashCodeFrom(0, b) }

// JavaHashCodeFrom continues JavaHashCode over b from h, the hash code of
// the text before b: JavaHashCode(a+b) == JavaHashCodeFrom(JavaHashCode(a), b)
// whenever a ends with a complete UTF-8 sequence or b starts with ASCII
// (the decoding does not straddle the cut). Callers hashing many keys
// behind one prefix (IndexService.buildKey's topic + "#") hash the prefix
// once.
func JavaHashCodeFrom(h int32, b []byte) int32 {
	// Eight ASCII bytes at once while there are eight (a UNIQ_KEY is 32
	// hex digits): the same sum, the multiplies without a chain between
	// them, one multiply of h per eight bytes.
	for len(b) >= 8 && binary.LittleEndian.Uint64(b)&0x8080808080808080 == 0 {
		// 31^1..31^8 with int32 wrap-around (31^7 and 31^8 wrap).
		const p1, p2, p3, p4, p5, p6, p7, p8 = 31, 961, 29791, 923521, 28629151, 887503681, 1742810335, -1807454463
		c := b[:8]
		h = h*p8 + int32(c[0])*p7 + int32(c[1])*p6 + int32(c[2])*p5 +
			int32(c[3])*p4 + int32(c[4])*p3 + int32(c[5])*p2 + int32(c[6])*p1 + int32(c[7])
		b = b[8:]
	}
	for len(b) > 0 {
		// Four ASCII bytes at once: the same sum, but four multiply-adds
		// without a chain between them.
		if len(b) >= 4 && binary.LittleEndian.Uint32(b)&0x80808080 == 0 {
			h = h*(31*31*31*31) + int32(b[0])*(31*31*31) + int32(b[1])*(31*31) + int32(b[2])*31 + int32(b[3])
			b = b[4:]
			continue
		}
		if c := b[0]; c < utf8.RuneSelf { // ASCII: one UTF-16 unit
			h = 31*h + int32(c)
			b = b[1:]
			continue
		}
		// Invalid UTF-8 gives (RuneError, 1), as ranging over a string does.
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		r1, r2 := utf16.EncodeRune(r)
		h = 31*h + int32(r1)
		h = 31*h + int32(r2)
	}
	return h
}

// IndexKeyHash is IndexFile.indexKeyHashMethod for the key string
// topic + "#" + key: abs(hashCode), with Integer.MIN_VALUE mapped to 0.
func IndexKeyHash(key []byte) int32 { return IndexHashOf(JavaHashCode(key)) }

// IndexKeyHasher gives IndexKeyHash(topic + "#" + key)
// (IndexService.buildKey) for key after key without building the string:
// the hash code of topic + "#" is worked out once per run of keys of one
// topic and continued over each key. The zero value is ready to use; it is
// not safe for concurrent use.
type IndexKeyHasher struct {
	topic  []byte // the topic whose prefix hash code is prefix
	prefix int32  // JavaHashCode(topic + "#")
	ok     bool
}

// Hash returns IndexKeyHash(topic + "#" + key).
func (h *IndexKeyHasher) Hash(topic, key []byte) int32 {
	if !h.ok || !bytes.Equal(h.topic, topic) {
		h.topic = append(h.topic[:0], topic...)
		h.prefix = IndexKeyPrefix(topic)
		h.ok = true
	}
	return IndexKeyHashAfter(h.prefix, key)
}

// IndexKeyPrefix is the hash code of topic + "#" (IndexService.buildKey's
// prefix), for IndexKeyHashAfter: a caller that knows a record's topic by
// a number keeps one per topic.
func IndexKeyPrefix(topic []byte) int32 { return JavaHashCodeFrom(JavaHashCode(topic), []byte{'#'}) }

// IndexKeyHashAfter is IndexKeyHash(topic + "#" + key) from prefix =
// IndexKeyPrefix(topic).
func IndexKeyHashAfter(prefix int32, key []byte) int32 {
	return IndexHashOf(JavaHashCodeFrom(prefix, key))
}

// IndexHashOf is IndexFile.indexKeyHashMethod applied to a key's hash code
// h: abs(h), with Integer.MIN_VALUE mapped to 0.
func IndexHashOf(h int32) int32 {
	if h == -1<<31 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}

// ScheduleTopic is the topic delayed messages are parked in (4.x).
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// DefaultDelayLevelsMs is the broker's default messageDelayLevel
// "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h" in ms.
var DefaultDelayLevelsMs = []int64{
	1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000,
	360000, 420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000,
}

// TagsCode is the consume-queue tags code checkMessageAndReturnSize
// computes: TAGS.hashCode() (0 without tags); for SCHEDULE_TOPIC_XXXX with
// a DELAY level > 0, the delivery time storeTimestamp + delay(level), the
// level capped at the last default level.
func (m *Message) TagsCode() int64 {
	var code int64
	if t, ok := m.Property(PropTags); ok {
		code = int64(JavaHashCode(t))
	}
	if string(m.Topic) == ScheduleTopic {
		if v, ok := m.Property(PropDelay); ok {
			if lvl, ok := parseJavaInt(v); ok && lvl > 0 {
				if lvl > int64(len(DefaultDelayLevelsMs)) {
					lvl = int64(len(DefaultDelayLevelsMs))
				}
				code = m.StoreTimestamp + DefaultDelayLevelsMs[lvl-1]
			}
		}
	}
	return code
}

// DispatchTagsCode is m.TagsCode() from m's DispatchProps as
// LookupProperties returned them (vals, found): the TAGS hash code without
// a second walk of the properties, except for SCHEDULE_TOPIC_XXXX, whose
// DELAY level needs one.
func DispatchTagsCode(m *Message, vals [][]byte, found []bool) int64 {
	switch {
	case string(m.Topic) == ScheduleTopic:
		return m.TagsCode() // delay level arithmetic
	case found[DispatchTags]:
		return int64(JavaHashCode(vals[DispatchTags]))
	}
	return 0
}
