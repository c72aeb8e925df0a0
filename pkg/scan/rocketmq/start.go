package rocketmq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan/cqueue"
)

// recStart is where the scan walks the commitlog from to find the
// recovery end, and what it knows of that start.
type recStart struct {
	i      int    // index in lay.segs of the file the walk starts at
	named  bool   // the start file is known: merge writes recovery_start_file
	desc   string // how the broker picks it, for the findings on earlier files
	normal bool   // recoverNormally (no abort file), else recoverAbnormally
	// unknown, when set, says which assumption is missing: the two
	// possible starts give different ends, the walk starts at the
	// earlier one (i) and the end it finds is a lower bound; waitsOn
	// names what would tell.
	unknown, waitsOn string
	// decided: the scan's rule picked the start (an abnormal recovery of
	// a data dir with two files or more, or a named normal start); Verify
	// takes it as its own (Config.onStart).
	decided bool
	// maybe (abnormal only): the files after the start whose first bytes
	// could not be read; recoverAbnormally may start at the last of them.
	maybe []string
	// cpUnread (abnormal only): the checkpoint, whose min timestamp picks
	// the start, could not be read: the walk is from file 0, and a stop
	// with data in later files gives only a lower bound (a start at one
	// of them walks past it).
	cpUnread bool
}

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
// clean is true when there is no abort file (and a data dir with two
// files or more): recoverNormally's start is then picked after the walk
// (normalStart), and the walk must not stop before the last file.
// Without a data dir (single files) it is 0, not decided. The files
// after the start whose first bytes could not be read are st.maybe: the
// broker may start at one of them.
func recoveryStart(cfg *Config, lay *layout) (st recStart, clean bool) {
	if cfg.Root == "" || len(cfg.Files) > 0 || len(lay.segs) < 2 {
		return recStart{desc: "the abnormal recovery"}, false
	}
	if _, err := os.Stat(filepath.Join(cfg.Root, "abort")); err != nil {
		return recStart{normal: true}, true
	}
	cp, _, cpErr := readCheckpointErr(cfg.Root)
	if cpErr != nil {
		// The start depends on the checkpoint's min timestamp: walk from
		// file 0, and the first stop gives only a lower bound.
		return recStart{desc: "the abnormal recovery", cpUnread: true}, false
	}
	minTS := cp.MinTimestamp()
	st = recStart{desc: "the abnormal recovery", decided: true}
	var maybe []string
	for i := len(lay.segs) - 1; i >= 0; i-- {
		ts, ok, err := firstStoreTimestamp(lay.segs[i].path)
		if ok && ts != 0 && ts <= minTS {
			st.i, st.named = i, i > 0
			break
		}
		if err != nil {
			maybe = append(maybe, lay.segs[i].rel)
		}
	}
	for _, m := range maybe { // files after st.i, from the last back
		if m != lay.segs[st.i].rel {
			st.maybe = append(st.maybe, m)
		}
	}
	return st, false
}

// readCheckpoint reads the checkpoint file; missing or short: zeros.
func readCheckpoint(root string) rmq.Checkpoint {
	cp, _, _ := readCheckpointErr(root)
	return cp
}

// readCheckpointErr is readCheckpoint with whether the file held a whole
// checkpoint (present) and the error of one that is there but cannot be
// read (permission, a dir or FIFO in its place): nil when it was read, or
// is missing (the broker then starts from zeros). The scan's start rules
// and verify's checks read it through here.
func readCheckpointErr(root string) (cp rmq.Checkpoint, present bool, err error) {
	b, err := storefile.ReadFile(filepath.Join(root, "checkpoint"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return cp, false, err
	}
	if len(b) >= rmq.CheckpointSize {
		if c, derr := rmq.DecodeCheckpoint(b[:rmq.CheckpointSize], 0); derr == nil {
			cp, present = c, true
		}
	}
	return cp, present, nil
}

// trace5xFile is a file or dir only a 5.x broker makes in its data dir
// (DefaultMessageStore makes both at start), "" when neither is there.
func trace5xFile(root string) string {
	for _, p := range []string{"abort.bak", "compaction"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			return p
		}
	}
	return ""
}

