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
			seg := raw[start:end]
			start = end + 1
			if len(seg) < 3 { // a key, 0x01 and a value at the least
				continue
			}
			var k, n int
			switch seg[0] {
			case 'T':
				if len(seg) < 6 || seg[4] != NameValueSeparator || string(seg[:4]) != PropTags {
					continue
				}
				k, n = DispatchTags, 4
			case 'K':
				if len(seg) < 6 || seg[4] != NameValueSeparator || string(seg[:4]) != PropKeys {
					continue
				}
				k, n = DispatchKeys, 4
			case 'U':
				if len(seg) < 10 || seg[8] != NameValueSeparator || string(seg[:8]) != PropUniqKey {
					continue
				}
				k, n = DispatchUniq, 8
			case 'I':
				if len(seg) < 22 || seg[20] != NameValueSeparator || string(seg[:20]) != PropInnerMultiDispatch {
					continue
				}
				k, n = DispatchMulti, 20
			default:
				continue
			}
			vals[k], found[k] = seg[n+1:], true
		}
	}
}
