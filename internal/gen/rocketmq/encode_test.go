package rocketmq

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// TestEncodeWorkedExample: the encoder reproduces the hex dump of
// docs/formats/rocketmq.md §2.7 byte for byte.
func TestEncodeWorkedExample(t *testing.T) {
	want := strings.Join(strings.Fields(`
00 00 00 80 da a3 20 a7 77 d1 89 82 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00
7f 00 00 01 00 00 c3 50 00 00 01 8b cf e5 68 7b
c0 a8 00 0a 00 00 2a 9f 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 05 48 65 6c 6c 6f 09 54 6f
70 69 63 54 65 73 74 00 17 54 41 47 53 01 54 61
67 41 02 4b 45 59 53 01 6f 72 64 65 72 2d 31 02`), "")
	got := hex.EncodeToString(EncodeMessage(&Msg{
		Topic: "TopicTest", BornTimestamp: 1700000000000, StoreTimestamp: 1700000000123,
		BornHost:   rmq.Host{Addr: netip.MustParseAddr("127.0.0.1"), Port: 50000},
		StoreHost:  rmq.Host{Addr: netip.MustParseAddr("192.168.0.10"), Port: 10911},
		Body:       []byte("Hello"),
		Properties: Props("TAGS", "TagA", "KEYS", "order-1"),
	}))
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
