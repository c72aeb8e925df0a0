package scan

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestMsgIDsJSON: a list of ids encodes exactly as the list of their hex
// strings does, nil as null, and inside a queue empty lists are omitted.
func TestMsgIDsJSON(t *testing.T) {
	var ids MsgIDs
	for i := range 5 {
		var id [16]byte
		for j := range id {
			id[j] = byte(i*17 + j*29)
		}
		ids = append(ids, id)
	}
	for _, c := range []MsgIDs{ids, ids[:1], {}} {
		got, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(c.Strings()); string(got) != string(want) {
			t.Errorf("got %s, want %s", got, want)
		}
		b, _ := json.Marshal(Queue{DropMsgIDs: c, AtRiskMsgIDs: map[string]MsgIDs{"3.10.0-3.13.0": c}})
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		_, has := m["drop_msg_ids"]
		if has != (len(c) > 0) {
			t.Errorf("%d ids: drop_msg_ids present %v", len(c), has)
		}
		if len(c) > 0 {
			var back []string
			for _, x := range m["drop_msg_ids"].([]any) {
				back = append(back, x.(string))
			}
			if !reflect.DeepEqual(back, c.Strings()) {
				t.Errorf("queue drop_msg_ids %v, want %v", back, c.Strings())
			}
		}
	}
	if got, _ := json.Marshal(MsgIDs(nil)); string(got) != "null" {
		t.Errorf("nil: %s", got)
	}
}
