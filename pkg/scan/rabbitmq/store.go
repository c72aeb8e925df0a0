package rabbitmq

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/pkg/scan"
)

// MaxFileSize bounds the .rdq files read whole into memory. The default
// msg_store_file_size_limit is 16 MiB, a file can exceed it by one record,
// and RabbitMQ's hard message size cap is 512 MiB (MAX_MSG_SIZE), so 1 GiB
// holds any file a broker writes while bounding memory on garbage.
const MaxFileSize = 1 << 30

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

// scanner holds what one store's files share.
type scanner struct {
	root    string
	ver     brokerVersion
	opts    scan.Options
	refs    map[string][]string // nil: references unknown
	clean   *CleanIndex
	seen    map[[16]byte]Location
	buf     []byte
	termCnt map[string]int
}

func newScanner(root string, ver brokerVersion, opts scan.Options) *scanner {
	return &scanner{root: root, ver: ver, opts: opts, seen: map[[16]byte]Location{}, termCnt: map[string]int{}}
}

func (s *scanner) rel(p string) string { return scan.Rel(s.root, p) }

// rdqFile is an .rdq found in a store dir.
type rdqFile struct {
	path string
	num  int64
}

// listRDQ lists the .rdq files of dir in numeric order (non-numeric names
// last, by name).
func listRDQ(dir string) ([]rdqFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []rdqFile
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".rdq") {
			continue
		}
		out = append(out, rdqFile{filepath.Join(dir, e.Name()), rdqNumber(e.Name())})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.num < 0) != (b.num < 0) {
			return a.num >= 0
		}
		if a.num != b.num {
			return a.num < b.num
		}
		return a.path < b.path
	})
	return out, nil
}

func rdqNumber(name string) int64 {
	s := strings.TrimSuffix(filepath.Base(name), ".rdq")
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// read reads a whole file into the scanner's reusable buffer.
func (s *scanner) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d this scanner reads", path, st.Size(), MaxFileSize)
	}
	n := int(st.Size())
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	if s.opts.Progress != nil {
		s.opts.Progress(int64(n))
	}
	return b, nil
}

// scanFile scans one file: records, statuses, hazards, record callback.
func (s *scanner) scanFile(ctx context.Context, f rdqFile, current, transient bool) *FileScan {
	fs := &FileScan{Path: s.rel(f.path), Abs: f.path, Number: f.num, Current: current, Transient: transient}
	if err := ctx.Err(); err != nil {
		fs.Err = err
		return fs
	}
	b, err := s.read(f.path)
	if err != nil {
		fs.Err = err
		return fs
	}
	fs.Size = int64(len(b))
	walk(b, fs)
	for _, r := range fs.Records {
		s.classify(r, transient)
		s.termCnt[r.Term]++
		if r.Status == StatusReferenced {
			fs.LastReferencedEnd = r.End()
		}
	}
	hazards(b, fs)
	if s.opts.Records != nil {
		for _, r := range fs.Records {
			if err := s.opts.Records(newRecordJSON(b, r)); err != nil {
				fs.Err = err
				break
			}
		}
	}
	return fs
}

// classify sets a record's status, references and index agreement.
func (s *scanner) classify(r *Record, transient bool) {
	r.ReferencedBy = []string{}
	if transient {
		r.Status = StatusUnreferenced
		return
	}
	id := r.ID()
	if s.refs != nil {
		if qs := s.refs[id]; len(qs) > 0 {
			r.ReferencedBy = qs
		}
	}
	if s.clean != nil && s.clean.HasIndex {
		switch e, ok := s.clean.byID[r.MsgID]; {
		case !ok:
			r.IndexMatch = "absent"
		case e.File == r.File && e.Offset == r.Offset && e.TotalSize == r.TotalSize:
			r.IndexMatch = "match"
		default:
			r.IndexMatch = "mismatch"
		}
	}
	if first, ok := s.seen[r.MsgID]; ok {
		r.Status, r.FirstPath, r.FirstOffset = StatusDuplicate, first.Path, first.Offset
		return
	}
	s.seen[r.MsgID] = Location{Path: r.Path, Offset: r.Offset}
	switch {
	case s.refs == nil:
		r.Status = StatusUnknown
	case len(r.ReferencedBy) > 0:
		r.Status = StatusReferenced
	default:
		r.Status = StatusUnreferenced
	}
}

// scanStore scans every .rdq of a store dir in numeric order.
func (s *scanner) scanStore(ctx context.Context, dir string, transient bool) ([]*FileScan, error) {
	files, err := listRDQ(dir)
	if err != nil {
		return nil, err
	}
	var out []*FileScan
	maxNum := int64(-1)
	for _, f := range files {
		maxNum = max(maxNum, f.num)
	}
	for _, f := range files {
		current := f.num == maxNum || f.num < 0
		out = append(out, s.scanFile(ctx, f, current, transient))
	}
	return out, nil
}
