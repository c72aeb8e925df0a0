package fileview

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func tempFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestView reads a file through small windows at random offsets and
// wants and checks every slice against the file bytes, the progress
// total and MaxRead.
func TestView(t *testing.T) {
	const size = 3<<20 + 12345
	p, want := tempFile(t, size)
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var progress int64
	v.Progress = func(n int64) { progress += n }
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		off := r.Int64N(size + 10)
		w := 1 + r.IntN(200<<10)
		b, err := v.View(off, w, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if off >= size {
			if len(b) != 0 {
				t.Fatalf("past EOF: %d bytes", len(b))
			}
			continue
		}
		if min := min(int64(w), size-off); int64(len(b)) < min {
			t.Fatalf("View(%d, %d): %d bytes, want at least %d", off, w, len(b), min)
		}
		if !bytes.Equal(b, want[off:off+int64(len(b))]) {
			t.Fatalf("View(%d, %d): bytes differ", off, w)
		}
	}
	// A sequential pass on a fresh view reports every byte once.
	v2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	progress = 0
	v2.Progress = func(n int64) { progress += n }
	v = v2
	for off := int64(0); off < size; {
		b, err := v.View(off, 1, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		off += int64(len(b))
	}
	if v.MaxRead() != size || progress != size {
		t.Fatalf("MaxRead %d, progress %d, want %d", v.MaxRead(), progress, size)
	}
}

// TestWhole maps a whole file and checks the bytes.
func TestWhole(t *testing.T) {
	p, want := tempFile(t, 1<<20+7)
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.Whole()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("Whole: bytes differ")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	e := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(e, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = Open(e)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if b, err := v.Whole(); err != nil || len(b) != 0 {
		t.Fatalf("empty file: %d bytes, %v", len(b), err)
	}
}

var sink byte

// TestGuard: a fault on a mapped page past the end of a truncated file
// becomes an error instead of killing the process: a *FaultError (wrapping
// ErrFault) naming the file and the offset read, also when the caller's
// deferred Close ran before its deferred Guard recovered.
func TestGuard(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		p, _ := tempFile(t, 1<<20)
		v, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := v.Whole()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
		const at = 1<<20 - 12345
		var ferr error
		func() {
			defer Guard(&ferr)()
			if closeFirst {
				// Keep the mapping (Close would unmap it): only its
				// registration goes, as when a deferred Close unwinds first.
				unregister(v.probe)
			}
			sink = b[at]
		}()
		var fe *FaultError
		if !errors.Is(ferr, ErrFault) || !errors.As(ferr, &fe) || fe.Path != p || fe.Offset != at {
			t.Fatalf("close first %v: error %v (%+v), want a fault at %s offset %d", closeFirst, ferr, fe, p, at)
		}
		if off, ok := FaultOffset(fmt.Errorf("wrapped: %w", ferr)); !ok || off != at {
			t.Errorf("FaultOffset of a wrapped fault: %d %v", off, ok)
		}
		t.Logf("close first %v: %v", closeFirst, ferr)
		v.Close()
	}
}

// resident counts the pages of p in the page cache.
func resident(t *testing.T, p string) (int, int) {
	t.Helper()
	vec := residency(t, p)
	n := 0
	for _, r := range vec {
		n += int(r & 1)
	}
	return n, len(vec)
}

// residency is mincore's vector for p: bit 0 of each page's byte is set
// when the page is in the page cache.
func residency(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if err := mincore(m, vec); err != nil {
		t.Skip("mincore:", err)
	}
	return vec
}

// TestDropCold: a scan of a file that was not cached leaves it uncached
// (FADV_DONTNEED on what it read); a scan of a cached file leaves it
// cached (the broker's pages are not evicted).
//
// It runs for each way of reading: View's windows, Whole and Stream (the
// mapping must be gone before FADV_DONTNEED, which skips mapped pages).
func TestDropCold(t *testing.T) {
	reads := map[string]func(t *testing.T, v *File){
		"View": func(t *testing.T, v *File) {
			for off := int64(0); off < v.Size(); {
				b, err := v.View(off, 1, 256<<10)
				if err != nil {
					t.Fatal(err)
				}
				off += int64(len(b))
			}
		},
		"Whole": func(t *testing.T, v *File) {
			b, err := v.Whole()
			if err != nil || int64(len(b)) != v.Size() {
				t.Fatalf("Whole: %d bytes, %v", len(b), err)
			}
			for i := 0; i < len(b); i += 4096 {
				sink ^= b[i]
			}
		},
		"Stream": func(t *testing.T, v *File) {
			b, reached, err := v.Stream()
			if err != nil || int64(len(b)) != v.Size() {
				t.Fatalf("Stream: %d bytes, %v", len(b), err)
			}
			for i := 0; i < len(b); i += 4096 {
				sink ^= b[i]
				reached(int64(i))
			}
		},
		"Slice": func(t *testing.T, v *File) {
			for off := int64(0); off < v.Size(); off += 300 << 10 {
				b, err := v.Slice(off, int(min(512<<10, v.Size()-off)))
				if err != nil {
					t.Fatal(err)
				}
				sink ^= b[0]
			}
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) { testDropCold(t, read) })
	}
}

