package rabbitmq

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	"github.com/storectl/storectl/pkg/repair"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// cutAction builds the truncate-file of the current file f at its valid
// end, with what the cut destroys; bad counts the frames without the
// write marker after the valid end.
func cutAction(root string, v *rscan.VHostScan, f *rscan.FileScan, bad int64) (repair.Action, error) {
	rel := filepath.FromSlash(f.Path)
	if !filepath.IsLocal(rel) {
		return repair.Action{}, fmt.Errorf("%s is not inside the data dir %s", f.Path, root)
	}
	tail := f.Size - f.ValidEnd
	a := repair.Action{Op: repair.OpTruncateFile, Path: rel, NewSize: f.ValidEnd}
	switch {
	case f.Torn != nil:
		a.Reason = rscan.CodeTornTail
		id, size, err := tailHeader(filepath.Join(root, rel), f.ValidEnd, tail)
		if err != nil {
			return a, err
		}
		note := fmt.Sprintf("torn record at %d: %d of its %d bytes were written", f.ValidEnd, tail, size)
		if size == 0 {
			note = fmt.Sprintf("torn record at %d: only %d bytes of its size field were written", f.ValidEnd, tail)
		}
		var ids []string
		if id != "" {
			ids = []string{id}
			qs, err := v.QueuesOf(id)
			if err != nil {
				return a, err
			}
			if len(qs) > 0 {
				note += fmt.Sprintf("; msg %s is referenced by %s, which drop it at the next start (its body is incomplete)", id, strings.Join(qs, ", "))
			} else if v.Queues != nil {
				note += fmt.Sprintf("; msg %s is referenced by no queue (never confirmed)", id)
			}
		}
		a.Lost = repair.Loss{Records: 1 + bad, MsgIDs: ids, Note: note}
	case f.End == "zero":
		a.Reason = rscan.CodeZeroTail
		a.Lost = repair.Loss{Records: bad, Note: fmt.Sprintf("%d zero bytes after the last record", tail)}
	default:
		a.Reason = rscan.CodeGarbageTail
		a.Lost = repair.Loss{Records: bad, Note: fmt.Sprintf("%d bytes after the last record in which no record starts (no frame with a size, an ETF body and the 0xFF marker)", tail)}
	}
	if bad > 0 {
		a.Lost.Note += fmt.Sprintf("; %d frame(s) without the 0xFF write marker (writes that never completed)", bad)
	}
	return a, nil
}

// tailHeader reads the size field and the msg id of the torn record at
// off, as far as they were written: id is "" when fewer than the 24
// header bytes exist, size is the declared Size + 9 (0 when unknown).
func tailHeader(p string, off, n int64) (id string, size uint64, err error) {
	f, err := storefile.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var hdr [rfmt.RDQHeaderLen]byte
	k, err := f.ReadAt(hdr[:min(n, int64(len(hdr)))], off)
	if err != nil && err != io.EOF {
		return "", 0, err
	}
	if k >= rfmt.RDQSizeFieldLen {
		size = binary.BigEndian.Uint64(hdr[:]) + rfmt.RDQOverhead
	}
	if k == len(hdr) {
		id = hex.EncodeToString(hdr[rfmt.RDQSizeFieldLen:])
	}
	return id, size, nil
}
