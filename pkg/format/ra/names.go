package ra

// File names (ra_lib:zpad_filename, ra_snapshot:make_snapshot_dir):
//
//	WAL      <N>.wal       N zero-padded to 8 digits (ra < 2.16, RabbitMQ < 4.1)
//	                       or 16 digits (ra >= 2.16 renames the 8-digit ones on start)
//	segment  <N>.segment   the same widths
//	snapshot snapshots/<Term>_<Index>/snapshot.dat, 16 upper-case hex digits each
//	checkpoint checkpoints/<Term>_<Index>/snapshot.dat (ra >= 2.14)
//
// "~8..0B" pads to at least 8 digits: the 100 000 000th file has 9.

import (
	"fmt"
	"strconv"
	"strings"
)

// Name widths of the two ra generations.
const (
	NameWidthV1 = 8  // ra 2.0-2.15
	NameWidthV2 = 16 // ra 2.16+
)

// Other fixed names in a ra data dir.
const (
	ConfigFile        = "config"
	SnapshotsDir      = "snapshots"
	CheckpointsDir    = "checkpoints"
	NamesDETS         = "names.dets"
	MetaDETS          = "meta.dets"
	UpgradeMarkerFile = "segment_name_upgrade_marker" // ra 2.16: the 8 -> 16 digit rename is done
)

// FileNumber is a parsed WAL or segment file name.
type FileNumber struct {
	N     uint64
	Width int // digits in the name: 8 or 16 as ra writes them (more for large N)
}

// ParseFileName parses "<digits>.<ext>" for ext "wal" or "segment".
func ParseFileName(name, ext string) (FileNumber, bool) {
	stem, ok := strings.CutSuffix(name, "."+ext)
	if !ok || len(stem) < NameWidthV1 || len(stem) > 20 {
		return FileNumber{}, false
	}
	for _, c := range stem {
		if c < '0' || c > '9' {
			return FileNumber{}, false
		}
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	if err != nil {
		return FileNumber{}, false
	}
	return FileNumber{N: n, Width: len(stem)}, true
}

// FileName formats n the way ra of the given width generation does.
func FileName(n uint64, width int, ext string) string {
	return fmt.Sprintf("%0*d.%s", width, n, ext)
}

// SnapshotDirName is ra's <Term>_<Index> in 16 upper-case hex digits.
func SnapshotDirName(term, index uint64) string {
	return fmt.Sprintf("%016X_%016X", term, index)
}

// ParseSnapshotDirName parses a snapshot or checkpoint dir name.
func ParseSnapshotDirName(name string) (term, index uint64, ok bool) {
	t, i, found := strings.Cut(name, "_")
	if !found || len(t) != 16 || len(i) != 16 {
		return 0, 0, false
	}
	tv, err1 := strconv.ParseUint(t, 16, 64)
	iv, err2 := strconv.ParseUint(i, 16, 64)
	return tv, iv, err1 == nil && err2 == nil
}
