package scan

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// NotDataFileError is a file of a data dir that is not a store data file
// a command can be given on its own (a consume queue, an index file, a
// queue index, ...): it says what the file is and which command reads it.
// It wraps ErrNotStore.
type NotDataFileError struct {
	Path    string // as given
	What    string // what the file is
	ReadBy  string // the command line that reads it
	DataDir string // the data dir it belongs to, when known
}

func (e *NotDataFileError) Error() string {
	return fmt.Sprintf("%s is %s, not a store data file that can be read on its own (a RocketMQ commitlog file or a RabbitMQ .rdq file); %s", e.Path, e.What, e.ReadBy)
}

func (e *NotDataFileError) Unwrap() error { return ErrNotStore }

// claimed reports whether a detector took the file for a kind of its
// own: anything but the guess that a 20-digit name outside a commitlog/
// dir is a commitlog file (which a consume queue file also matches).
func claimed(cands []Target) bool {
	for _, c := range cands {
		if c.Kind != TargetRocketLogFile || filepath.Base(c.CommitLogDir) == "commitlog" {
			return true
		}
	}
	return false
}

var indexFileName = regexp.MustCompile(`^[0-9]{17}$`) // RocketMQ index: yyyyMMddHHmmssSSS

// notDataFile says what a file that is not a data file is; nil when it
// may be one (or is unknown: the caller's detection decides).
func notDataFile(path, abs string) *NotDataFileError {
	dir, name := filepath.Split(abs)
	dir = filepath.Clean(dir)
	up := func(n int) string { // the dir n levels above the file's dir
		d := dir
		for range n {
			d = filepath.Dir(d)
		}
		return d
	}
	base := func(n int) string { return filepath.Base(up(n)) }
	verify := func(root string) string { return "`storectl verify " + root + "` reads it" }
	e := func(what, readBy, root string) *NotDataFileError {
		return &NotDataFileError{Path: path, What: what, ReadBy: readBy, DataDir: root}
	}
	switch {
	case IsCommitLogName(name) && base(2) == "consumequeue":
		return e("a RocketMQ consume queue file (topic "+base(1)+", queue "+base(0)+")",
			verify(up(3))+", checking each unit against the commitlog", up(3))
	case IsCommitLogName(name) && base(2) == "consumequeue_ext":
		return e("a RocketMQ consume queue extension file", verify(up(3)), up(3))
	case indexFileName.MatchString(name) && base(0) == "index":
		return e("a RocketMQ index file", verify(up(1))+", checking its entries against the commitlog", up(1))
	case IsCommitLogName(name) && base(0) == "timerlog":
		return e("a RocketMQ timer log file", verify(up(1))+" and lists it among the store's components", up(1))
	case IsCommitLogName(name) && base(0) == "data" && strings.HasPrefix(base(1), "dledger-"):
		return e("a RocketMQ DLedger entry file", verify(up(2))+" and lists it among the store's components", up(2))
	case IsCommitLogName(name) && base(0) == "index" && strings.HasPrefix(base(1), "dledger-"):
		return e("a RocketMQ DLedger index file", verify(up(2))+" and lists it among the store's components", up(2))
	case name == "checkpoint" || name == "timerwheel" || name == "abort" || name == "lock":
		if isDir(filepath.Join(dir, "commitlog")) || isDir(filepath.Join(dir, "consumequeue")) {
			return e("the RocketMQ store's "+name+" file", verify(dir), dir)
		}
	case strings.HasSuffix(name, ".qi") || strings.HasSuffix(name, ".qs") || strings.HasSuffix(name, ".idx") ||
		name == "journal.jif" || name == ".queue_name":
		if base(1) == "queues" {
			kind := map[bool]string{true: "v2", false: "v1"}[strings.HasSuffix(name, ".qi") || strings.HasSuffix(name, ".qs")]
			return e("a RabbitMQ classic queue index file ("+kind+", queue dir "+base(0)+")",
				verify(up(2))+", checking each entry against the message store", up(2))
		}
	case name == "clean.dot" || strings.HasSuffix(name, ".ets"):
		if strings.HasPrefix(base(0), "msg_store_") {
			return e("the RabbitMQ message store's clean-shutdown index", verify(up(1)), up(1))
		}
	case strings.HasSuffix(name, ".dets"):
		return e("a RabbitMQ DETS metadata file (not read by storectl)", "`storectl verify` of its node dir lists it among the node's components", "")
	case strings.HasSuffix(name, ".wal") || strings.HasSuffix(name, ".segment"):
		for i := 0; i < 3; i++ {
			if b := base(i); b == "quorum" || b == "coordination" {
				return e("a RabbitMQ ra ("+b+") log file", verify(up(i+1))+" and lists "+b+"/ among the node's components", up(i+1))
			}
		}
	}
	return nil
}
