package rocketmq

import (
	"bytes"
	"testing"
)

// FuzzLookupProperties checks the one-walk lookup against LookupProperty
// for every key, on arbitrary property bytes (duplicates, empty keys and
// values, missing separators).
func FuzzLookupProperties(f *testing.F) {
	f.Add([]byte("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02"))
	f.Add([]byte("TAGS\x01a\x02TAGS\x01b\x02\x02\x01x\x02KEYS\x01\x02"))
	f.Add([]byte("__CRC32#\x010123456789\x02"))
	f.Add([]byte{})
	keys := []string{PropTags, PropKeys, PropUniqKey, "INNER_MULTI_DISPATCH", PropCRC32}
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals := make([][]byte, len(keys))
		found := make([]bool, len(keys))
		LookupProperties(raw, keys, vals, found)
		for i, k := range keys {
			v, ok := LookupProperty(raw, k)
			if ok != found[i] || !bytes.Equal(v, vals[i]) {
				t.Fatalf("%q: LookupProperties %q %v, LookupProperty %q %v", k, vals[i], found[i], v, ok)
			}
		}
	})
}
