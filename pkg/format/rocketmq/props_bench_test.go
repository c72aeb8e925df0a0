package rocketmq

import "testing"

// BenchmarkLookupDispatchProps is the dispatch keys' lookup on property
// strings shaped like the generator's and a broker's (UNIQ_KEY, TAGS,
// KEYS, user properties, WAIT/CLUSTER-like system properties).
func BenchmarkLookupDispatchProps(b *testing.B) {
	for _, fast := range []bool{false, true} {
		b.Run(map[bool]string{false: "LookupProperties", true: "LookupDispatchProps"}[fast], func(b *testing.B) { benchDispatchProps(b, fast) })
	}
}

func benchDispatchProps(b *testing.B, fast bool) {
	props := [][]byte{
		[]byte("UNIQ_KEY\x017F0000010000200A9F000000000000002A\x02seq\x010\x02unicode\x01caf\xc3\xa9-\xe2\x9c\x93-\xe4\xb8\xad\x02"),
		[]byte("TAGS\x01TagA\x02KEYS\x01order-1 order-2\x02UNIQ_KEY\x017F0000010000200A9F000000000000002B\x02WAIT\x01true\x02"),
		[]byte("CLUSTER\x01DefaultCluster\x02MIN_OFFSET\x010\x02MAX_OFFSET\x0112\x02TAGS\x01b\x02UNIQ_KEY\x01AC1100020000200A9F0000\x02"),
	}
	var vals [len(DispatchProps)][]byte
	var found [len(DispatchProps)]bool
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range props {
			if fast {
				LookupDispatchProps(p, vals[:], found[:])
			} else {
				LookupProperties(p, DispatchProps[:], vals[:], found[:])
			}
		}
	}
}
