// Command storectl inspects and repairs RocketMQ and RabbitMQ store files
// offline. See README.md and docs/cli.md for the contract that
// scripts rely on (commands, exit codes, JSONL schema).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/mattn/go-isatty"
	"golang.org/x/term"

	"github.com/storectl/storectl/internal/memlimit"
	"github.com/storectl/storectl/pkg/report"
)

// Exit codes: the contract in docs/cli.md, listed in --help.
// Precedence when several hold: 2 > 4 > 5 > 3 > 1 > 0.
const (
	exitOK          = 0
	exitFindings    = 1 // findings at or above --fail-on; a dry run with actions
	exitUsage       = 2 // bad flag, unknown layout, path missing
	exitIncomplete  = 3 // an I/O or internal error stopped part of the work
	exitRefused     = 4 // live broker, stale plan, --apply without --yes off a TTY
	exitApplyFailed = 5 // apply failed part-way (rolled back)
	exitInterrupted = 130
)

func main() {
	memlimit.Start(os.Getenv)
	stopProfiles := startProfiles(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], osStreams())
	stop()
	stopProfiles()
	os.Exit(code)
}

// osStreams are the process's streams: which are terminals, and the
// terminal's width.
func osStreams() Streams {
	width := 0
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
		width = w
	}
	return Streams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		IsTTY:  isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd()),
		InTTY:  isatty.IsTerminal(os.Stdin.Fd()),
		ErrTTY: isatty.IsTerminal(os.Stderr.Fd()),
		Width:  width,
		Getenv: os.Getenv,
	}
}

// run is main without the process: tests call it with buffers.
func run(ctx context.Context, args []string, s Streams) int {
	env := newEnv(s)
	env.args = args
	root := newRootCmd(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && exitCode(err) == exitIncomplete {
		// cobra's own "unknown command" (and any other error its lookup
		// of the command line gives) is usage, not an incomplete run.
		if _, _, ferr := root.Find(args); ferr != nil {
			err = usagef(errors.New(strings.Join(strings.Fields(err.Error()), " ")))
		}
	}
	code := exitCode(err)
	if ctx.Err() != nil && code != exitOK {
		code = exitInterrupted
	}
	if err != nil && !errors.Is(err, errFindings) {
		fmt.Fprintf(s.ErrOut, "storectl: %s\n", report.Escape(err.Error()))
		if code == exitUsage {
			fmt.Fprintln(s.ErrOut, "Run 'storectl --help' for usage.")
		}
	}
	env.finishAfterError(args, code, err)
	return code
}
