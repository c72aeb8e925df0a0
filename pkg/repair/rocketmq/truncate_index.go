package rocketmq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// trIndexHint is the command that fixes an index file listed in a
// TruncateReport.
const trIndexHint = "storectl rebuild-index"

// indexFiles lists the index files with entries (or a header end) at or
// past the recovery end. It never plans an action on them.
func (t *trPlanner) indexFiles() error {
	dir := filepath.Join(t.root, "index")
	ents, err := storefile.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if !storefile.IsRegular(dir, e) {
			continue
		}
		rel := "index/" + e.Name()
		fi, err := t.indexFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.note("%s: %v; check it with storectl verify, or run %s", rel, err, trIndexHint)
			continue
		}
		fi.Path = rel
		if fi.EntriesBeyond > 0 || (fi.Entries > 0 && fi.EndPhyOffset >= t.end) {
			fi.Hint = trIndexHint
			t.rep.IndexFiles = append(t.rep.IndexFiles, fi)
		}
	}
	return nil
}

// indexFile reads the header and counts the entries in use whose phy
// offset is at or past the end, reading the entry area in 1 MiB chunks.
func (t *trPlanner) indexFile(p string) (TruncateIndexFile, error) {
	var fi TruncateIndexFile
	f, err := storefile.Open(p)
	if err != nil {
		return fi, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fi, err
	}
	lay, err := rmq.IndexLayoutFromSize(st.Size(), 0)
	if err != nil {
		return fi, fmt.Errorf("size %d does not match an index file layout", st.Size())
	}
	var hb [rmq.IndexHeaderSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return fi, err
	}
	h, err := rmq.DecodeIndexHeader(hb[:], 0)
	if err != nil {
		return fi, err
	}
	fi.EndPhyOffset = h.EndPhyOffset
	used := min(max(int64(h.IndexCount), 1), lay.Entries) // entry 0 is never written
	fi.Entries = used - 1
	buf := make([]byte, (trChunk/rmq.IndexEntrySize)*rmq.IndexEntrySize)
	for n := int64(1); n < used; {
		if err := t.ctx.Err(); err != nil {
			return fi, err
		}
		k := min(int64(len(buf)/rmq.IndexEntrySize), used-n)
		b := buf[:k*rmq.IndexEntrySize]
		if got, err := f.ReadAt(b, lay.EntryOffset(n)); got < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fi, err
		}
		for i := int64(0); i < k; i++ {
			e, _ := rmq.DecodeIndexEntry(b[i*rmq.IndexEntrySize:], lay.EntryOffset(n+i))
			if e.PhyOffset >= t.end {
				fi.EntriesBeyond++
			}
		}
		n += k
	}
	return fi, nil
}
