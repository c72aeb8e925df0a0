package schema

import "testing"

func TestSchemasRejectBrokenObjects(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		`{"schema":"storectl/v1","type":"finding","code":"x","severity":"error","path":"a","offset":0,"length":0,"repair":"none","message":"m"}`,
		`{"schema":"storectl/v1","type":"finding","code":"rocketmq.commitlog.stale-record","severity":"fatal","path":"a","offset":0,"length":0,"repair":"none","message":"m"}`,
		`{"schema":"storectl/v1","type":"finding","code":"rocketmq.commitlog.stale-record","severity":"error","path":"a","offset":"12","length":0,"repair":"none","message":"m"}`,
		`{"schema":"storectl/v1","type":"summary","exit_code":9,"incomplete":false,"counts":{"error":0,"warning":0,"info":0},"codes":{},"bytes_scanned":0,"duration_ms":0}`,
		`{"schema":"storectl/v1","type":"file","path":"a","size":1,"records":0,"valid_end":0,"end":"weird"}`,
		`{"schema":"storectl/v1","type":"record","path":"a","offset":0,"size":1,"msg_id":"XYZ","referenced_by":[]}`,
		`{"schema":"storectl/v2","type":"run","tool":"storectl","version":"x","command":"scan","data_dir":"/","store":"rocketmq","live":false}`,
		`{"schema":"storectl/v1","type":"nonsense"}`,
	}
	for _, b := range bad {
		if err := v.ValidateObject([]byte(b)); err == nil {
			t.Errorf("schema accepted %s", b)
		}
	}
}
