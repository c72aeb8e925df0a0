package testutil

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Rabbit is a private Debian rabbitmq-server node a test started on a
// data dir (RequireRabbitMQ first): its own epmd, ports and HOME on
// 127.0.0.1.
type Rabbit struct {
	URL  string
	Node string
	Log  string // the node's log file
	env  []string
	srv  *exec.Cmd
	done chan struct{}
	epmd int
}

// FreeTCPPort returns a TCP port that was free on 127.0.0.1 a moment ago,
// for a broker a test is about to start. It is drawn from 20000-32767,
// below Linux's default ephemeral range (32768-60999): a port the kernel
// handed out for ":0" lies in that range, and the outgoing connections of
// other tests running meanwhile (rabbitmqctl to epmd and the node, AMQP
// clients) take their local ports from the same range, so one of them
// could hold it by the time the broker binds (seen: could_not_start_listener
// on such a port). Below the range only another listener can take it.
func FreeTCPPort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(12768)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatal("no free TCP port on 127.0.0.1 in 20000-32767 after 200 tries")
	return 0
}

// StartRabbitOn starts node (the name the data was written under, e.g.
// rmq310@localhost) on the node dir mnesiaDir and waits until it is up.
// The node is stopped when the test ends.
func StartRabbitOn(t testing.TB, mnesiaDir, node string) *Rabbit {
	t.Helper()
	RequireRabbitMQ(t)
	base := t.TempDir()
	amqp, dist, epmd := FreeTCPPort(t), FreeTCPPort(t), FreeTCPPort(t)
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(base, p), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("rabbitmq.conf", fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\nlog.console = false\nlog.file.level = info\n", amqp))
	write("enabled_plugins", "[].\n")
	write("rabbitmq-env.conf", "")
	if err := os.MkdirAll(filepath.Join(base, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("home/.erlang.cookie", "STORECTLTESTCOOKIE")
	r := &Rabbit{URL: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", amqp), Node: node, epmd: epmd,
		Log: filepath.Join(base, "log", node+".log"), done: make(chan struct{})}
	r.env = append(os.Environ(),
		"HOME="+filepath.Join(base, "home"),
		"RABBITMQ_NODENAME="+node,
		"RABBITMQ_MNESIA_BASE="+filepath.Dir(mnesiaDir),
		"RABBITMQ_MNESIA_DIR="+mnesiaDir,
		"RABBITMQ_LOG_BASE="+filepath.Join(base, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(base, "rabbitmq.conf"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(base, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(base, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+filepath.Join(base, "node.pid"),
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(amqp),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"ERL_EPMD_PORT="+strconv.Itoa(epmd),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	)
	var out bytes.Buffer
	r.srv = exec.Command(filepath.Join(RabbitMQLib, "bin", "rabbitmq-server"))
	r.srv.Env, r.srv.Stdout, r.srv.Stderr = r.env, &out, &out
	r.srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.srv.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.srv.Wait(); close(r.done) }()
	t.Cleanup(func() { r.Stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := r.Ctl(15*time.Second, "await_startup", "--timeout", "10"); err == nil {
			return r
		}
		select {
		case <-r.done:
			t.Fatalf("rabbitmq-server exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not start within 60 s:\n%s", out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Ctl runs rabbitmqctl against the node.
func (r *Rabbit) Ctl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(RabbitMQLib, "bin", "rabbitmqctl"), append([]string{"-n", r.Node}, args...)...)
	c.Env = r.env
	b, err := c.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("rabbitmqctl %v: %v\n%s", args, err, b)
	}
	return string(b), nil
}

// QuorumMessages polls list_queues until every quorum queue is running
// and their message counts (metrics the queues refresh on a timer) have
// held still for two polls a second apart, at least settle after the
// queues ran, and returns queue -> messages.
func (r *Rabbit) QuorumMessages(t testing.TB, settle time.Duration) map[string]int {
	t.Helper()
	// A quorum queue's message count is a metric its leader publishes on
	// rabbit_quorum_queue's tick (quorum_tick_interval, 5 s by default):
	// until the first tick after the election, list_queues says 0 and
	// holds it still. Two ticks after every queue ran, the counts are the
	// replayed state's (CI saw 0 for both queues of R3 at 3 s).
	if min := 11 * time.Second; settle < min {
		settle = min
	}
	var running time.Time
	var last string
	m := map[string]int{}
	for i := 0; i < 90; i++ {
		out, err := r.Ctl(30*time.Second, "list_queues", "name", "type", "messages", "state", "--no-table-headers", "--quiet")
		if err != nil {
			// rabbitmqctl exits 69 (unavailable) now and then on a loaded
			// host while the node is up; a node that is gone ends the poll.
			select {
			case <-r.done:
				t.Fatal(err)
			default:
			}
			if i == 89 {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			continue
		}
		all := true
		cur := map[string]int{}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 4 && f[1] == "quorum" {
				n, _ := strconv.Atoi(f[2])
				cur[f[0]] = n
				all = all && f[3] == "running"
			}
		}
		if all && running.IsZero() {
			running = time.Now()
		}
		if all && out == last && time.Since(running) >= settle {
			return cur
		}
		last, m = out, cur
		time.Sleep(time.Second)
	}
	return m
}

// Stop stops the node and its epmd (idempotent).
func (r *Rabbit) Stop(t testing.TB) {
	select {
	case <-r.done:
	default:
		_, _ = r.Ctl(30*time.Second, "stop")
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-r.srv.Process.Pid, syscall.SIGKILL) // our own process group
			<-r.done
		}
	}
	if r.epmd != 0 {
		_ = exec.Command("epmd", "-port", strconv.Itoa(r.epmd), "-kill").Run()
		r.epmd = 0
	}
}
