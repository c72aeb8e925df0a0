package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress reports bytes read on stderr: a bar on a TTY (--progress
// auto), periodic plain lines for logs (--progress plain), or nothing.
type progress struct {
	mode  string
	w     io.Writer
	total int64
	done  atomic.Int64
	bar   *progressbar.ProgressBar
	mu    sync.Mutex
	last  time.Time
	every time.Duration
	limit *ioLimiter // --io-limit; nil = none
}

// ioLimiter paces reads to rate bytes per second: the scanners report
// every window they read through progress.add, which sleeps until the
// bytes read so far are due. Safe for concurrent use.
type ioLimiter struct {
	rate  float64 // bytes per second
	mu    sync.Mutex
	start time.Time
	total int64
}

// ioLimit returns a limiter for --io-limit, or nil without a limit.
func (e *Env) ioLimit() *ioLimiter {
	mbs := e.Config.GetFloat64("io-limit")
	if mbs <= 0 {
		return nil
	}
	return &ioLimiter{rate: mbs * 1e6, start: time.Now()}
}

// readLimit returns the --io-limit pacing as a scan progress callback, or
// nil without a limit (for commands that show no progress).
func (e *Env) readLimit() func(int64) {
	if l := e.ioLimit(); l != nil {
		return l.wait
	}
	return nil
}

func (l *ioLimiter) wait(n int64) {
	l.mu.Lock()
	l.total += n
	due := l.start.Add(time.Duration(float64(l.total) / l.rate * float64(time.Second)))
	l.mu.Unlock()
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}

func (e *Env) newProgress(total int64) *progress {
	mode := e.Config.GetString("progress")
	p := &progress{mode: mode, w: e.Streams.ErrOut, total: total, every: 5 * time.Second, last: time.Now(), limit: e.ioLimit()}
	switch {
	case mode == "auto" && e.Streams.ErrTTY && total > 0:
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(e.Streams.ErrOut),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("scanning"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	case mode == "plain":
	default:
		p.mode = "none"
	}
	return p
}

// add is safe for concurrent use (scanners call it from workers). With
// --io-limit it blocks the reader until its bytes are due.
func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	if p.limit != nil {
		p.limit.wait(n)
	}
	if p.mode == "none" {
		return
	}
	d := p.done.Add(n)
	if p.bar != nil {
		p.mu.Lock()
		if d > p.bar.GetMax64() { // a second pass (a RabbitMQ index that must be joined entry by entry)
			p.bar.ChangeMax64(d)
		}
		_ = p.bar.Add64(n)
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) >= p.every {
		p.last = time.Now()
		p.line(d)
	}
}

func (p *progress) line(d int64) {
	switch {
	case p.total > 0 && d <= p.total:
		fmt.Fprintf(p.w, "storectl: progress %d/%d bytes (%.0f%%)\n", d, p.total, 100*float64(d)/float64(p.total))
	case p.total > 0: // some files read twice: never a percentage over 100
		fmt.Fprintf(p.w, "storectl: progress %d bytes read, %d in the files (some read a second time)\n", d, p.total)
	default:
		fmt.Fprintf(p.w, "storectl: progress %d bytes\n", d)
	}
}

func (p *progress) finish() {
	if p == nil {
		return
	}
	switch {
	case p.bar != nil:
		_ = p.bar.Finish()
	case p.mode == "plain":
		p.line(p.done.Load())
	}
}

// treeSize sums regular file sizes under paths (for the progress total).
func treeSize(paths ...string) int64 {
	var n int64
	for _, root := range paths {
		_ = filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				n += info.Size()
			}
			return nil
		})
	}
	return n
}
