package rocketmq

import (
	"encoding/binary"
	"net/netip"
	"strconv"

	"github.com/storectl/storectl/pkg/format"
)

// Host is a born or store host: an IPv4 or IPv6 address and the port as
// stored (a Java int, so it is kept as int32 even when out of range).
type Host struct {
	Addr netip.Addr
	Port int32
}

// String formats h as "1.2.3.4:5" or "[2001:db8::1]:5" (RFC 5952), the
// invalid zero Host as "".
func (h Host) String() string {
	if !h.Addr.IsValid() {
		return ""
	}
	p := strconv.FormatInt(int64(h.Port), 10)
	if h.Addr.Is4() {
		return h.Addr.String() + ":" + p
	}
	return "[" + h.Addr.String() + "]:" + p
}

// AppendBytes appends the stored form of h: 4 or 16 address bytes and the
// port as a big-endian int.
func (h Host) AppendBytes(dst []byte) []byte {
	if h.Addr.Is4() {
		a := h.Addr.As4()
		dst = append(dst, a[:]...)
	} else {
		a := h.Addr.As16()
		dst = append(dst, a[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(h.Port))
}

// hostAt decodes a stored host of n bytes (8: IPv4, 20: IPv6) at p[0].
func hostAt(p []byte, n int) Host {
	var h Host
	if n == 20 {
		h.Addr = netip.AddrFrom16([16]byte(p[:16]))
	} else {
		h.Addr = netip.AddrFrom4([4]byte(p[:4]))
	}
	h.Port = int32(binary.BigEndian.Uint32(p[n-4:]))
	return h
}

func readHost(c *format.Cursor, field string, v6 bool) Host {
	n := 4
	if v6 {
		n = 16
	}
	p := c.Take(field, n+4)
	if p == nil {
		return Host{}
	}
	var h Host
	if v6 {
		h.Addr = netip.AddrFrom16([16]byte(p[:16]))
	} else {
		h.Addr = netip.AddrFrom4([4]byte(p[:4]))
	}
	h.Port = int32(binary.BigEndian.Uint32(p[n:]))
	return h
}

const hexUpper = "0123456789ABCDEF"

// MsgID is the message id RocketMQ shows to users
// (MessageDecoder.createMessageId): uppercase hex of the store host's
// address and port followed by the stored PHYSICALOFFSET; 32 hex digits
// for IPv4, 56 for IPv6.
func (m *Message) MsgID() string {
	var buf [28]byte
	b := m.StoreHost.AppendBytes(buf[:0])
	b = binary.BigEndian.AppendUint64(b, uint64(m.PhysicalOffset))
	out := make([]byte, 2*len(b))
	for i, v := range b {
		out[2*i] = hexUpper[v>>4]
		out[2*i+1] = hexUpper[v&0xF]
	}
	return string(out)
}
