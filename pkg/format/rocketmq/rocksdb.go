package rocketmq

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/storectl/storectl/pkg/format"
)

// With storeType=defaultRocksDB a 5.x broker keeps its consume queues in a
// RocksDB database whose directory is consumequeue/ itself
// (RocksDBConsumeQueueStore, StorePathConfigHelper.getStorePathConsumeQueue
// in apache/rocketmq rocketmq-all-5.3.3), with column families "default"
// (the units) and "offset" (min/max offsets). storectl does not read it:
// it is derived data the broker rebuilds from the commitlog. These
// helpers only recognise it by its file names and read its version from
// the OPTIONS text file, so a file consume queue reader never mistakes
// the database's files for topic directories.

// RocksDB file name patterns (RocksDB filename.cc).
var (
	rocksManifest = regexp.MustCompile(`^MANIFEST-[0-9]+$`)
	rocksOptions  = regexp.MustCompile(`^OPTIONS-[0-9]+$`)
	rocksTable    = regexp.MustCompile(`^[0-9]+\.(sst|ldb)$`)
	rocksWAL      = regexp.MustCompile(`^[0-9]+\.log$`)
	rocksInfoLog  = regexp.MustCompile(`^LOG(\.old\.[0-9]+)?$`)
)

// RocksDBLayout is what the file names of a directory say about a RocksDB
// database in it.
type RocksDBLayout struct {
	Current  bool     // CURRENT: names the live MANIFEST
	Identity bool     // IDENTITY
	Lock     bool     // LOCK
	Manifest []string // MANIFEST-NNNNNN
	Options  []string // OPTIONS-NNNNNN
	Tables   []string // NNNNNN.sst
	WALs     []string // NNNNNN.log
	InfoLogs []string // LOG, LOG.old.*
}

// IsDB reports whether the names make a RocksDB database: CURRENT and a
// MANIFEST, or at least two of the other RocksDB-only names.
func (l RocksDBLayout) IsDB() bool {
	if l.Current && len(l.Manifest) > 0 {
		return true
	}
	n := 0
	for _, b := range []bool{l.Current, l.Identity, l.Lock, len(l.Manifest) > 0, len(l.Options) > 0, len(l.Tables) > 0} {
		if b {
			n++
		}
	}
	return n >= 2
}

// Files lists every RocksDB name found, for evidence.
func (l RocksDBLayout) Files() []string {
	var out []string
	for _, f := range []struct {
		ok   bool
		name string
	}{{l.Current, "CURRENT"}, {l.Identity, "IDENTITY"}, {l.Lock, "LOCK"}} {
		if f.ok {
			out = append(out, f.name)
		}
	}
	for _, s := range [][]string{l.Manifest, l.Options, l.Tables, l.WALs, l.InfoLogs} {
		out = append(out, s...)
	}
	return out
}

// ClassifyRocksDB sorts directory entry names into a RocksDBLayout;
// names that are not RocksDB's (topic directories) are ignored.
func ClassifyRocksDB(names []string) RocksDBLayout {
	var l RocksDBLayout
	for _, n := range names {
		switch {
		case n == "CURRENT":
			l.Current = true
		case n == "IDENTITY":
			l.Identity = true
		case n == "LOCK":
			l.Lock = true
		case rocksManifest.MatchString(n):
			l.Manifest = append(l.Manifest, n)
		case rocksOptions.MatchString(n):
			l.Options = append(l.Options, n)
		case rocksTable.MatchString(n):
			l.Tables = append(l.Tables, n)
		case rocksWAL.MatchString(n):
			l.WALs = append(l.WALs, n)
		case rocksInfoLog.MatchString(n):
			l.InfoLogs = append(l.InfoLogs, n)
		}
	}
	return l
}

// RocksDBOptions is what storectl reads from an OPTIONS-NNNNNN file.
type RocksDBOptions struct {
	Version            string   // [Version] rocksdb_version
	OptionsFileVersion string   // [Version] options_file_version
	ColumnFamilies     []string // names of the [CFOptions "name"] sections
}

// DecodeRocksDBOptions reads the [Version] section and the column family
// names of a RocksDB OPTIONS file (an INI text file, RocksDB
// options_parser.cc). A file with no [Version] section is a
// *format.CorruptError.
func DecodeRocksDBOptions(b []byte) (RocksDBOptions, error) {
	var o RocksDBOptions
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	section, off, seen := "", int64(0), false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		off += int64(len(sc.Bytes()) + 1)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if section == "Version" {
				seen = true
			}
			if name, ok := strings.CutPrefix(section, "CFOptions "); ok {
				o.ColumnFamilies = append(o.ColumnFamilies, strings.Trim(name, `"`))
			}
		case section == "Version":
			k, v, _ := strings.Cut(line, "=")
			switch strings.TrimSpace(k) {
			case "rocksdb_version":
				o.Version = strings.TrimSpace(v)
			case "options_file_version":
				o.OptionsFileVersion = strings.TrimSpace(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return o, format.Corrupt(off, "line", fmt.Errorf("%w: %v", format.ErrTooLarge, err))
	}
	if !seen {
		return o, format.Corrupt(0, "Version", fmt.Errorf("%w: no [Version] section", format.ErrInvalid))
	}
	return o, nil
}

// DecodeRocksDBCurrent returns the MANIFEST name the CURRENT file points at.
func DecodeRocksDBCurrent(b []byte) (string, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if !rocksManifest.MatchString(s) {
		return "", format.Corrupt(0, "CURRENT", fmt.Errorf("%w: %q is not a MANIFEST name", format.ErrInvalid, s))
	}
	return s, nil
}
