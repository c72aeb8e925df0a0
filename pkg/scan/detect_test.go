package scan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

func TestDetectFixtures(t *testing.T) {
	rmq := testutil.Untar(t, testutil.Testdata("rocketmq", "rmq533-a-clean.tar.gz"))
	rabbit := testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", "crash.tar.gz"))
	node := filepath.Join(rabbit, "rmqfix@localhost")
	vhost := filepath.Join(node, "msg_stores", "vhosts", "628WB79CIFDYO9LJI6DKMI09L")
	cases := []struct {
		path, store, kind, root string
	}{
		{filepath.Join(rmq, "store"), RocketMQ, TargetRocketStore, filepath.Join(rmq, "store")},
		{filepath.Join(rmq, "store", "commitlog"), RocketMQ, TargetRocketLogDir, filepath.Join(rmq, "store")},
		{filepath.Join(rmq, "store", "commitlog", "00000000000000000000"), RocketMQ, TargetRocketLogFile, filepath.Join(rmq, "store")},
		{node, RabbitMQ, TargetRabbitNode, node},
		{rabbit, RabbitMQ, TargetRabbitNode, node},
		{vhost, RabbitMQ, TargetRabbitVHost, vhost},
		{filepath.Join(vhost, "msg_store_persistent"), RabbitMQ, TargetRabbitStoreDir, vhost},
		{filepath.Join(vhost, "msg_store_persistent", "40.rdq"), RabbitMQ, TargetRabbitRDQFile, vhost},
	}
	for _, c := range cases {
		got, err := Detect(c.path, "")
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got.Store != c.store || got.Kind != c.kind || got.Root != c.root || len(got.Evidence) == 0 {
			t.Errorf("%s: got %+v, want %s %s root %s", c.path, got, c.store, c.kind, c.root)
		}
	}
	if _, err := Detect(filepath.Join(rmq, "store"), RabbitMQ); !errors.Is(err, ErrNotStore) {
		t.Fatalf("--store rabbitmq on a RocketMQ store: %v", err)
	}
	empty := t.TempDir()
	if _, err := Detect(empty, ""); !errors.Is(err, ErrNotStore) {
		t.Fatalf("empty dir: %v", err)
	}
	if _, err := Detect(filepath.Join(empty, "nope"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing path: %v", err)
	}
	if got := Rel("/a/b", "/a/b/c/d"); got != "c/d" {
		t.Fatalf("Rel = %q", got)
	}
}

// TestDetectNotFileOrDir: a FIFO given as the path is refused at once
// (no open, so no block) with what it is; the error still wraps
// ErrNotStore, which the CLI turns into exit 2.
func TestDetectNotFileOrDir(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000000") // a commitlog file's name
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Detect(p, ""); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "is a named pipe (FIFO), not a store file or directory") {
			t.Fatalf("Detect(FIFO) = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Detect blocked on a FIFO")
	}
}
