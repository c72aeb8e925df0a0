package timer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	"github.com/storectl/storectl/pkg/format"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
	rmqscan "github.com/storectl/storectl/pkg/scan/rocketmq"
)

// CommitLog is what the timer scan needs of the log the units point into:
// a plain commitlog (NewFileCommitLog) or DLedger's entries, whose inner
// records sit at entry pos + 48.
type CommitLog interface {
	// RecordAt returns the record at physical offset phy after every
	// record-local check (rocketmq.CheckMessage). The message may alias a
	// buffer that the next call reuses.
	RecordAt(phy int64) (rmq.Message, error)
	// Tail calls fn for every valid record of the files that may hold
	// records stored at or after sinceMs (store timestamps), in offset
	// order.
	Tail(ctx context.Context, sinceMs int64, fn func(m *rmq.Message, phy int64) error) error
}

// ErrNoRecord is RecordAt's error for an offset no file covers.
var ErrNoRecord = errors.New("no commitlog file covers this offset")

// FileCommitLog reads a plain commitlog dir. RecordAt serves offsets that
// go forward from a read-ahead window (the units of a timerlog point at
// records in the order the records were written), and the rest with
// single reads. It checks a record's structure and its stored offset,
// not its CRCs: those are the commitlog scan's, and the timer dequeue
// reads a record whatever its CRC.
type FileCommitLog struct {
	cfg    rmqscan.Config
	files  []clFile
	mapped int64
	open   map[int]*os.File
	win    []byte
	winAt  int64 // physical offset of win[0]; -1 when empty
	buf    []byte
}

type clFile struct {
	path string
	base int64
	size int64
}

// windowSize is the read-ahead of FileCommitLog.RecordAt.
const windowSize = 512 << 10

// NewFileCommitLog lists the commitlog files of cfg (Root, CommitLogDir,
// MaxMessageSize are used).
func NewFileCommitLog(cfg rmqscan.Config) (*FileCommitLog, error) {
	if cfg.CommitLogDir == "" {
		cfg.CommitLogDir = filepath.Join(cfg.Root, "commitlog")
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = rmq.DefaultMaxRecordSize
	}
	files, err := scan.OffsetFiles(cfg.CommitLogDir)
	if err != nil {
		return nil, err
	}
	c := &FileCommitLog{cfg: cfg, open: map[int]*os.File{}, winAt: -1}
	for _, f := range files {
		c.files = append(c.files, clFile{path: f.Path, base: f.Base, size: f.Size})
	}
	return c, nil
}

func (c *FileCommitLog) file(phy int64) int {
	i := sort.Search(len(c.files), func(i int) bool { return c.files[i].base > phy }) - 1
	if i < 0 || phy >= c.files[i].base+c.files[i].size {
		return -1
	}
	return i
}

func (c *FileCommitLog) handle(i int) (*os.File, error) {
	if f, ok := c.open[i]; ok {
		return f, nil
	}
	f, err := storefile.Open(c.files[i].path)
	if err != nil {
		return nil, err
	}
	c.open[i] = f
	return f, nil
}

