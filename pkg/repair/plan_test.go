package repair

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

// TestPlanJSONRoundTrip saves a plan, loads it, checks the JSON shape and
// applies the loaded plan.
func TestPlanJSONRoundTrip(t *testing.T) {
	c := opCases[len(opCases)-1] // several files, dirs and ops
	data := makeTree(t)
	p := buildPlan(t, data, c, SnapshotOptions{})
	p.Actions[0].Lost = Loss{Records: 2, MsgIDs: []string{"id1", "id2"}, Note: "torn tail"}
	p.Actions[0].Reason = "rocketmq.commitlog.torn-tail"
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != PlanSchema || doc["data_dir"] != data {
		t.Fatalf("schema/data_dir: %v %v", doc["schema"], doc["data_dir"])
	}
	acts := doc["actions"].([]any)
	if got := acts[1].(map[string]any)["data"]; got != "eHl6" { // base64("xyz")
		t.Fatalf("inline data is %v, want base64", got)
	}
	a0 := acts[0].(map[string]any)
	pre := a0["pre"].(map[string]any)
	if pre["sha256"] == "" || len(pre["ranges"].([]any)) != 1 || a0["lost"].(map[string]any)["msg_ids"] == nil {
		t.Fatalf("action 0 JSON lacks precondition or loss: %s", raw)
	}

	q, err := LoadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := q.Write(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, again.Bytes()) {
		t.Fatalf("round trip differs:\n%s\n---\n%s", raw, again.Bytes())
	}
	want := readTree(t, data)
	c.want(want)
	if _, err := Apply(context.Background(), q, ApplyOptions{BackupDir: backupDir(data)}); err != nil {
		t.Fatal(err)
	}
	testutil.SameTree(t, hashContent(want), testutil.TreeHash(t, data))
}

func TestReadPlanRejects(t *testing.T) {
	for _, doc := range []string{
		`{"schema":"storectl.plan/v0","data_dir":"/x","actions":[]}`,
		`{"schema":"storectl.plan/v1","data_dir":"rel","actions":[]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[],"surprise":1}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"zero-range","path":"f","offset":0,"length":4,"pre":{"exists":true,"size":10}}]}`,
		// absent_dirs that are not the innermost parents, on an op that creates nothing, or that two actions disagree on
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"replace-file","path":"d/e/f","new_size":1,"data":"eA==","pre":{"exists":false,"absent_dirs":["d"]}}]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"replace-file","path":"d/f","new_size":1,"data":"eA==","pre":{"exists":false,"absent_dirs":["../d"]}}]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"remove-file","path":"d/f","pre":{"exists":true,"absent_dirs":["d"]}}]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"replace-file","path":"d/f","new_size":1,"data":"eA==","pre":{"exists":false,"absent_dirs":["d"]}},{"id":"b","op":"replace-file","path":"d/g","new_size":1,"data":"eA==","pre":{"exists":false}}]}`,
		// remove-dir of the data dir, with a size, or with a write inside it
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"remove-dir","path":".","pre":{"exists":true}}]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"remove-dir","path":"d","pre":{"exists":true,"size":3}}]}`,
		`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"remove-dir","path":"d","pre":{"exists":true}},{"id":"b","op":"truncate-file","path":"d/f","new_size":0,"pre":{"exists":true,"size":1,"ranges":[{"offset":0,"length":1,"sha256":"ab"}]}}]}`,
	} {
		if _, err := ReadPlan(strings.NewReader(doc)); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s: err %v, want ErrInvalidPlan", doc, err)
		}
	}
}

// FuzzReadPlan: any input gives a valid plan or an error, never a panic,
// and an accepted plan survives a write/read round trip.
func FuzzReadPlan(f *testing.F) {
	f.Add([]byte(`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[]}`))
	f.Add([]byte(`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"zero-range","path":"f","offset":9223372036854775807,"length":9223372036854775807,"pre":{"exists":true,"size":10,"ranges":[{"offset":0,"length":4,"sha256":"ab"}]}}]}`))
	f.Add([]byte(`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"resize-file","path":"f","new_size":5,"pre":{"exists":true,"size":10,"ranges":[{"offset":5,"length":5,"sha256":"ab"}]}},{"id":"b","op":"write-range","path":"f","offset":0,"length":2,"data":"eHk=","pre":{"exists":true,"size":10,"ranges":[{"offset":0,"length":2,"sha256":"cd"}]}}]}`))
	f.Add([]byte(`{"schema":"storectl.plan/v1","data_dir":"/x","actions":[{"id":"a","op":"replace-file","path":"d/e/f","new_size":1,"data":"eA==","pre":{"exists":false,"absent_dirs":["d","d/e"]}},{"id":"b","op":"remove-file","path":"q/f","pre":{"exists":true,"size":0}},{"id":"c","op":"remove-dir","path":"q","pre":{"exists":true}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadPlan(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrInvalidPlan) {
				t.Fatalf("error does not wrap ErrInvalidPlan: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := p.Write(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPlan(&buf); err != nil {
			t.Fatalf("accepted plan does not round trip: %v", err)
		}
		_ = p.LostBytes()
	})
}

func TestRemoveStage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stage")
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := dir
	if err := RemoveStage(&d); err != nil || d != "" {
		t.Fatalf("RemoveStage: %v, dir %q", err, d)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("stage still there: %v", err)
	}
	if err := RemoveStage(&d); err != nil {
		t.Fatal(err)
	}
}
