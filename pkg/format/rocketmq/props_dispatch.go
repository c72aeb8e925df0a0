package rocketmq

import (
	"math/bits"

	"github.com/storectl/storectl/internal/bytemask"
)

// LookupDispatchProps is LookupProperties(raw, DispatchProps[:], vals,
// found) (len(vals) and len(found) at least len(DispatchProps)): the four
// keys start with four different bytes (T, I, U, K), so a segment's first
// byte picks the one key it can be and costs one comparison with a
// constant, not one per key; none of the keys holds a 0x01, so no segment
// needs LookupProperties' check for one (FuzzLookupDispatchProps keeps the
// two equal). Verify's collector runs it once per record.
func LookupDispatchProps(raw []byte, vals [][]byte, found []bool) {
	_, _ = vals[DispatchKeys], found[DispatchKeys]
	found[DispatchTags], found[DispatchMulti], found[DispatchUniq], found[DispatchKeys] = false, false, false, false
	// The separators come 64 bytes at a time as a bit mask (bytemask), not
	// from a search per segment: a broker's property string of 100-200
	// bytes is two to four masks, where indexPropSep took a loop per
	// segment.
	start := 0
	for base := 0; base <= len(raw); base += 64 {
		m := bytemask.Eq(raw[base:], PropertySeparator)
		if len(raw)-base < 64 {
			m |= 1 << (len(raw) - base) // the end of raw ends the last segment
		}
		for ; m != 0; m &= m - 1 {
			end := base + bits.TrailingZeros64(m)
			at := start
			start = end + 1
			// A key, 0x01 and a value at the least; the segment's first byte
			// picks the key before a slice of it is made (most are no key's).
			if end-at < 3 {
				continue
			}
			switch raw[at] {
			case 'T':
				if seg := raw[at:end]; len(seg) >= 6 && seg[4] == NameValueSeparator && string(seg[:4]) == PropTags {
					vals[DispatchTags], found[DispatchTags] = seg[5:], true
				}
			case 'K':
				if seg := raw[at:end]; len(seg) >= 6 && seg[4] == NameValueSeparator && string(seg[:4]) == PropKeys {
					vals[DispatchKeys], found[DispatchKeys] = seg[5:], true
				}
			case 'U':
				if seg := raw[at:end]; len(seg) >= 10 && seg[8] == NameValueSeparator && string(seg[:8]) == PropUniqKey {
					vals[DispatchUniq], found[DispatchUniq] = seg[9:], true
				}
			case 'I':
				if seg := raw[at:end]; len(seg) >= 22 && seg[20] == NameValueSeparator && string(seg[:20]) == PropInnerMultiDispatch {
					vals[DispatchMulti], found[DispatchMulti] = seg[21:], true
				}
			}
		}
	}
}
