package rabbitmq

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"
)

// TestVictimsJSON: the hand-written encoder gives exactly what
// encoding/json gives for the schema's victim object, for every status
// and extreme offsets and sizes, and null for a nil list.
func TestVictimsJSON(t *testing.T) {
	type plain struct {
		MsgID  string `json:"msg_id"`
		Offset int64  `json:"offset"`
		Size   int64  `json:"size"`
		Status string `json:"status"`
	}
	var vs Victims
	var want []plain
	for i, st := range []string{StatusReferenced, StatusUnreferenced, StatusDuplicate, StatusUnknown, `odd"\status`} {
		var id [16]byte
		for j := range id {
			id[j] = byte(i*31 + j*7)
		}
		off := []int64{0, 1, math.MaxInt64, math.MinInt64, 123456789}[i]
		vs = append(vs, Victim{ID: id, Offset: off, Size: int64(i) * 1000, Status: st})
		want = append(want, plain{hex.EncodeToString(id[:]), off, int64(i) * 1000, st})
	}
	got, err := json.Marshal(map[string]any{"victims": vs})
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := json.Marshal(map[string]any{"victims": want})
	if string(got) != string(exp) {
		t.Errorf("got  %s\nwant %s", got, exp)
	}
	if got, _ := json.Marshal(Victims(nil)); string(got) != "null" {
		t.Errorf("nil list: %s", got)
	}
	if vs[2].MsgID() != want[2].MsgID {
		t.Errorf("MsgID %s, want %s", vs[2].MsgID(), want[2].MsgID)
	}
}