func testDropCold(t *testing.T, read func(*testing.T, *File)) {
	p, _ := tempFile(t, 4<<20)
	scanAll := func() {
		v, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		read(t, v)
		v.Close()
	}
	// Warm: read it, then scan; every page stays.
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	before, pages := resident(t, p)
	if before < pages {
		t.Skipf("page cache did not keep the file (%d/%d pages)", before, pages)
	}
	scanAll()
	if after, _ := resident(t, p); after < pages {
		t.Fatalf("scan of a cached file evicted pages: %d/%d resident", after, pages)
	}
	// Cold: drop it, scan; what the scan read is dropped again.
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Sync() // dirty pages can't be dropped
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if n, _ := resident(t, p); n > pages/4 {
		t.Skipf("FADV_DONTNEED left %d/%d pages (dirty or pinned)", n, pages)
	}
	scanAll()
	if n, _ := resident(t, p); n > pages/4 {
		t.Fatalf("scan of an uncached file left %d/%d pages in the page cache", n, pages)
	}
}

// TestDropColdPartly: a scan of a file whose first 3.25 MiB were cached
// and the rest not leaves the first part cached and drops the rest: a
// chunk wholly cached, one partly cached (mincore's path) and chunks not
// cached at all (cachestat's).
func TestDropColdPartly(t *testing.T) {
	p, _ := tempFile(t, 8<<20)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Sync()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) // no readahead past the prefix
	const prefix = 3<<20 + 256<<10
	buf := make([]byte, prefix)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	vec := residency(t, p)
	pages, k := len(vec), int(prefix/pageSize)
	for i, r := range vec {
		if (r&1 == 1) != (i < k) {
			t.Skipf("page cache did not keep exactly the first %d pages (page %d resident=%v)", k, i, r&1 == 1)
		}
	}
	if n, ok := cachedPages(f, 0, int64(pages)*pageSize); ok && n != int64(k) {
		t.Fatalf("cachestat counts %d cached pages, mincore %d", n, k)
	}
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < v.Size(); off += 256 << 10 {
		if _, err := v.ReadAt(buf[:256<<10], off); err != nil {
			t.Fatal(err)
		}
	}
	v.Close()
	vec = residency(t, p)
	first, rest := 0, 0
	for i, r := range vec {
		if r&1 == 1 && i < k {
			first++
		} else if r&1 == 1 {
			rest++
		}
	}
	if first != k || rest > (pages-k)/8 {
		t.Fatalf("after the scan %d/%d pages of the cached part and %d/%d of the rest are cached", first, k, rest, pages-k)
	}
}

// TestCachedPages: cachestat's count agrees with mincore's for a cached
// and an evicted file.
func TestCachedPages(t *testing.T) {
	p, _ := tempFile(t, 1<<20)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, ok := cachedPages(f, 0, 1<<20)
	if !ok {
		t.Skip("cachestat(2) is not supported here (Linux < 6.5): the mincore path is used")
	}
	if want, _ := resident(t, p); n != int64(want) {
		t.Fatalf("cachestat: %d cached pages, mincore %d", n, want)
	}
	f.Sync()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	n, _ = cachedPages(f, 0, 1<<20)
	if want, _ := resident(t, p); n != int64(want) {
		t.Fatalf("after FADV_DONTNEED: cachestat %d cached pages, mincore %d", n, want)
	}
}

// mappedRss returns the resident KiB of the mapping holding b
// (/proc/self/smaps).
func mappedRss(t *testing.T, b []byte) int64 {
	t.Helper()
	var kb int64
	fmt.Sscanf(smapsField(t, b, "Rss:"), "%d", &kb)
	return kb
}

// smapsField returns what follows name on the line of /proc/self/smaps
// that names it in the entry of the mapping holding b.
func smapsField(t *testing.T, b []byte, name string) string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		var lo, hi uint64
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, name) {
			return strings.TrimPrefix(line, name)
		}
	}
	t.Fatalf("no %s of the mapping in /proc/self/smaps", name)
	return ""
}

