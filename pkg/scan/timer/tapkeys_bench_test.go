package timer

import (
	"fmt"
	"testing"
)

// tapProps are property strings of the generated timer store's records
// (genstore -kind rocketmq-timer): what the prepass tap's lookup walks
// once per record.
func tapProps() [][]byte {
	topics := []string{"TopicA", "TopicB", "TopicC", "%RETRY%GroupX"}
	var out [][]byte
	for i := range 64 {
		out = append(out, fmt.Appendf(nil, "REAL_TOPIC\x01%s\x02REAL_QID\x01%d\x02TIMER_OUT_MS\x01%d\x02TIMER_DELAY_SEC\x01%d\x02UNIQ_KEY\x017F00000100002A9F%016X\x02seq\x01%d\x02",
			topics[i%len(topics)], i%4, 1796163818000+int64(i)*1000, 16+i, i, i))
	}
	return out
}

// BenchmarkLookupTapKeys: the tap's property lookup per record.
func BenchmarkLookupTapKeys(b *testing.B) {
	props := tapProps()
	var vals [3][]byte
	var found [3]bool
	b.ResetTimer()
	for i := range b.N {
		lookupTapKeys(props[i%len(props)], vals[:], found[:])
	}
}
