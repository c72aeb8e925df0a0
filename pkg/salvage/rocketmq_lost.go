package salvage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// RocketMQ lost: the messages a consumer will never get after the
// broker's next start. Recovery drops every consume queue unit at or past
// the recovery end (the commitlog is truncated there and the queues
// follow), so a unit pointing there loses its message; a unit whose record
// is gone (no valid record starts at its commitlog offset) has nothing to
// export and is listed as missing.

// lostUnit is one consume queue unit whose message is lost.
type lostUnit struct {
	topic       string
	queueID     int32
	queueOffset int64
	unit        rmq.CQUnit
}

// lostUnits walks consumequeue/<topic>/<queueId>/<file> under root; walked
// are the physical offsets of the valid records (sorted), end the recovery
// end (-1 if unknown). Units past end whose record is walked are returned
// to export; the others that point at no record are missing, except those
// at or past unknownFrom (>= 0: where a commitlog file could not be read),
// whose record may be in the unread bytes: counted as unknown. A consume
// queue file that cannot be read (permission, I/O error, a dir or FIFO
// under its name) is named in unread: its units are unknown, the other
// files are judged as usual.
func lostUnits(root string, walked []int64, end, unknownFrom int64) (export []lostUnit, missing []MissingRef, unknown int, unread [][2]string, err error) {
	cq := filepath.Join(root, "consumequeue")
	topics, err := storefile.ReadDir(cq)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, nil, nil
	}
	if err != nil {
		return nil, nil, 0, nil, err
	}
	has := func(phy int64) bool {
		_, ok := slices.BinarySearch(walked, phy)
		return ok
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		qs, err := storefile.ReadDir(filepath.Join(cq, t.Name()))
		if err != nil {
			return nil, nil, 0, nil, err
		}
		for _, q := range qs {
			qid, err := strconv.ParseInt(q.Name(), 10, 32)
			if err != nil || !q.IsDir() {
				continue
			}
			dir := filepath.Join(cq, t.Name(), q.Name())
			files, err := storefile.ReadDir(dir)
			if err != nil {
				return nil, nil, 0, nil, err
			}
			for _, f := range files {
				base, err := strconv.ParseInt(f.Name(), 10, 64)
				if err != nil {
					continue
				}
				var b []byte
				if storefile.IsRegular(dir, f) {
					b, err = storefile.ReadFile(filepath.Join(dir, f.Name()))
				} else if nr, ok := storefile.Irregular(dir, f); ok {
					err = nr
				} else {
					continue
				}
				if err != nil {
					unread = append(unread, [2]string{scan.Rel(root, filepath.Join(dir, f.Name())), err.Error()})
					continue
				}
				for off := 0; off+rmq.CQUnitSize <= len(b); off += rmq.CQUnitSize {
					u, err := rmq.DecodeCQUnit(b[off:off+rmq.CQUnitSize], int64(off))
					if err != nil || u.IsZero() || u.IsPlaceholder() || !u.Valid() {
						continue
					}
					lu := lostUnit{topic: t.Name(), queueID: int32(qid), queueOffset: (base + int64(off)) / rmq.CQUnitSize, unit: u}
					past := end >= 0 && u.CommitLogOffset >= end
					switch {
					case past && has(u.CommitLogOffset):
						export = append(export, lu)
					case !has(u.CommitLogOffset) && unknownFrom >= 0 && u.CommitLogOffset >= unknownFrom:
						unknown++
					case !has(u.CommitLogOffset):
						missing = append(missing, lu.missing(past))
					}
				}
			}
		}
	}
	return export, missing, unknown, unread, nil
}

func (lu lostUnit) missing(past bool) MissingRef {
	why := "no valid record starts at its commitlog offset"
	if past {
		why += " (at or past the recovery end)"
	}
	p, qo := lu.unit.CommitLogOffset, lu.queueOffset
	return MissingRef{Topic: lu.topic, QueueID: &lu.queueID, QueueOffset: &qo, PhyOffset: &p,
		Queues: []string{fmt.Sprintf("%s/%d", lu.topic, lu.queueID)}, Why: why}
}

func (lu lostUnit) why(end int64) string {
	return fmt.Sprintf("lost: consume queue %s/%d unit %d points at phy %d, at or past the recovery end %d: the broker's recovery drops the unit and the record",
		lu.topic, lu.queueID, lu.queueOffset, lu.unit.CommitLogOffset, end)
}