// TestStream reads a 16 MiB file through Stream in two passes and checks
// the bytes, and that the mapping holds at most about two windows of it
// after each pass (Whole holds all 16 MiB).
func TestStream(t *testing.T) {
	const size = 16<<20 + 123
	p, want := tempFile(t, size)
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b, reached, err := v.Stream()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size {
		t.Fatalf("%d bytes, want %d", len(b), size)
	}
	limit := int64(3 * StreamWindow / 1024) // KiB: two windows and some slack
	for pass := range 2 {
		for off := 0; off < size; off += 4096 {
			end := min(off+4096, size)
			if !bytes.Equal(b[off:end], want[off:end]) {
				t.Fatalf("pass %d: bytes differ at %d", pass, off)
			}
			reached(int64(end))
		}
		if rss := mappedRss(t, b); rss > limit {
			t.Errorf("pass %d: mapping holds %d KiB, want at most %d", pass, rss, limit)
		}
	}
	// Bytes behind the window are still readable.
	if !bytes.Equal(b[:100], want[:100]) {
		t.Error("bytes behind the window differ")
	}
	// Whole, for comparison: the whole file is resident.
	v2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	w, err := v2.Whole()
	if err != nil {
		t.Fatal(err)
	}
	if rss := mappedRss(t, w); rss < size/1024 {
		t.Errorf("Whole: mapping holds %d KiB, want all %d", rss, size/1024)
	}
}

