package rocketmq

import (
	"bufio"
	"os"
	"path/filepath"
	"time"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// indexGen writes index files as the broker's IndexService does while it
// dispatches (docs/formats/rocketmq.md §5): every record's keys, in
// commitlog order, into the last index file that is not full, a new one
// seeded with the previous file's end values when it is. Files are named
// by the store time of the record that created them, in UTC.
type indexGen struct {
	dir      string
	lay      rmq.IndexLayout
	hdr      rmq.IndexHeader
	slots    []int32
	f        *os.File
	w        *bufio.Writer
	open     bool
	lastFull int64 // endTimestamp of the last full file (the checkpoint's indexMsgTimestamp)
	keys     rmq.IndexKeyHasher
	vals     [len(rmq.DispatchProps)][]byte
	found    [len(rmq.DispatchProps)]bool
}

func newIndexGen(root string, lay rmq.IndexLayout) (*indexGen, error) {
	dir := filepath.Join(root, "index")
	return &indexGen{dir: dir, lay: lay}, os.MkdirAll(dir, 0o755)
}

// record indexes m, the record at phy (IndexService.buildIndex).
func (g *indexGen) record(m *rmq.Message, phy int64) error {
	if err := g.ensure(m.StoreTimestamp); err != nil {
		return err
	}
	if phy < g.hdr.EndPhyOffset {
		return nil
	}
	rmq.LookupProperties(m.Properties, rmq.DispatchProps[:], g.vals[:], g.found[:])
	var err error
	rmq.ForEachIndexKey(m, g.vals[:], g.found[:], func(k []byte) {
		if err == nil {
			err = g.ensure(m.StoreTimestamp)
		}
		if err != nil {
			return
		}
		e := rmq.PutIndexKey(&g.hdr, g.slots, g.keys.Hash(m.Topic, k), phy, m.StoreTimestamp)
		var b [rmq.IndexEntrySize]byte
		_, err = g.w.Write(rmq.AppendIndexEntry(b[:0], e))
	})
	return err
}

// ensure makes the current file one that is not full.
func (g *indexGen) ensure(ts int64) error {
	if g.open && g.hdr.IndexCount < int32(g.lay.Entries) {
		return nil
	}
	prev := g.hdr
	if g.open {
		g.lastFull = g.hdr.EndTimestamp
		if err := g.close(); err != nil {
			return err
		}
	}
	g.hdr = rmq.IndexHeader{IndexCount: 1}
	if prev.EndPhyOffset > 0 {
		g.hdr.BeginPhyOffset, g.hdr.EndPhyOffset = prev.EndPhyOffset, prev.EndPhyOffset
	}
	if prev.EndTimestamp > 0 {
		g.hdr.BeginTimestamp, g.hdr.EndTimestamp = prev.EndTimestamp, prev.EndTimestamp
	}
	if g.slots == nil {
		g.slots = make([]int32, g.lay.Slots)
	} else {
		clear(g.slots)
	}
	f, err := os.Create(filepath.Join(g.dir, rmq.IndexFileName(ts, time.UTC)))
	if err != nil {
		return err
	}
	if _, err := f.Seek(g.lay.EntryOffset(1), 0); err != nil {
		f.Close()
		return err
	}
	g.f, g.w, g.open = f, bufio.NewWriterSize(f, 1<<20), true
	return nil
}

// close writes the header and slots of the current file and sizes it to
// the layout (the unused entries stay a hole).
func (g *indexGen) close() error {
	if !g.open {
		return nil
	}
	g.open = false
	err := g.w.Flush()
	if err == nil {
		b := rmq.AppendIndexHeader(make([]byte, 0, rmq.IndexHeaderSize+len(g.slots)*rmq.IndexSlotSize), g.hdr)
		for _, s := range g.slots {
			b = rmq.AppendIndexSlot(b, s)
		}
		_, err = g.f.WriteAt(b, 0)
	}
	if err == nil {
		err = g.f.Truncate(g.lay.Size())
	}
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeCheckpoint writes the checkpoint a clean broker leaves: the store
// time of the last record (physic) and of the last one dispatched to a
// consume queue (logics), and the end time of the last full index file.
func writeCheckpoint(root string, physic, logics, index int64) error {
	b := rmq.AppendCheckpoint(make([]byte, 0, 4096), rmq.Checkpoint{PhysicMsgTimestamp: physic,
		LogicsMsgTimestamp: logics, IndexMsgTimestamp: index})
	return os.WriteFile(filepath.Join(root, "checkpoint"), b[:4096], 0o644)
}