// RecordAt implements CommitLog.
func (c *FileCommitLog) RecordAt(phy int64) (rmq.Message, error) {
	i := c.file(phy)
	if i < 0 {
		return rmq.Message{}, fmt.Errorf("offset %d: %w", phy, ErrNoRecord)
	}
	fl := c.files[i]
	if b, ok := c.window(phy, 8); ok {
		total := int64(int32(binary.BigEndian.Uint32(b)))
		want := min(max(total, 8), int64(c.cfg.MaxMessageSize), fl.base+fl.size-phy)
		if b, ok := c.window(phy, int(want)); ok {
			return decodeAt(b[:want], phy, c.cfg.MaxMessageSize)
		}
	}
	f, err := c.handle(i)
	if err != nil {
		return rmq.Message{}, err
	}
	if phy >= c.winAt && (c.winAt < 0 || phy-c.winAt < 2*windowSize) { // forward, near: move the window
		n := min(int64(windowSize), fl.base+fl.size-phy)
		if cap(c.win) < int(n) {
			c.win = make([]byte, n)
		}
		c.win = c.win[:n]
		if k, err := f.ReadAt(c.win, phy-fl.base); int64(k) < n {
			c.winAt = -1
			return rmq.Message{}, fmt.Errorf("reading the commitlog at %d: %w", phy, err)
		}
		c.winAt = phy
		if b, ok := c.window(phy, 8); ok {
			total := int64(int32(binary.BigEndian.Uint32(b)))
			want := min(max(total, 8), int64(c.cfg.MaxMessageSize), fl.base+fl.size-phy)
			if b, ok := c.window(phy, int(want)); ok {
				return decodeAt(b[:want], phy, c.cfg.MaxMessageSize)
			}
		}
	}
	// Backwards, a jump (the dequeue's scattered lookups), or a record
	// larger than the window: one read of its own.
	var hdr [8]byte
	if n, _ := f.ReadAt(hdr[:], phy-fl.base); n < 8 {
		m, err := rmq.DecodeMessage(hdr[:n], phy, c.cfg.MaxMessageSize)
		if err == nil {
			err = format.Corrupt(phy, "totalSize", format.ErrShort)
		}
		return m, err
	}
	total := int64(int32(binary.BigEndian.Uint32(hdr[:])))
	want := min(max(total, 8), int64(c.cfg.MaxMessageSize), fl.base+fl.size-phy)
	if int64(cap(c.buf)) < want {
		c.buf = make([]byte, want)
	}
	b := c.buf[:want]
	if n, err := f.ReadAt(b, phy-fl.base); int64(n) < want {
		return rmq.Message{}, fmt.Errorf("reading the commitlog at %d: %w", phy, err)
	}
	return decodeAt(b, phy, c.cfg.MaxMessageSize)
}

// window returns n bytes at phy from the read-ahead window if it holds them.
func (c *FileCommitLog) window(phy int64, n int) ([]byte, bool) {
	if c.winAt < 0 || phy < c.winAt || phy+int64(n) > c.winAt+int64(len(c.win)) {
		return nil, false
	}
	return c.win[phy-c.winAt:], true
}

// Tail implements CommitLog: it starts at the last file whose first
// record was stored before sinceMs.
func (c *FileCommitLog) Tail(ctx context.Context, sinceMs int64, fn func(m *rmq.Message, phy int64) error) error {
	start := c.tailStart(sinceMs)
	if len(c.files) == 0 {
		return nil
	}
	cfg := c.cfg
	cfg.Files = nil
	for _, f := range c.files[start:] {
		cfg.Files = append(cfg.Files, f.path)
	}
	if len(c.files) > 1 {
		cfg.MappedFileSize = c.files[0].size
	}
	cfg.OnMessage = fn
	cfg.OnFile = nil
	_, err := rmqscan.ScanCommitLog(ctx, cfg, scanOptions())
	return err
}

// tailStart is the first file Tail(sinceMs) reads: the last whose first
// record was stored before sinceMs, else the first.
func (c *FileCommitLog) tailStart(sinceMs int64) int {
	for i := len(c.files) - 1; i > 0; i-- {
		m, err := c.RecordAt(c.files[i].base)
		if err == nil && m.StoreTimestamp < sinceMs {
			return i
		}
	}
	return 0
}

// Close closes the files.
func (c *FileCommitLog) Close() error {
	for i, f := range c.open {
		f.Close()
		delete(c.open, i)
	}
	return nil
}

func scanOptions() scan.Options { return scan.Options{} }

// decodeAt decodes the record at phy and checks its stored offset.
func decodeAt(b []byte, phy int64, maxSize int) (rmq.Message, error) {
	var m rmq.Message
	err := rmq.DecodeMessageInto(&m, b, phy, maxSize)
	if err == nil && !m.IsBlank() && m.PhysicalOffset != phy {
		err = format.Corrupt(phy+28, "physicalOffset", fmt.Errorf("%w: stored %d", rmq.ErrStale, m.PhysicalOffset))
	}
	return m, err
}