// TestStreamFile: fn gets the file's bytes and reached; fn's error and an
// open error (naming the file) come back.
func TestStreamFile(t *testing.T) {
	p, want := tempFile(t, 3<<20+5)
	var got []byte
	err := StreamFile(p, func(b []byte, reached func(int64)) error {
		for off := 0; off < len(b); off += 1 << 16 {
			got = append(got, b[off:min(off+1<<16, len(b))]...)
			reached(int64(off))
		}
		return nil
	})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("StreamFile: %v, %d bytes read of %d, equal %v", err, len(got), len(want), bytes.Equal(got, want))
	}
	errFn := errors.New("from fn")
	if err := StreamFile(p, func([]byte, func(int64)) error { return errFn }); err != errFn {
		t.Errorf("fn's error: got %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if err := StreamFile(missing, func([]byte, func(int64)) error { return nil }); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
}

// TestSlice reads a 24 MiB file front to back through Slice in
// overlapping windows and checks the bytes, that the mapping holds at
// most about SliceBehind of it (and the window) at the end, and that the pages
// of an uncached file the scan has left behind are out of the page cache
// before Close (as View drops them). Past the end is an error.
func TestSlice(t *testing.T) {
	const size = 24<<20 + 4321
	p, want := tempFile(t, size)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Sync()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var progress int64
	v.Progress = func(n int64) { progress += n }
	r := rand.New(rand.NewPCG(5, 6))
	var b []byte
	for off := int64(0); off < size; {
		n := int(min(int64(1+r.IntN(700<<10)), size-off))
		b, err = v.Slice(off, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n || !bytes.Equal(b, want[off:off+int64(n)]) {
			t.Fatalf("Slice(%d, %d): %d bytes, equal %v", off, n, len(b), bytes.Equal(b, want[off:off+int64(min(len(b), n))]))
		}
		off += int64(max(1, n-r.IntN(n)/2)) // windows overlap
	}
	if progress != size || v.MaxRead() != size {
		t.Errorf("progress %d, MaxRead %d, want %d", progress, v.MaxRead(), size)
	}
	limit := int64(SliceBehind+2*StreamWindow) / 1024
	if rss := mappedRss(t, v.probe); rss > limit {
		t.Errorf("the mapping holds %d KiB, want at most %d", rss, limit)
	}
	// The pages that were not cached when the scan started (the page
	// cache may not have dropped them all: other tests run beside this
	// one) and are behind the window are out of the cache again.
	vec := residency(t, p)
	cold, kept := 0, 0
	for i := range (size - SliceBehind - 2*StreamWindow) / int(pageSize) {
		if v.cold[i] {
			cold++
			if vec[i]&1 != 0 {
				kept++
			}
		}
	}
	if cold < len(vec)/4 {
		t.Logf("only %d of %d pages were uncached at the start", cold, len(vec))
	}
	if kept > 0 {
		t.Errorf("before Close, %d of the %d pages the scan brought in behind its window are in the page cache", kept, cold)
	}
	// (Reading what is behind the window reads it into the cache again.)
	if !bytes.Equal(v.probe[:100], want[:100]) {
		t.Error("bytes behind the window differ")
	}
	if _, err := v.Slice(size-10, 11); err == nil {
		t.Error("Slice past the end: no error")
	}
	// A file that shrinks under Slice faults, and Guard names the offset.
	if err := os.Truncate(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	var ferr error
	func() {
		defer Guard(&ferr)()
		b, _ := v.Slice(2<<20, 4096)
		sink = b[100]
	}()
	if off, ok := FaultOffset(ferr); !ok || off != 2<<20+100 || !strings.Contains(ferr.Error(), "offset") {
		t.Errorf("read past a shrunk end: %v, want a fault at offset %d", ferr, 2<<20+100)
	}
}

// TestRelease: Release lets go of every page of a mapping (Whole's and
// Stream's), the bytes read back the same after it, a jump ahead in a
// Stream pass does not read in what it skipped, and a page touched again
// after the file shrank faults as a *FaultError with the file and offset.
func TestRelease(t *testing.T) {
	const size = 8<<20 + 77
	p, want := tempFile(t, size)
	v, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b, err := v.Whole()
	if err != nil {
		t.Fatal(err)
	}
	if rss := mappedRss(t, b); rss < size/1024 {
		t.Fatalf("Whole: mapping holds %d KiB, want all %d", rss, size/1024)
	}
	v.Release()
	if rss := mappedRss(t, b); rss > 64 {
		t.Errorf("after Release: mapping holds %d KiB, want none", rss)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("bytes differ after Release")
	}

	v2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	s, reached, err := v2.Stream()
	if err != nil {
		t.Fatal(err)
	}
	v2.Release()
	reached(6 << 20) // a jump ahead: [0, 6 MiB) is skipped
	limit := int64(3 * StreamWindow / 1024)
	if rss := mappedRss(t, s); rss > limit {
		t.Errorf("jump ahead: mapping holds %d KiB, want at most %d", rss, limit)
	}
	if !bytes.Equal(s[6<<20:], want[6<<20:]) {
		t.Fatal("bytes differ after the jump")
	}
	v2.Release()

	if err := os.Truncate(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	const at = 5<<20 + 99
	var ferr error
	func() {
		defer Guard(&ferr)()
		sink = s[at]
	}()
	var fe *FaultError
	if !errors.As(ferr, &fe) || fe.Path != p || fe.Offset != at {
		t.Fatalf("touch after Release and truncate: %v (%+v), want a fault at %s offset %d", ferr, fe, p, at)
	}
	if !bytes.Equal(s[:1<<20], want[:1<<20]) {
		t.Error("bytes before the new end differ")
	}
}

// vmFlags returns the VmFlags of the mapping holding b (/proc/self/smaps).
func vmFlags(t *testing.T, b []byte) []string {
	t.Helper()
	return strings.Fields(smapsField(t, b, "VmFlags:"))
}

// TestSequentialAdvice: the mappings Slice, Stream and Whole read from
// are advised sequential (Slice, Stream) and huge-page (all three, where
// the kernel has transparent huge pages), so that a cold read comes in as
// 2 MiB folios mapped by one entry each (adviseSequential).
func TestSequentialAdvice(t *testing.T) {
	probe := make([]byte, 4<<20)
	unix.Madvise(probe, unix.MADV_NORMAL)
	thp := unix.Madvise(probe, unix.MADV_HUGEPAGE) == nil
	p, _ := tempFile(t, 8<<20)
	for _, c := range []struct {
		name string
		seq  bool
		read func(v *File) error
	}{
		{"Slice", true, func(v *File) error { _, err := v.Slice(0, 4096); return err }},
		{"Stream", true, func(v *File) error { _, _, err := v.Stream(); return err }},
		{"Whole", false, func(v *File) error { _, err := v.Whole(); return err }},
	} {
		v, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if !v.Mapped() {
			v.Close()
			t.Skip("the file can't be mapped here")
		}
		if err := c.read(v); err != nil {
			t.Fatal(err)
		}
		flags := " " + strings.Join(vmFlags(t, v.probe), " ") + " "
		if c.seq && !strings.Contains(flags, " sr ") {
			t.Errorf("%s: mapping not advised sequential (VmFlags%s)", c.name, flags)
		}
		if thp && !strings.Contains(flags, " hg ") {
			t.Errorf("%s: mapping not advised huge-page (VmFlags%s)", c.name, flags)
		}
		v.Close()
	}
	if !thp {
		t.Log("no transparent huge pages here: only the sequential advice is checked")
	}
}
