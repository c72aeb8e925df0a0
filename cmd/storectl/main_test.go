package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/report/schema"
)

var update = flag.Bool("update", false, "rewrite testscript files with actual output")

func TestMain(m *testing.M) {
	// Re-executed as another user by the matrix test (see runAsNobody).
	if os.Getenv("STORECTL_TEST_MAIN") == "1" {
		st := osStreams()
		st.Inject = testInjector()
		os.Exit(run(context.Background(), os.Args[1:], st))
	}
	testscript.Main(m, map[string]func(){
		"holdlock":      holdLock,
		"storectl-flip": flipByte,
		"storectl-zero": checkZero,
		"storectl-size": checkSize,
		"storectl": func() {
			os.Exit(run(context.Background(), os.Args[1:], Streams{
				In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
				IsTTY: isatty.IsTerminal(os.Stdout.Fd()), Getenv: os.Getenv,
				Inject: testInjector(),
			}))
		},
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTDATA", testutil.Testdata())
			e.Setenv("NO_COLOR", "")
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"unpack":     cmdUnpack,
			"treehash":   cmdTreeHash,
			"jsonl":      cmdJSONL,
			"jsonpath":   cmdJSONPath,
			"schema":     cmdSchema,
			"waitfile":   cmdWaitFile,
			"escmv":      cmdEscMove,
			"escwrite":   cmdEscWrite,
			"hardlink":   cmdHardLink,
			"textcheck":  cmdTextCheck,
			"textgolden": cmdTextGolden,
			"goldendir":  cmdGoldenDir,
		},
	})
}

// unpack FIXTURE DIR: untar a fixture from the repository's testdata
// (path relative to testdata/) into DIR.
func cmdUnpack(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unpack FIXTURE DIR")
	}
	if err := testutil.UntarTo(testutil.Testdata(args[0]), ts.MkAbs(args[1])); err != nil {
		ts.Fatalf("unpack: %v", err)
	}
}

// treehash DIR FILE: write "sha256 path" lines of every file under DIR to
// FILE, so a later `cmp` proves a command changed nothing.
func cmdTreeHash(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: treehash DIR FILE")
	}
	h, err := testutil.HashTree(ts.MkAbs(args[0]))
	if err != nil {
		ts.Fatalf("treehash: %v", err)
	}
	var keys []string
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", h[k], k)
	}
	if err := os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644); err != nil {
		ts.Fatalf("%v", err)
	}
}

// jsonl FILE EXIT: every line of FILE is a JSON object with the schema
// and a type, the first is `run` and the last is the `summary` whose
// exit_code is EXIT.
func cmdJSONL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonl FILE EXIT")
	}
	want, _ := strconv.Atoi(args[1])
	data := ts.ReadFile(args[0])
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var last map[string]any
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			ts.Fatalf("line %d is not JSON: %v: %s", n+1, err, sc.Text())
		}
		if m["schema"] != "storectl/v1" || m["type"] == nil {
			ts.Fatalf("line %d lacks schema/type: %s", n+1, sc.Text())
		}
		if n == 0 && m["type"] != "run" {
			ts.Fatalf("first line is %v, not run", m["type"])
		}
		last = m
		n++
	}
	if n == 0 || last["type"] != "summary" {
		ts.Fatalf("last line is not a summary (%d lines)", n)
	}
	if got := int(last["exit_code"].(float64)); got != want {
		ts.Fatalf("summary exit_code %d, want %d", got, want)
	}
}

// jsonpath FILE PATH VALUE: the JSON document in FILE has VALUE (compared
// as its JSON text) at the slash-separated PATH (numbers index arrays).
func cmdJSONPath(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonpath FILE PATH VALUE")
	}
	var v any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &v); err != nil {
		ts.Fatalf("%s is not a JSON document: %v", args[0], err)
	}
	for _, k := range strings.Split(args[1], "/") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("bad index %q", k)
			}
			v = x[i]
		default:
			ts.Fatalf("path %s: %q not found", args[1], k)
		}
	}
	got, _ := json.Marshal(v)
	if (string(got) == args[2]) == neg {
		ts.Fatalf("%s at %s is %s (want %s%s)", args[0], args[1], got, map[bool]string{true: "not "}[neg], args[2])
	}
}

// schema FILE: every JSONL line of FILE (or the single JSON document)
// validates against the storectl/v1 JSON Schemas in pkg/report/schema.
func cmdSchema(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: schema FILE")
	}
	v, err := schema.NewValidator()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	data := strings.TrimSpace(ts.ReadFile(args[0]))
	if strings.HasPrefix(data, "{\n") {
		if err := v.ValidateDocument([]byte(data)); err != nil {
			ts.Fatalf("json document: %v", err)
		}
		return
	}
	for i, l := range strings.Split(data, "\n") {
		if err := v.ValidateObject([]byte(l)); err != nil {
			ts.Fatalf("line %d: %v\n%s", i+1, err, l)
		}
	}
}

