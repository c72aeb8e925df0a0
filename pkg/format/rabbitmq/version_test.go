package rabbitmq

import (
	"fmt"
	"testing"
)

// FuzzParseVersion: --broker-version text never panics ParseVersion; a
// version it takes has every part in 0-999 and, written back as
// MAJOR.MINOR.PATCH, parses to the same parts.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"3.13.1", "v4.0.2", "3.10", "4", "4.1.4-rc.1", "", "v", "1..2", "1000.0.0", "-1.2.3", "3.13.1.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		major, minor, patch, err := ParseVersion(s)
		if err != nil {
			return
		}
		for _, v := range []int{major, minor, patch} {
			if v < 0 || v > 999 {
				t.Fatalf("ParseVersion(%q) = %d.%d.%d: a part out of 0-999", s, major, minor, patch)
			}
		}
		back := fmt.Sprintf("%d.%d.%d", major, minor, patch)
		if a, b, c, err := ParseVersion(back); err != nil || a != major || b != minor || c != patch {
			t.Fatalf("ParseVersion(%q) = %s, which parses to %d.%d.%d (%v)", s, back, a, b, c, err)
		}
	})
}

func TestParseVersion(t *testing.T) {
	for s, want := range map[string][3]int{"3.13.1": {3, 13, 1}, "v4.0.2": {4, 0, 2}, "3.10": {3, 10, 0}, "4.1.4-rc.1": {4, 1, 4}} {
		a, b, c, err := ParseVersion(s)
		if err != nil || [3]int{a, b, c} != want {
			t.Errorf("ParseVersion(%q) = %d.%d.%d, %v; want %v", s, a, b, c, err, want)
		}
	}
	for _, s := range []string{"", "v", "x.1.2", "1000.0.0", "-1.2.3", "3.13.1.2", "1..2"} {
		if _, _, _, err := ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) accepted", s)
		}
	}
}
