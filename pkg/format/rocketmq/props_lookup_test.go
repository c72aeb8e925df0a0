package rocketmq

import (
	"bytes"
	"slices"
	"strings"
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
	f.Add([]byte("K\x01X\x01v\x02T\x01\x01\x02"))
	// The empty key and one holding 0x01 are no segment's key.
	keys := []string{PropTags, PropKeys, PropUniqKey, "INNER_MULTI_DISPATCH", PropCRC32, "", "K\x01X", "T"}
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

// FuzzForEachIndexKey checks the allocation-free key walk against the
// keys IndexService.buildIndex takes, written the Java way: nothing for
// ROLLBACK, else UNIQ_KEY, then KEYS.split(" ") without empty tokens.
func FuzzForEachIndexKey(f *testing.F) {
	f.Add([]byte("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02"), int32(0))
	f.Add([]byte("KEYS\x01 a  b \x02KEYS\x01c  d\x02"), int32(0))
	f.Add([]byte("KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02"), TxRollback)
	f.Add([]byte("UNIQ_KEY\x01u\x02KEYS\x01\x02"), TxCommit)
	f.Fuzz(func(t *testing.T, raw []byte, sysFlag int32) {
		m := Message{Properties: raw, SysFlag: sysFlag}
		var vals [len(DispatchProps)][]byte
		var found [len(DispatchProps)]bool
		LookupProperties(raw, DispatchProps[:], vals[:], found[:])
		var got []string
		ForEachIndexKey(&m, vals[:], found[:], func(k []byte) { got = append(got, string(k)) })
		var want []string
		if sysFlag&FlagTransactionMask != TxRollback {
			p := ParseProperties(raw)
			if u, ok := p[PropUniqKey]; ok {
				want = append(want, u)
			}
			for _, k := range strings.Split(p[PropKeys], " ") {
				if k != "" {
					want = append(want, k)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ForEachIndexKey %q, want %q", got, want)
		}
	})
}

// FuzzDispatchTagsCode checks the tags code from a DispatchProps lookup
// against TagsCode, for the schedule topic (DELAY levels) and any other.
func FuzzDispatchTagsCode(f *testing.F) {
	f.Add([]byte("TAGS\x01TagA\x02KEYS\x01k\x02"), false, int64(1700000000000))
	f.Add([]byte("TAGS\x01TagA\x02DELAY\x013\x02"), true, int64(1700000000000))
	f.Add([]byte("DELAY\x0199\x02"), true, int64(5))
	f.Add([]byte("TAGS\x01\x02"), false, int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, schedule bool, storeTS int64) {
		m := Message{Properties: raw, Topic: []byte("TopicTest"), StoreTimestamp: storeTS}
		if schedule {
			m.Topic = []byte(ScheduleTopic)
		}
		var vals [len(DispatchProps)][]byte
		var found [len(DispatchProps)]bool
		LookupProperties(raw, DispatchProps[:], vals[:], found[:])
		if got, want := DispatchTagsCode(&m, vals[:], found[:]), m.TagsCode(); got != want {
			t.Fatalf("DispatchTagsCode %d, TagsCode %d", got, want)
		}
	})
}

// FuzzLookupDispatchProps checks the first-byte dispatch lookup against
// LookupProperties for the four dispatch keys, on arbitrary property
// bytes (keys cut short, duplicates, empty values, near-miss keys).
func FuzzLookupDispatchProps(f *testing.F) {
	f.Add([]byte("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02INNER_MULTI_DISPATCH\x01%LMQ%a,%LMQ%b\x02"))
	f.Add([]byte("TAGS\x01a\x02TAGS\x01b\x02\x02\x01x\x02KEYS\x01\x02TAGS\x01\x02"))
	f.Add([]byte("TAGX\x01a\x02KEYSS\x01b\x02UNIQ_KEY\x01\x02INNER_MULTI_DISPATC\x01c\x02INNER_MULTI_DISPATCH\x01"))
	f.Add([]byte("T\x01\x02K\x01v\x02UNIQ_KEY\x01\x01\x02TAGS\x01\x01\x01\x02KEYS"))
	f.Add([]byte{})
	// Longer than one 64-byte mask: a segment across the boundary, a
	// separator as byte 63 and 64, a string of exactly 64 and 128 bytes.
	f.Add([]byte("UNIQ_KEY\x017F0000010001000000000000000000000000000000\x02KEYS\x01order-1 order-2 order-3\x02TAGS\x01tagA\x02WAIT\x01true\x02"))
	f.Add([]byte("KEYS\x01" + strings.Repeat("k", 57) + "\x02\x02TAGS\x01t\x02"))
	f.Add([]byte("TAGS\x01" + strings.Repeat("v", 58)))
	f.Add([]byte("KEYS\x01" + strings.Repeat("w", 121) + "\x02"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var wv, gv [len(DispatchProps)][]byte
		var wf, gf [len(DispatchProps)]bool
		LookupProperties(raw, DispatchProps[:], wv[:], wf[:])
		gf = [len(DispatchProps)]bool{true, true, true, true} // must be cleared
		LookupDispatchProps(raw, gv[:], gf[:])
		for k := range DispatchProps {
			if wf[k] != gf[k] || (wf[k] && !bytes.Equal(wv[k], gv[k])) || (wf[k] && len(wv[k]) > 0 && &wv[k][0] != &gv[k][0]) {
				t.Fatalf("%q: key %s: LookupProperties %v %q, LookupDispatchProps %v %q", raw, DispatchProps[k], wf[k], wv[k], gf[k], gv[k])
			}
		}
	})
}
