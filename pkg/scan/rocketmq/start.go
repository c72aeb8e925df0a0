package rocketmq

import (
	"encoding/binary"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// recoveryStart is the index in lay.segs of the commitlog file the next
// start's CommitLog.recoverAbnormally begins at, when the commitlog scan
// can know it: with an abort file in the data dir (unclean shutdown) the
// broker (4.9.7 and 5.3.3 alike) tries the files from the last one back
// and starts at the first whose bytes at offset 0 pass
// isMappedFileMatchedRecover (a message magic, a non-zero store
// timestamp not newer than the checkpoint's min timestamp), at file 0
// when none does (§3.3). The files before it are neither read nor
// truncated (MappedFileQueue.truncateDirtyFiles only touches files whose
// end lies past the recovery end), so the recovery end is where the walk
// from this file stops, not where a walk from the first file would.
// Without an abort file, or without a data dir (single files), it is 0:
// recoverNormally's start needs the version and the consume queues
// (Verify's normalStart), which this scan does not read.
func recoveryStart(cfg *Config, lay *layout) int {
	if cfg.Root == "" || len(cfg.Files) > 0 || len(lay.segs) < 2 {
		return 0
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, "abort")); err != nil {
		return 0
	}
	var cp rmq.Checkpoint // missing or short: zeros, nothing matches
	if b, err := storefile.ReadFile(filepath.Join(cfg.Root, "checkpoint")); err == nil && len(b) >= rmq.CheckpointSize {
		cp, _ = rmq.DecodeCheckpoint(b[:rmq.CheckpointSize], 0)
	}
	minTS := cp.MinTimestamp()
	for i := len(lay.segs) - 1; i >= 0; i-- {
		if ts, ok := firstStoreTimestamp(lay.segs[i].path); ok && ts != 0 && ts <= minTS {
			return i
		}
	}
	return 0
}

// firstStoreTimestamp reads what isMappedFileMatchedRecover reads at the
// start of a commitlog file: the magic (4.9.7 takes only v1; a v2 record
// exists only in a 5.x store, whose broker takes both) and the store
// timestamp at 4+4+4+4+4+8+8+4+8+bornHostLength. No CRC or size check:
// the broker does none. ok is false when the file cannot be read there
// or the magic is not a message's.
func firstStoreTimestamp(path string) (int64, bool) {
	f, err := storefile.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var b [68 + 8]byte
	if n, _ := f.ReadAt(b[:], 0); n < len(b) {
		return 0, false
	}
	magic := binary.BigEndian.Uint32(b[4:])
	if magic != rmq.MagicMessageV1 && magic != rmq.MagicMessageV2 {
		return 0, false
	}
	born := 8
	if int32(binary.BigEndian.Uint32(b[36:]))&rmq.FlagBornHostV6 != 0 {
		born = 20
	}
	pos := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born
	return int64(binary.BigEndian.Uint64(b[pos:])), true
}
