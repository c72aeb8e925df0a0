package rocketmq

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// idxbFile is one rebuilt index file while it is being written: the slots
// live in memory, entries are streamed to the staged file in order.
type idxbFile struct {
	hdr      rmq.IndexHeader
	created  int64 // store timestamp of the record whose dispatch created it
	slots    []int32
	path     string // staged file
	f        *os.File
	w        *bufio.Writer
	name     string // final name under index/
	full     bool
	firstRec int64 // phy offset of the first indexed record (-1 if none)
}

// idxbBuilder mirrors IndexService.buildIndex / IndexFile.putKey.
type idxbBuilder struct {
	lay   rmq.IndexLayout
	stage string
	files []*idxbFile
	cur   *idxbFile
	sink  int32 // touch's loads end here, so they are not optimized away
}

// record indexes the keys of one record (IndexService.buildIndex), in
// commitlog order.
func (b *idxbBuilder) record(r *rbRecord, keys []int32) error {
	// retryGetAndCreateIndexFile runs for every dispatched record, before
	// the ROLLBACK check, so a full file rolls over even for a record
	// without keys.
	if err := b.ensure(r.storeTS); err != nil {
		return err
	}
	if r.phy < b.cur.hdr.EndPhyOffset {
		return nil // buildIndex: already indexed
	}
	for _, h := range keys {
		if err := b.ensure(r.storeTS); err != nil { // putKey failed: file full
			return err
		}
		if err := b.put(h, r.phy, r.storeTS); err != nil {
			return err
		}
	}
	return nil
}

// ensure makes cur the last index file that is not full, creating one
// seeded with the previous file's end offset and timestamp.
func (b *idxbBuilder) ensure(ts int64) error {
	if b.cur != nil && b.cur.hdr.IndexCount < int32(b.lay.Entries) {
		return nil
	}
	var prev rmq.IndexHeader
	if b.cur != nil {
		prev = b.cur.hdr
		b.cur.full = true
		if err := b.closeCur(); err != nil {
			return err
		}
	}
	nf := &idxbFile{created: ts, slots: make([]int32, b.lay.Slots), firstRec: -1}
	nf.hdr.IndexCount = 1
	if prev.EndPhyOffset > 0 {
		nf.hdr.BeginPhyOffset, nf.hdr.EndPhyOffset = prev.EndPhyOffset, prev.EndPhyOffset
	}
	if prev.EndTimestamp > 0 {
		nf.hdr.BeginTimestamp, nf.hdr.EndTimestamp = prev.EndTimestamp, prev.EndTimestamp
	}
	nf.path = filepath.Join(b.stage, fmt.Sprintf("build-%06d", len(b.files)))
	f, err := os.OpenFile(nf.path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Seek(b.lay.EntryOffset(1), 0); err != nil {
		f.Close()
		return err
	}
	nf.f, nf.w = f, bufio.NewWriterSize(f, 1<<20)
	b.files = append(b.files, nf)
	b.cur = nf
	return nil
}

// idxbTouchAhead is how many upcoming keys touch loads the slots of: the
// slot table (20 MB at the defaults) is hit at random, and independent
// loads of 128 slots overlap their cache misses where put's loads, one
// after the other, would wait for each.
const idxbTouchAhead = 128

// touch loads the current file's slots of keys into the cache.
func (b *idxbBuilder) touch(keys []int32) {
	if b.cur == nil {
		return
	}
	var s int32
	slots := b.cur.slots
	for _, k := range keys {
		if k >= 0 {
			s += slots[int64(k)%b.lay.Slots]
		}
	}
	b.sink += s
}

// put is IndexFile.putKey for a file known not to be full.
func (b *idxbBuilder) put(keyHash int32, phy, ts int64) error {
	f := b.cur
	if f.hdr.IndexCount <= 1 {
		f.firstRec = phy
	}
	e := rmq.PutIndexKey(&f.hdr, f.slots, keyHash, phy, ts)
	var buf [rmq.IndexEntrySize]byte
	_, err := f.w.Write(rmq.AppendIndexEntry(buf[:0], e))
	return err
}

// closeCur writes the header and slots of cur, sizes the file to the
// layout (the entry tail stays a sparse run of zeros) and closes it.
func (b *idxbBuilder) closeCur() error {
	f := b.cur
	if f == nil || f.f == nil {
		return nil
	}
	defer func() {
		if f.f != nil {
			f.f.Close()
		}
		f.f, f.w = nil, nil
	}()
	if err := f.w.Flush(); err != nil {
		return err
	}
	// The header, then the slots (20 MB at the broker's defaults) a chunk
	// at a time; a chunk of empty slots is left a hole (the file is cut
	// to its full size below, so it reads as zeros).
	chunk := rmq.AppendIndexHeader(make([]byte, 0, idxbChunk), f.hdr)
	at, used := int64(0), true
	for i, v := range f.slots {
		chunk = rmq.AppendIndexSlot(chunk, v)
		used = used || v != 0
		if len(chunk)+rmq.IndexSlotSize <= cap(chunk) && i < len(f.slots)-1 {
			continue
		}
		if used {
			if _, err := f.f.WriteAt(chunk, at); err != nil {
				return err
			}
		}
		at += int64(len(chunk))
		chunk, used = chunk[:0], false
	}
	if len(f.slots) == 0 {
		if _, err := f.f.WriteAt(chunk, 0); err != nil {
			return err
		}
	}
	if err := f.f.Truncate(b.lay.Size()); err != nil {
		return err
	}
	f.slots = nil
	c := f.f
	f.f = nil
	return c.Close()
}

// idxbChunk is how many bytes of an index file's header and slots
// closeCur writes at once.
const idxbChunk = 64 << 10
