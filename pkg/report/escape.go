package report

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes a string that came from a store (a file or dir name, a
// queue or topic name, a message id, an error naming a path) safe to put
// on a terminal or in a table cell: every byte that a terminal would act
// on instead of showing is written as a visible escape, so a name cannot
// clear the screen, set the window title, move the cursor or forge a
// table row or a verdict line.
//
//   - backslash becomes \\ (so the escapes below are unambiguous);
//   - newline, carriage return and tab become \n, \r and \t;
//   - other C0 controls, DEL and bytes that are not UTF-8 become \xNN
//     (ESC is \x1b);
//   - runes that unicode.IsPrint rejects (C1 controls such as U+009B,
//     the 8-bit CSI; bidi overrides such as U+202E; zero-width and other
//     format characters; line and paragraph separators; spaces other
//     than U+0020) become \uNNNN or \UNNNNNNNN.
//
// Printable text, non-ASCII letters included, is kept as it is. Every
// text path of the report (pkg/report's text emitter) and every message
// the CLI prints on stderr goes through it; JSON output needs no escaping
// (encoding/json escapes control characters).
func Escape(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			writeHex(&b, `\x`, uint32(r), 2)
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		case r <= 0xffff:
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			writeHex(&b, `\U`, uint32(r), 8)
		}
		i += n
	}
	return b.String()
}

// EscapeAll is Escape of every string of ss (a new slice).
func EscapeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Escape(s)
	}
	return out
}

// isPlain reports whether s is printable ASCII without a backslash: the
// common case, returned as it is.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for d := digits - 1; d >= 0; d-- {
		b.WriteByte(hex[(v>>(4*d))&0xf])
	}
}
