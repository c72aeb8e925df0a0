package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/storectl/storectl/pkg/scan"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"TopicA", "TopicA"},
		{"consumequeue/Topic-ü/0", "consumequeue/Topic-ü/0"},
		{"a\\b", `a\\b`},
		{"TopicA\x1b[31mRED\x1b[0m\nFAKE: clean (exit 0)\x1b]0;pwned\a", `TopicA\x1b[31mRED\x1b[0m\nFAKE: clean (exit 0)\x1b]0;pwned\x07`},
		{"q\x1b[2J", `q\x1b[2J`},
		{"tab\there\r", `tab\there\r`},
		{"del\x7f", `del\x7f`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"c1\u009b31m", `c1\u009b31m`},           // the 8-bit CSI
		{"rtl\u202eevil", `rtl\u202eevil`},       // bidi override
		{"zw\u200bsp\ufeff", `zw\u200bsp\ufeff`}, // zero-width space, BOM
		{"ls\u2028ps\u2029", `ls\u2028ps\u2029`},
		{"tag\U000e0041", `tag\U000e0041`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzEscape: whatever the input, the output is valid UTF-8 made of
// printable runes only (no byte a terminal acts on), and escaping is
// injective (different names never print the same).
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "TopicA", "a\x1b[2Jb", "\xff", "\\x1b", "\u202e", "q\nFAKE"} {
		f.Add(s)
	}
	seen := map[string]string{}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !utf8.ValidString(e) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, e)
		}
		for _, r := range e {
			if r != ' ' && !unicode.IsPrint(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, e, r)
			}
		}
		if prev, ok := seen[e]; ok && prev != s && len(seen) < 1<<16 {
			t.Fatalf("Escape(%q) == Escape(%q) == %q", prev, s, e)
		}
		if len(seen) < 1<<16 {
			seen[e] = s
		}
	})
}

// TestTextEscapesNames: a name with escape sequences and a newline, in
// every place the text report prints store data, reaches the output
// with no control byte and without forging a line.
func TestTextEscapesNames(t *testing.T) {
	evil := "TopicA\x1b[31mRED\x1b[0m\nFAKE: clean (exit 0)\x1b]0;pwned\a"
	var b bytes.Buffer
	em, err := New(&b, Text, Style{Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = em.Run(Run{Command: "verify", Store: "rocketmq", DataDir: "/d/" + evil, DetectedFrom: []string{evil}, Live: true, LiveReasons: []string{evil}})
	_ = em.Record(map[string]any{"path": evil, "offset": 1, "topic": evil, "routing_keys": []string{evil}})
	_ = em.File(scan.File{Path: "consumequeue/" + evil + "/0/00000000000000000000", Kind: evil, End: scan.EndEOF})
	_ = em.Queue(map[string]any{"vhost": evil, "queue": evil, "dir": evil, "entries": 1})
	_ = em.Action(map[string]any{"status": "planned", "op": "zero-range", "path": evil, "message": evil + " " + strings.Repeat("word ", 30)})
	_ = em.Finding(scan.Finding{Code: "x." + evil, Severity: scan.Info, Path: evil, Message: evil, MsgID: evil})
	_ = em.Summary(Summary{ExitCode: 3, Incomplete: true, Errors: []string{evil}, Verdict: evil, Counts: map[string]int{}})
	out := b.String()
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("control byte %#x at %d in\n%s", c, i, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " │|"), "FAKE") {
			t.Fatalf("forged line %q in\n%s", l, out)
		}
	}
	if !strings.Contains(out, `TopicA\x1b[31mRED`) {
		t.Fatalf("the escaped name is not shown:\n%s", out)
	}
}
