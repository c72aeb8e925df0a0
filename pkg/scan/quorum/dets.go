package quorum

import (
	"bytes"
	"encoding/binary"

	"github.com/storectl/storectl/pkg/format/etf"
	"github.com/storectl/storectl/pkg/format/ra"
)

// MetaDETS is what ra_log_meta keeps per UId in meta.dets: {UId,
// CurrentTerm, VotedFor, LastApplied}.
type MetaDETS struct {
	CurrentTerm int64
	VotedFor    string
	LastApplied int64
}

// detsActive is the status word DETS writes before a live object.
var detsActive = []byte{0x12, 0x34, 0x56, 0x78}

// ParseMetaDETS finds the live objects of a meta.dets file: DETS keeps
// each as Size:32, Status:32 (0x12345678 when in use), then the
// term_to_binary of the object. This reads only objects of the ra_log_meta
// shape; the DETS hash structure itself is not interpreted, so a UId
// with two live objects (which DETS never leaves) would keep the last.
func ParseMetaDETS(b []byte) map[string]MetaDETS {
	out := map[string]MetaDETS{}
	for i := 0; i+12 < len(b); {
		j := bytes.Index(b[i:], detsActive)
		if j < 0 {
			break
		}
		p := i + j + 4
		i = p
		if p+4 > len(b) {
			break
		}
		n := int(binary.BigEndian.Uint32(b[p:]))
		if n <= 0 || p+4+n > len(b) {
			continue
		}
		t, err := etf.DecodeExactTerm(b[p+4 : p+4+n])
		if err != nil {
			continue
		}
		tup, ok := t.(etf.Tuple)
		if !ok || len(tup) != 4 {
			continue
		}
		uid, ok := tup[0].(etf.Binary)
		if !ok {
			continue
		}
		m := MetaDETS{CurrentTerm: -1, LastApplied: -1}
		m.CurrentTerm, _ = tup[1].(int64)
		if id, ok := ra.ServerIDFromTerm(tup[2]); ok {
			m.VotedFor = id.String()
		}
		if la, ok := tup[3].(int64); ok {
			m.LastApplied = la
		}
		out[string(uid)] = m
	}
	return out
}
