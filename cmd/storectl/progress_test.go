package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/schollz/progressbar/v3"
)

// TestProgressSecondPass: when more bytes are read than the files hold (a
// RabbitMQ vhost scanned again to join its clean-shutdown index entry by
// entry), the plain lines say so instead of a percentage over 100, and a
// bar grows its total instead of overflowing.
func TestProgressSecondPass(t *testing.T) {
	var b bytes.Buffer
	p := &progress{mode: "plain", w: &b, total: 100}
	p.add(60)
	p.add(60)
	out := b.String()
	if !strings.Contains(out, "progress 60/100 bytes (60%)") ||
		!strings.Contains(out, "progress 120 bytes read, 100 in the files (some read a second time)") || strings.Contains(out, "120%") {
		t.Errorf("plain lines:\n%s", out)
	}
	var bb bytes.Buffer
	bar := &progress{mode: "auto", w: &bb, total: 100, bar: progressbar.NewOptions64(100, progressbar.OptionSetWriter(&bb))}
	bar.add(80)
	bar.add(70)
	if m, cur := bar.bar.GetMax64(), bar.bar.State().CurrentNum; m != 150 || cur != 150 {
		t.Errorf("bar: max %d, at %d; want 150, 150", m, cur)
	}
}
