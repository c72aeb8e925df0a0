package timer

import (
	"bytes"
	"strconv"
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
		var wv, gv [3][]byte
		var wf, gf [3]bool
		rmq.LookupProperties(raw, tapKeys, wv[:], wf[:])
		lookupTapKeys(raw, gv[:], gf[:])
		for k := range tapKeys {
			if wf[k] != gf[k] || !bytes.Equal(wv[k], gv[k]) {
				t.Fatalf("%q: key %s: LookupProperties %v %q, lookupTapKeys %v %q", raw, tapKeys[k], wf[k], wv[k], gf[k], gv[k])
			}
		}
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