// normalStart picks the file recoverNormally starts at after a clean
// shutdown (no abort file), from the walk's per-file results. The two
// generations differ (CommitLog.recoverNormally):
//
//   - 4.9.7: index = mappedFiles.size() - 3, 0 if negative;
//   - 5.3.3: from the last file back, while index > 0, the first file
//     whose fileFromOffset <= maxPhyOffsetOfConsumeQueue (the max over
//     all consume queues of their recovered last unit's offset + size,
//     ConsumeQueueStore.getMaxPhyOffsetInConsumeQueue); file 0 if none.
//
// The files before it are neither read nor truncated. When no file
// before the last stops the walk, every start gives the same end and
// nothing is read (start 0, not named). Else the version decides: "5.x"
// when the store has a 5.x-only trace storeVersion5 finds cheaply; no
// trace proves 4.x, so otherwise both rules are tried and, when they give
// different ends (a stop between the two start files), the end is
// unknown: the walk from the earlier start gives a lower bound.
func normalStart(cfg *Config, lay *layout, results []*fileResult) recStart {
	n := len(results)
	firstStop := func(from int) int {
		for i := from; i < n-1; i++ {
			if fr := results[i]; fr.err != nil || !fr.blank {
				return i
			}
		}
		return n - 1
	}
	if i := firstStop(0); i == n-1 || results[i].err != nil {
		// No file before the last stops the walk: every start gives the
		// same end. Or the first stop is a file that could not be read:
		// walking from file 0 makes the end a lower bound at it, so what
		// points into it or past it is unknown, not lost, whichever file
		// the recovery starts at (it may keep that file unread).
		return recStart{normal: true}
	}
	name := func(i int) string { return lay.segs[i].rel }
	s4 := max(n-3, 0)
	s5, cqWhy := -1, ""
	cqMax, waits, err := cqMaxPhy(cfg.Root)
	if err == nil {
		s5 = 0
		for i := n - 1; i > 0; i-- {
			if lay.segs[i].base <= cqMax {
				s5 = i
				break
			}
		}
	} else {
		cqWhy = err.Error()
	}
	rule5 := fmt.Sprintf("5.x recoverNormally: the last file at or before the consume queues' max offset %d", cqMax)
	rule4 := "4.x recoverNormally: the third file from the last"
	ver, evidence := storeVersion5(cfg, lay)
	switch {
	case ver && s5 >= 0:
		return recStart{i: s5, named: true, decided: true, normal: true, desc: fmt.Sprintf("%s (store version 5.x: %s)", rule5, evidence)}
	case ver:
		return recStart{i: 0, normal: true, desc: "5.x recoverNormally",
			unknown: fmt.Sprintf("the 5.x normal recovery starts at the last commitlog file at or before the consume queues' max offset, which could not be read (%s)", cqWhy),
			waitsOn: waits}
	case s5 < 0:
		return recStart{i: 0, normal: true, desc: rule4 + ", or at the file the consume queues give (5.x)",
			unknown: fmt.Sprintf("the store version is not known (no 5.x trace; none proves 4.x): 4.x recoverNormally starts at %s, 5.x at the last commitlog file at or before the consume queues' max offset, which could not be read (%s)", name(s4), cqWhy),
			waitsOn: waits}
	}
	lo, hi := min(s4, s5), max(s4, s5)
	desc := fmt.Sprintf("%s (%s) or %s (%s); the store version is not known", rule4, name(s4), rule5, name(s5))
	if s4 == s5 {
		return recStart{i: s4, named: true, decided: true, normal: true, desc: desc}
	}
	if firstStop(lo) >= hi { // the walk from lo reaches hi: the same end
		return recStart{i: lo, normal: true, desc: desc}
	}
	return recStart{i: lo, normal: true, desc: desc,
		unknown: fmt.Sprintf("the store version is not known (no 5.x trace; none proves 4.x): 4.x recoverNormally starts at %s, 5.x at %s (the last file at or before the consume queues' max offset %d), and the walk stops between the two", name(s4), name(s5), cqMax),
		waitsOn: "store version (4.x or 5.x)"}
}

