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
	// hex digits): the same sum, sum(c[i] * 31^(7-i)), built in the lanes
	// of one register (SWAR) rather than a multiply per byte: pairs
	// c[2k]*31 + c[2k+1] in 16-bit lanes (at most 127*32), quads of them
	// pair*961 + pair in 32-bit lanes (at most 3.9 M), then the two quads
	// quad*31^4 + quad with int32 wrap-around. No lane carries into the
	// next, so each lane holds the exact partial sum.
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if x&0x8080808080808080 != 0 {
			break
		}
		const p8 = -1807454463 // 31^8 with int32 wrap-around
		const lanes8, lanes16 = 0x00ff00ff00ff00ff, 0x0000ffff0000ffff
		y := (x&lanes8)*31 + (x>>8)&lanes8
		z := (y&lanes16)*961 + (y>>16)&lanes16
		h = h*p8 + int32(uint32(z)*923521+uint32(z>>32))
		b = b[8:]
	}
	for len(b) > 0 {
		// Four ASCII bytes at once, the same way in 32 bits.
		if len(b) >= 4 {
			if x := binary.LittleEndian.Uint32(b); x&0x80808080 == 0 {
				y := (x&0x00ff00ff)*31 + (x>>8)&0x00ff00ff
				h = h*(31*31*31*31) + int32((y&0xffff)*961+y>>16)
				b = b[4:]
				continue
			}
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
