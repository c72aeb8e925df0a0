// Command pagecache warms or evicts files in the page cache, for
// scripts/bench-cli.sh:
//
//	pagecache -warm FILE...   read the files' data (holes are skipped, so
//	                          a sparse 6 MB consume queue file costs its
//	                          data, not 6 MB of zeros)
//	pagecache -evict FILE...  posix_fadvise(POSIX_FADV_DONTNEED) after an
//	                          fdatasync: the next read comes from the disk
//
// With -0 the files are read NUL-separated from stdin (find -print0).
// Unlike /proc/sys/vm/drop_caches, -evict needs no privilege and leaves
// the rest of the host's cache (other tenants') alone.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/storectl/storectl/internal/sparse"
	"golang.org/x/sys/unix"
)

func main() {
	warm := flag.Bool("warm", false, "read the files' data into the page cache")
	evict := flag.Bool("evict", false, "drop the files' pages from the page cache")
	nul := flag.Bool("0", false, "read NUL-separated file names from stdin")
	flag.Parse()
	if *warm == *evict {
		fmt.Fprintln(os.Stderr, "pagecache: give one of -warm and -evict")
		os.Exit(2)
	}
	files := flag.Args()
	if *nul {
		b, err := io.ReadAll(bufio.NewReader(os.Stdin))
		if err != nil {
			fmt.Fprintln(os.Stderr, "pagecache:", err)
			os.Exit(2)
		}
		for _, p := range bytes.Split(b, []byte{0}) {
			if len(p) > 0 {
				files = append(files, string(p))
			}
		}
	}
	buf := make([]byte, 1<<20)
	failed := false
	for _, p := range files {
		var err error
		if *warm {
			err = warmFile(p, buf)
		} else {
			err = evictFile(p)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pagecache:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// warmFile reads every data extent of p (sparse.Extents: holes are
// skipped).
func warmFile(p string, buf []byte) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return sparse.Extents(f, st.Size(), func(off, end int64) error {
		for off < end {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			off += int64(n)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}

func evictFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_ = unix.Fdatasync(int(f.Fd())) // dirty pages are not dropped
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}