// holdLock FILE READY RELEASE: take a POSIX write lock on byte 0 of FILE
// (as RocketMQ's FileChannel.lock does), create READY, and hold the lock
// until RELEASE exists (at most 60 s). Runs as a child process.
func holdLock() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: holdlock FILE READY RELEASE")
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[1], os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		fmt.Fprintln(os.Stderr, "lock:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[2], []byte("locked\n"), 0o644); err != nil {
		os.Exit(1)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(os.Args[3]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.Close()
	os.Exit(0)
}

// unescape interprets Go escapes (\x1b, \n, \a, \u202e) in a script
// argument, so scripts can make hostile names.
func unescape(ts *testscript.TestScript, s string) string {
	u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	if err != nil {
		ts.Fatalf("unescape %q: %v", s, err)
	}
	return u
}

// escmv OLD NEW: rename OLD to NEW, Go escapes in NEW interpreted.
func cmdEscMove(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: escmv OLD NEW")
	}
	ts.Check(os.Rename(ts.MkAbs(args[0]), ts.MkAbs(unescape(ts, args[1]))))
}

// escwrite FILE TEXT: write TEXT, Go escapes interpreted, to FILE.
func cmdEscWrite(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: escwrite FILE TEXT")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(unescape(ts, args[1])), 0o644))
}

// hardlink OLD NEW: make NEW a hard link to OLD.
func cmdHardLink(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: hardlink OLD NEW")
	}
	ts.Check(os.Link(ts.MkAbs(args[0]), ts.MkAbs(args[1])))
}

// waitfile FILE: wait (at most 20 s) until FILE exists.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	p := ts.MkAbs(args[0])
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	ts.Fatalf("%s did not appear", args[0])
}

// flipByte FILE OFFSET: xor one byte with 0xFF (a child command so that
// scripts can damage fixtures).
func flipByte() {
	if len(os.Args) != 3 {
		os.Exit(2)
	}
	off, _ := strconv.ParseInt(os.Args[2], 10, 64)
	f, err := os.OpenFile(os.Args[1], os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		os.Exit(1)
	}
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b, off); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// checkZero FILE FROM TO: exit 0 when bytes [FROM, TO) of FILE are all
// zero and TO is the file size.
func checkZero() {
	if len(os.Args) != 4 {
		os.Exit(2)
	}
	from, _ := strconv.ParseInt(os.Args[2], 10, 64)
	to, _ := strconv.ParseInt(os.Args[3], 10, 64)
	b, err := os.ReadFile(os.Args[1])
	if err != nil || int64(len(b)) != to {
		fmt.Fprintf(os.Stderr, "size %d, want %d (%v)\n", len(b), to, err)
		os.Exit(1)
	}
	for i := from; i < to; i++ {
		if b[i] != 0 {
			fmt.Fprintf(os.Stderr, "byte %d is %#x\n", i, b[i])
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// checkSize FILE SIZE: exit 0 when FILE has exactly SIZE bytes.
func checkSize() {
	if len(os.Args) != 3 {
		os.Exit(2)
	}
	want, _ := strconv.ParseInt(os.Args[2], 10, 64)
	st, err := os.Stat(os.Args[1])
	if err != nil || st.Size() != want {
		fmt.Fprintf(os.Stderr, "size of %s: %v (want %d) %v\n", os.Args[1], st, want, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// testInjector is the write-fault hook of the test binary, from the
// environment: STORECTL_TEST_FAIL_WRITE=N fails step N (ErrInjected),
// STORECTL_TEST_KILL_AT=N kills the process with SIGKILL at step N (a
// crash: nothing after it runs), STORECTL_TEST_DISK_FULL_AT=N fails every
// allocating step from N on with ENOSPC, rollback included.
func testInjector() repair.Injector {
	if n, err := strconv.Atoi(os.Getenv("STORECTL_TEST_FAIL_WRITE")); err == nil {
		return repair.FailAt(n)
	}
	if n, err := strconv.Atoi(os.Getenv("STORECTL_TEST_KILL_AT")); err == nil {
		return killAt(n)
	}
	if n, err := strconv.Atoi(os.Getenv("STORECTL_TEST_DISK_FULL_AT")); err == nil {
		return repair.DiskFullAt(n)
	}
	if d, err := time.ParseDuration(os.Getenv("STORECTL_TEST_PAUSE")); err == nil {
		return pauseAt(d)
	}
	if p := os.Getenv("STORECTL_TEST_PAUSE_UNTIL"); p != "" {
		return pauseUntil(p)
	}
	return nil
}

// pauseUntil waits at the first step until the file exists: a writer that
// holds the data dir until the test lets it go, however slow the host.
type pauseUntil string

func (p pauseUntil) Inject(step int, what string) error {
	for step == 1 {
		if _, err := os.Stat(string(p)); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// pauseAt sleeps that long at the first step: a writer that holds the
// data dir long enough for a second one to meet it.
type pauseAt time.Duration

func (d pauseAt) Inject(step int, what string) error {
	if step == 1 {
		time.Sleep(time.Duration(d))
	}
	return nil
}

// killAt kills this process at step n, before the step runs.
type killAt int

func (n killAt) Inject(step int, what string) error {
	if step == int(n) {
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		select {} // never returns: the kernel ends the process
	}
	return nil
}
