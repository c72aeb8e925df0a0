package rocketmq

import (
	"os"
	"path/filepath"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// rocksDBConsumeQueue reports whether consumequeue/ holds a RocksDB
// consume queue (storeType=defaultRocksDB: the database is consumequeue/
// itself, apache/rocketmq 5.3.3 RocksDBConsumeQueueStore). Its files are
// never read as topic dirs: the consume queue checks are skipped with one
// info finding, instead of a "missing" unit for every record.
func (v *verifier) rocksDBConsumeQueue() bool {
	ents, err := os.ReadDir(filepath.Join(v.cfg.Root, "consumequeue"))
	if err != nil {
		return false
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	l := rmq.ClassifyRocksDB(names)
	if !l.IsDB() {
		return false
	}
	v.res.Layout["consume_queue"] = "rocksdb"
	v.res.Add(scan.Finding{Code: CodeCQNotChecked, Severity: scan.Info, Path: "consumequeue", Repair: scan.RepairNone,
		Details: map[string]any{"rocksdb_files": l.Files()},
		Message: "consumequeue/ holds a RocksDB consume queue: derived data storectl does not read; the commitlog records are not checked against it"})
	return true
}
