// Package rocketmq writes RocketMQ store bytes for tests and benchmarks:
// an encoder for commitlog records and a deterministic store generator.
// It is the only non-repair code that writes store bytes.
package rocketmq

import (
	"encoding/binary"
	"strconv"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// Msg is what EncodeMessage writes. Host widths and the V2 magic follow
// from the fields: an IPv6 host sets its SYSFLAG bit and a topic longer
// than 127 bytes is written as V2 (autoMessageVersionOnTopicLen).
type Msg struct {
	Topic                     string
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32 // host bits are set automatically
	BornTimestamp             int64
	BornHost                  rmq.Host
	StoreTimestamp            int64
	StoreHost                 rmq.Host
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Properties                string // raw text, key\x01value\x02...
	PropCRC                   bool   // append __CRC32# as enabledAppendPropCRC does
	BodyCRC                   *int32 // override the computed body CRC (for damage tests)
}

// EncodeMessage returns the commitlog record for m.
func EncodeMessage(m *Msg) []byte { return AppendMessage(nil, m) }

// AppendMessage appends the commitlog record for m to dst.
func AppendMessage(dst []byte, m *Msg) []byte {
	sys := m.SysFlag &^ (rmq.FlagBornHostV6 | rmq.FlagStoreHostV6)
	if m.BornHost.Addr.Is6() {
		sys |= rmq.FlagBornHostV6
	}
	if m.StoreHost.Addr.Is6() {
		sys |= rmq.FlagStoreHostV6
	}
	magic := rmq.MagicMessageV1
	if len(m.Topic) > 127 {
		magic = rmq.MagicMessageV2
	}
	props := m.Properties
	if m.PropCRC {
		if len(props) > 0 && props[len(props)-1] != rmq.PropertySeparator {
			props += "\x02"
		}
		props += rmq.PropCRC32 + "\x01" + "0000000000" + "\x02"
	}
	total := rmq.CalMsgLength(magic, sys, len(m.Body), len(m.Topic), len(props))
	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(total))
	dst = be.AppendUint32(dst, magic)
	crc := rmq.CRC32(m.Body)
	if m.BodyCRC != nil {
		crc = *m.BodyCRC
	}
	dst = be.AppendUint32(dst, uint32(crc))
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.PhysicalOffset))
	dst = be.AppendUint32(dst, uint32(sys))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = m.BornHost.AppendBytes(dst)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = m.StoreHost.AppendBytes(dst)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	if magic == rmq.MagicMessageV2 {
		dst = be.AppendUint16(dst, uint16(len(m.Topic)))
	} else {
		dst = append(dst, byte(len(m.Topic)))
	}
	dst = append(dst, m.Topic...)
	dst = be.AppendUint16(dst, uint16(len(props)))
	dst = append(dst, props...)
	if m.PropCRC {
		rec := dst[start:]
		n := len(rec) - rmq.PropCRCReservedLen
		c := rmq.CRC32(rec[:n])
		digits := rec[n+len(rmq.PropCRC32)+1 : len(rec)-1]
		s := strconv.FormatInt(int64(c), 10)
		for i := range digits {
			digits[i] = '0'
		}
		for i := 0; i < len(s); i++ { // least significant digit first
			digits[i] = s[len(s)-1-i]
		}
	}
	return dst
}

// AppendBlank appends the 8-byte BLANK record that closes a file with
// remaining bytes left.
func AppendBlank(dst []byte, remaining int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(remaining))
	return binary.BigEndian.AppendUint32(dst, rmq.MagicBlank)
}

// Props builds a raw properties string from key/value pairs, each pair
// followed by 0x02 as the 5.x writer does.
func Props(kv ...string) string {
	var s string
	for i := 0; i+1 < len(kv); i += 2 {
		s += kv[i] + "\x01" + kv[i+1] + "\x02"
	}
	return s
}