// storeVersion5 reports a 5.x-only trace found without reading records:
// checkpoint fields 24/32 set, abort.bak or compaction/ in the data dir
// (DefaultMessageStore 5.x makes both at start), a V2 record at the start
// of a commitlog file. Verify's versionGuess also counts V2 records,
// property CRCs and trailing separators inside files.
func storeVersion5(cfg *Config, lay *layout) (bool, string) {
	if readCheckpoint(cfg.Root).Has5xFields() {
		return true, "checkpoint fields 24/32 set"
	}
	if p := trace5xFile(cfg.Root); p != "" {
		return true, p + " present"
	}
	for _, s := range lay.segs {
		if magic, ok := firstMagic(s.path); ok && magic == rmq.MagicMessageV2 {
			return true, s.rel + " starts with a V2 record"
		}
	}
	return false, ""
}

// cqMaxPhy is maxPhyOffsetOfConsumeQueue as DefaultMessageStore.recover
// (5.3.3) gets it: the max over all file consume queues of
// ConsumeQueue.recover's maxPhysicOffset (cqueue.Queue.RecoverMaxPhy),
// -1 with none. waits names what could not be read when err is
// set: a RocksDB consume queue, batch consume queues (not read here) or a
// queue file.
func cqMaxPhy(root string) (mx int64, waits string, err error) {
	if _, ok := cqueue.RocksDB(root); ok {
		return 0, cqueue.Dir, cqueue.ErrRocksDB
	}
	if ents, err := storefile.ReadDir(filepath.Join(root, "batchconsumequeue")); err == nil && len(ents) > 0 {
		return 0, "batchconsumequeue", errors.New("batchconsumequeue/ holds batch consume queues, which this scan does not read")
	}
	qs, err := cqueue.List(root)
	if err != nil {
		return 0, cqueue.Dir, err
	}
	mx = -1
	for _, q := range qs {
		last, err := q.RecoverMaxPhy()
		if ue := (*cqueue.UnreadError)(nil); errors.As(err, &ue) {
			return 0, ue.Rel, err
		}
		if err != nil {
			return 0, q.Rel, err
		}
		mx = max(mx, last)
	}
	return mx, "", nil
}

// firstStoreTimestamp reads what isMappedFileMatchedRecover reads at the
// start of a commitlog file: the magic (4.9.7 takes only v1; a v2 record
// exists only in a 5.x store, whose broker takes both) and the store
// timestamp at 4+4+4+4+4+8+8+4+8+bornHostLength. No CRC or size check:
// the broker does none. ok is false when the file cannot be read there
// or the magic is not a message's; err is set when it could not be read
// (not when it is too short): then whether it matches is unknown.
func firstStoreTimestamp(path string) (int64, bool, error) {
	f, err := storefile.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var b [68 + 8]byte
	if n, err := f.ReadAt(b[:], 0); n < len(b) {
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return 0, false, err
	}
	magic := binary.BigEndian.Uint32(b[4:])
	if magic != rmq.MagicMessageV1 && magic != rmq.MagicMessageV2 {
		return 0, false, nil
	}
	born := 8
	if int32(binary.BigEndian.Uint32(b[36:]))&rmq.FlagBornHostV6 != 0 {
		born = 20
	}
	pos := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born
	return int64(binary.BigEndian.Uint64(b[pos:])), true, nil
}

// firstMagic reads the magic of the record at offset 0 of a commitlog file.
func firstMagic(path string) (uint32, bool) {
	f, err := storefile.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var b [8]byte
	if n, _ := f.ReadAt(b[:], 0); n < len(b) {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[4:]), true
}
