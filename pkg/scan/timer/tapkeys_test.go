package timer

import (
	"bytes"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// FuzzLookupTapKeys: the tap's property lookup finds what
// rmq.LookupProperties finds for the same keys, and checksOut's ms parse
// is strconv.ParseInt's.
func FuzzLookupTapKeys(f *testing.F) {
	f.Add([]byte("REAL_TOPIC\x01TopicA\x02REAL_QID\x010\x02TIMER_OUT_MS\x011796163818000\x02UNIQ_KEY\x01AB\x02"))
	f.Add([]byte("TIMER_DEL_UNIQKEY\x01x\x02TIMER_OUT_MS\x01\x02TIMER_OUT_MS\x01-5\x02TIMER_OUT_MSX\x011\x02R\x01"))
	f.Add([]byte("TIMER_OUT_MS\x01+12\x02REAL_TOPIC\x01a\x02REAL_TOPIC\x01\x02TIMER_DELAY_SEC\x0164\x02T\x02\x02"))
	f.Add([]byte("TIMER_OUT_MS\x019223372036854775808\x02TIMER_OUT_MS\x01000000000000000001\x02"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		wv, wf := sameTapKeys(t, raw)
		if wf[1] {
			n, ok := parseMs(wv[1])
			w, err := parseInt(wv[1])
			if ok != (err == nil) || ok && n != w {
				t.Fatalf("parseMs(%q) = %d, %v; ParseInt %d, %v", wv[1], n, ok, w, err)
			}
		}
	})
}

func parseInt(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) }

// TestParseMs: parseMs is strconv.ParseInt on runs of digits of every
// length to 20 (each taking the eight-at-a-time path from 9 to 16) and
// on the same runs with one byte replaced by each byte around the digits
// and the ones that carry or borrow in a word.
func TestParseMs(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(b []byte) {
		t.Helper()
		n, ok := parseMs(b)
		w, err := parseInt(b)
		if ok != (err == nil) || ok && n != w {
			t.Fatalf("parseMs(%q) = %d, %v; ParseInt %d, %v", b, n, ok, w, err)
		}
	}
	odd := []byte{0, '/', ':', '+', '-', ' ', 0x7f, 0x80, 0xaf, 0xb0, 0xb9, 0xba, 0xc6, 0xff}
	for n := 0; n <= 20; n++ {
		for range 200 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('0' + rng.Intn(10))
			}
			check(b)
			if n > 0 {
				c := append([]byte(nil), b...)
				c[rng.Intn(n)] = odd[rng.Intn(len(odd))]
				check(c)
			}
		}
	}
	check([]byte("9999999999999999"))
	check([]byte("0000000000000000"))
	check([]byte("1796163818000"))
}

// TestLookupTapKeysBlocks: lookupTapKeys finds what rmq.LookupProperties
// finds in property strings of 0-300 bytes (up to five of its 64-byte
// blocks, segments across their edges, the keys repeated, empty and
// short segments, a last segment without its separator).
func TestLookupTapKeysBlocks(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	parts := []string{"REAL_TOPIC\x01TopicA", "REAL_TOPIC\x01", "REAL_TOPICX\x01a", "TIMER_OUT_MS\x011796163818000",
		"TIMER_OUT_MS\x01", "TIMER_DEL_UNIQKEY\x01k1", "TIMER_DELAY_SEC\x0164", "UNIQ_KEY\x017F0000010000", "T", "R\x01", "",
		"seq\x0112", "TIMER_OUTXMS\x011", "REAL_QID\x013", "x\x01" + strings.Repeat("v", 70)}
	for range 5000 {
		var b []byte
		for len(b) < 300 && rng.Intn(12) > 0 {
			b = append(b, parts[rng.Intn(len(parts))]...)
			b = append(b, rmq.PropertySeparator)
		}
		b = b[:rng.Intn(len(b)+1)]
		sameTapKeys(t, b)
	}
}

// TestIsTimerTopic: isTimerTopic is a comparison with Topic, for Topic,
// every one-byte change of it, its prefixes and longer names.
func TestIsTimerTopic(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := isTimerTopic(b), string(b) == Topic; got != want {
			t.Fatalf("isTimerTopic(%q) = %v, want %v", b, got, want)
		}
	}
	check([]byte(Topic))
	check(nil)
	check([]byte(Topic + "x"))
	for i := range len(Topic) {
		check([]byte(Topic[:i]))
		b := []byte(Topic)
		b[i] ^= 0x20
		check(b)
	}
}

// sameTapKeys fails t unless lookupTapKeys finds in raw what
// rmq.LookupProperties finds for the tap's keys, and returns what they
// found.
func sameTapKeys(t *testing.T, raw []byte) (vals [3][]byte, found [3]bool) {
	t.Helper()
	var wv, gv [3][]byte
	var wf, gf [3]bool
	rmq.LookupProperties(raw, tapKeys, wv[:], wf[:])
	lookupTapKeys(raw, gv[:], gf[:])
	for k := range tapKeys {
		if wf[k] != gf[k] || !bytes.Equal(wv[k], gv[k]) {
			t.Fatalf("%q: key %s: LookupProperties %v %q, lookupTapKeys %v %q", raw, tapKeys[k], wf[k], wv[k], gf[k], gv[k])
		}
	}
	return wv, wf
}
