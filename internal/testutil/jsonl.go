package testutil

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// MaxJSONLLine is the longest oracle line ReadJSONL accepts: the longest
// line of the fixtures' jsonl oracles (a decoded message with its payload)
// is a few KiB, and 16 MiB leaves room for larger generated oracles while
// keeping a broken file from growing the scanner's buffer without bound.
const MaxJSONLLine = 16 << 20

// ReadJSONL decodes every non-blank line of the jsonl file at path (gzipped
// when the name ends in .gz) into a
// new T and returns them in file order. It fails the test when the file
// cannot be read, a line is not a JSON T, or a line is longer than
// MaxJSONLLine.
func ReadJSONL[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		in = gz
	}
	var out []T
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), MaxJSONLLine)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// ReadJSONLIfExists is ReadJSONL for an oracle that some fixtures do not
// have: it returns nil when no file exists at path.
func ReadJSONLIfExists[T any](t testing.TB, path string) []T {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return ReadJSONL[T](t, path)
}
