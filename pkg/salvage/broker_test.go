package salvage

// A real RabbitMQ broker for the publish test: Debian's rabbitmq-server,
// run as a private node on 127.0.0.1 (own mnesia/log/config dirs, free
// AMQP, distribution and epmd ports), stopped by t.Cleanup.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/storectl/storectl/internal/testutil"
)

const (
	rabbitWrapper = "/usr/sbin/rabbitmq-server"
	rabbitBin     = "/usr/lib/rabbitmq/bin"
)

// startBroker starts a private RabbitMQ node and returns its AMQP URL.
func startBroker(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(rabbitWrapper); err != nil {
		testutil.RequireReal(t, "rabbitmq-server is not installed ("+rabbitWrapper+" missing): the publish integration test needs it")
	}
	base := t.TempDir()
	amqpPort, distPort, epmdPort := testutil.FreeTCPPort(t), testutil.FreeTCPPort(t), testutil.FreeTCPPort(t)
	node := fmt.Sprintf("storectl%d_%d@localhost", os.Getpid(), amqpPort)
	conf := filepath.Join(base, "rabbitmq.conf")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\nlog.console = false\nlog.file.level = info\n", amqpPort))
	write(filepath.Join(base, "enabled_plugins"), "[].\n")
	write(filepath.Join(base, "rabbitmq-env.conf"), "")
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"HOME="+home,
		"RABBITMQ_NODENAME="+node,
		"RABBITMQ_MNESIA_BASE="+filepath.Join(base, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(base, "log"),
		"RABBITMQ_CONFIG_FILE="+conf,
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(base, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(base, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+filepath.Join(base, "node.pid"),
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	)
	var out bytes.Buffer
	srv := exec.Command(filepath.Join(rabbitBin, "rabbitmq-server"))
	srv.Env, srv.Stdout, srv.Stderr = env, &out, &out
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { srv.Wait(); close(waited) }()
	ctl := func(timeout time.Duration, args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		c := exec.CommandContext(ctx, filepath.Join(rabbitBin, "rabbitmqctl"), append([]string{"-n", node}, args...)...)
		c.Env = env
		b, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("rabbitmqctl %v: %v\n%s", args, err, b)
		}
		return nil
	}
	t.Cleanup(func() {
		_ = ctl(20*time.Second, "stop")
		select {
		case <-waited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL) // our own process group only
			<-waited
		}
		// the private epmd started for this node
		if b, err := exec.Command("epmd", "-port", strconv.Itoa(epmdPort), "-kill").CombinedOutput(); err != nil {
			t.Logf("epmd -kill: %v %s", err, b)
		}
	})
	// await_startup gives up at once while the node is not yet registered
	// with epmd: poll it until the node is up (bounded).
	deadline := time.Now().Add(50 * time.Second)
	for {
		err := ctl(15*time.Second, "await_startup", "--timeout", "10")
		if err == nil {
			break
		}
		select {
		case <-waited:
			logs, _ := filepath.Glob(filepath.Join(base, "log", "*.log"))
			t.Fatalf("rabbitmq-server exited: %v\noutput:\n%s\nlogs: %v", err, out.String(), logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not start within 50 s: %v\nserver output:\n%s", err, out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", amqpPort)
}
