package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/repair"
	"github.com/storectl/storectl/pkg/report"
)

// Streams are the process's standard streams and environment, injected
// so that tests can run commands with buffers.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	IsTTY  bool // stdout is a terminal (color)
	Width  int  // the terminal's columns when stdout is one (0: unknown)
	InTTY  bool // stdin is a terminal (prompts)
	ErrTTY bool // stderr is a terminal (progress bar)
	Getenv func(string) string
	// Inject, set only by tests, fails (or kills the process at) chosen
	// write steps of --apply and undo --apply; main never sets it.
	Inject repair.Injector
}

// Env is what every command shares: streams, the viper instance and the
// report session of the command being run.
type Env struct {
	Streams Streams
	Config  *viper.Viper
	// session is the report of the running command, once it started one.
	session *session
	// cmd is the command being run (set before it runs).
	cmd *cobra.Command
	// metricsDone: this run's --metrics-file was written (writeMetrics).
	metricsDone bool
	// args are the command line (run's), for what flag parsing may miss.
	args []string
}

// faults are the write faults this run injects: none unless a test set
// Streams.Inject.
func (e *Env) faults() repair.Faults { return repair.Faults{Injector: e.Streams.Inject} }

func newEnv(s Streams) *Env {
	if s.Getenv == nil {
		s.Getenv = func(string) string { return "" }
	}
	if s.In == nil {
		s.In = strings.NewReader("")
	}
	return &Env{Streams: s, Config: viper.New()}
}

// cliOnly are flags that must never come from env or a config file
// (docs/cli.md: --apply, --yes, --plan and --force).
var cliOnly = map[string]bool{"apply": true, "yes": true, "plan": true, "force": true}

// bindConfig wires flag > STORECTL_* env > config file > default.
func (e *Env) bindConfig(cmd *cobra.Command) error {
	v := e.Config
	v.SetEnvPrefix("STORECTL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	var bindErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if cliOnly[f.Name] || bindErr != nil {
			return
		}
		bindErr = v.BindPFlag(f.Name, f)
	})
	if bindErr != nil {
		return bindErr
	}
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		path = e.Streams.Getenv("STORECTL_CONFIG")
	}
	if path == "" {
		for _, p := range defaultConfigPaths(e.Streams.Getenv) {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		// Read through storefile: a FIFO or device named as the config
		// file is refused instead of blocking the command.
		b, err := storefile.ReadFileLimit(path, maxConfigFile)
		if err == nil {
			err = v.ReadConfig(bytes.NewReader(b))
		}
		if err != nil {
			return usagef(fmt.Errorf("config file %s: %w", path, err))
		}
		for _, k := range v.AllKeys() {
			if cliOnly[k] && v.InConfig(k) {
				return usagef(fmt.Errorf("config file %s: %q may only be given on the command line", path, k))
			}
		}
	}
	return nil
}

// maxConfigFile bounds the config file storectl reads (a few hundred
// bytes in practice).
const maxConfigFile = 1 << 20

func defaultConfigPaths(getenv func(string) string) []string {
	var out []string
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		out = append(out, filepath.Join(x, "storectl", "config.yaml"))
	} else if h := getenv("HOME"); h != "" {
		out = append(out, filepath.Join(h, ".config", "storectl", "config.yaml"))
	}
	return append(out, "/etc/storectl/config.yaml")
}

// colorOn decides color once: --color always|never|auto; auto = stdout
// is a TTY, NO_COLOR unset and TERM != dumb. JSON is never colored.
func (e *Env) colorOn() bool {
	switch e.Config.GetString("color") {
	case "always":
		return true
	case "never":
		return false
	}
	return e.Streams.IsTTY && e.Streams.Getenv("NO_COLOR") == "" && e.Streams.Getenv("TERM") != "dumb"
}

// outputFormat returns the validated --output format.
func (e *Env) outputFormat() (report.Format, error) {
	f, err := report.ParseFormat(e.Config.GetString("output"))
	if err != nil {
		return "", usagef(err)
	}
	return f, nil
}

// finishAfterError makes sure a json/jsonl report always ends with its
// summary carrying the exit code, even when the command failed before or
// during its report (`tail -n1 | jq .exit_code` must always work).
func (e *Env) finishAfterError(args []string, code int, err error) {
	s := e.session
	if s == nil || !s.em.Done() {
		var sum *report.Summary
		if s != nil {
			v := s.summary(code)
			sum = &v
		}
		if merr := e.writeMetrics(args, code, sum); merr != nil {
			fmt.Fprintf(e.Streams.ErrOut, "storectl: %v\n", merr)
		}
	}
	if s == nil {
		f := guessFormat(args, e.Streams.Getenv)
		if f == report.Text {
			return
		}
		em, _ := report.New(e.Streams.Out, f, report.Style{})
		s = &session{env: e, em: em, start: time.Now()}
		s.resetCounts()
		cmd := "storectl"
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			cmd = args[0]
		}
		_ = em.Run(report.Run{Tool: "storectl", Version: version, Command: cmd})
	}
	if s.em.Done() {
		return
	}
	sum := s.summary(code)
	sum.Incomplete = sum.Incomplete || code == exitIncomplete || code == exitInterrupted
	if err != nil && !errors.Is(err, errFindings) {
		sum.Errors = append(sum.Errors, err.Error())
	}
	_ = s.em.Summary(sum)
}

// guessFormat finds -o/--output in raw args (used only when flag parsing
// itself failed, so that even a usage error ends in a JSON summary).
func guessFormat(args []string, getenv func(string) string) report.Format {
	f := getenv("STORECTL_OUTPUT")
	for i, a := range args {
		switch {
		case (a == "-o" || a == "--output") && i+1 < len(args):
			f = args[i+1]
		case strings.HasPrefix(a, "--output="):
			f = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			f = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	if pf, err := report.ParseFormat(f); err == nil {
		return pf
	}
	return report.Text
}

// validateCommon checks the persistent flags before any work starts.
func (e *Env) validateCommon() error {
	if _, err := e.outputFormat(); err != nil {
		return err
	}
	if p := e.Config.GetString("metrics-file"); p != "" {
		if err := checkMetricsPath(p); err != nil {
			e.metricsDone = true // nothing can be written there
			return usagef(err)
		}
	}
	c := e.Config
	if _, failNew, err := parseFailOn(c.GetString("fail-on")); err != nil {
		return usagef(fmt.Errorf("--fail-on: %w", err))
	} else if failNew && (e.cmd == nil || e.cmd.Flags().Lookup("baseline") == nil || c.GetString("baseline") == "") {
		return usagef(fmt.Errorf("--fail-on new needs --baseline FILE (verify)"))
	}
	checks := map[string][]string{"color": {"auto", "always", "never"}, "progress": {"auto", "plain", "none"}, "store": {"", "rocketmq", "rabbitmq"}}
	for k, allowed := range checks {
		v := c.GetString(k)
		ok := false
		for _, a := range allowed {
			ok = ok || v == a
		}
		if !ok {
			return usagef(fmt.Errorf("--%s: %q is not one of %s", k, v, strings.Join(allowed, ", ")))
		}
	}
	if c.GetInt("jobs") < 1 {
		return usagef(fmt.Errorf("--jobs must be at least 1"))
	}
	if l := c.GetFloat64("io-limit"); l < 0 || l != l {
		return usagef(fmt.Errorf("--io-limit must be a rate in MB/s, 0 for none"))
	}
	return nil
}
