package rocketmq

import (
	"encoding/binary"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/storectl/storectl/pkg/scan"
)

// recTable holds the compact records (vrec) the cross-file checks look
// up, in phy order, in two unlinked temp files instead of the heap, so
// verify's memory does not grow with the store. Records reach it in
// blocks of at most recBlockLen: each commitlog file's collector fills a
// block, writes it at the end of the temp files (the collectors of files
// walked in parallel interleave their blocks there) and, when the files
// before its own are done, hands its blocks to the table in file order
// (adopt). The heap keeps one descriptor per block (its place in the
// files, first index and phy, newest store time, the file's topic ids), a
// small LRU of decoded blocks and one window over the key hash file. The
// consume queue and index walks look records up in increasing phy order
// (per queue group, per index file), so nearly every lookup hits a cached
// block.
type recTable struct {
	f, hf  *os.File // records (recSlot or recSlotSmall bytes each), key hashes (4 bytes each)
	mu     sync.Mutex
	recEnd int64 // bytes reserved in f
	hEnd   int64 // hashes reserved in hf
	blocks []recBlockInfo
	n      int   // records adopted
	nh     int64 // hashes written
	err    error // first I/O error; lookups then find nothing
	cache  [recCacheBlocks]recBlock
	mru    *recBlock // the block returned last
	lastBI int       // the block blockOf found last
	tick   uint64
	hwin   []byte // window over the hash file
	hwOff  int64  // first hash in hwin
	hwN    int64  // hashes in hwin
	hout   []int32
	raw    []byte // read buffer of one block
}

// recBlockInfo describes one block of records in the temp files.
type recBlockInfo struct {
	off      int64   // of its first record in f
	hashBase int64   // index in hf of its first key hash
	first    int     // table index of its first record
	n        int     // records
	firstPhy int64   // phy of its first record
	maxTS    int64   // newest store timestamp in it
	topics   []int32 // the file's topic ids (collector-local) -> the verifier's
	// compact: coded in recSlotSmall bytes a record (encodeBlock), from
	// these bases of queueOff, tagsCode and storeTS.
	compact             bool
	qBase, tBase, sBase int64
}

// recBlock is one cached block of decoded records.
type recBlock struct {
	idx  int // block number; -1 when empty
	used uint64
	recs []vrec
}

const (
	// recSlot is the encoded size of one vrec in a wide block, recSlotSmall
	// in a compact one (encodeBlock).
	recSlot      = 64
	recSlotSmall = 24
	// recBlockLen is the records per block: at most 64 KiB of file, one
	// pread.
	recBlockLen = 1024
	// recCacheBlocks bounds the decoded blocks kept (8 x 64 KiB): enough
	// for the sequential walks and a few stray lookups of damaged units.
	recCacheBlocks = 8
	// hashWindow is the hash file window in hashes (64 KiB): the index
	// walk reads the hashes of records in increasing phy order.
	hashWindow = 16 << 10
)

// newRecTable creates the two temp files (unlinked at once: they vanish
// with the process, whatever happens).
func newRecTable() (*recTable, error) {
	t := &recTable{}
	var err error
	if t.f, err = scan.UnlinkedTemp("storectl-verify-*"); err != nil {
		return nil, err
	}
	if t.hf, err = scan.UnlinkedTemp("storectl-verify-*"); err != nil {
		t.f.Close()
		return nil, err
	}
	for i := range t.cache {
		t.cache[i].idx = -1
	}
	return t, nil
}

// reader returns a table that reads the same records through a cache
// of its own, for a check that runs beside the others (pread of the
// shared files is safe for concurrent use; nothing is written any more).
func (t *recTable) reader() *recTable {
	r := &recTable{f: t.f, hf: t.hf, blocks: t.blocks, n: t.n, nh: t.nh}
	for i := range r.cache {
		r.cache[i].idx = -1
	}
	return r
}

// Close releases the temp files.
func (t *recTable) Close() {
	t.f.Close()
	t.hf.Close()
}

func (t *recTable) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

// blockWriter collects the records of one commitlog file into blocks and
// writes each full block to the table's temp files. Not safe for
// concurrent use; the writers of several files are.
type blockWriter struct {
	t      *recTable
	recs   []vrec  // the block being filled; hashOff is relative to hashes
	hashes []int32 // its records' key hashes
	enc    []byte
	done   []recBlockInfo // written, not yet adopted
}

// add appends r (whose hashOff indexes w.hashes) to the current block.
func (w *blockWriter) add(r vrec) {
	w.recs = append(w.recs, r)
	if len(w.recs) == recBlockLen {
		w.flush()
	}
}

// flush writes the current block, if any.
func (w *blockWriter) flush() {
	if len(w.recs) == 0 {
		return
	}
	t := w.t
	info := recBlockInfo{n: len(w.recs), firstPhy: w.recs[0].phy, maxTS: w.recs[0].storeTS}
	for i := range w.recs {
		info.maxTS = max(info.maxTS, w.recs[i].storeTS)
	}
	b := encodeBlock(w.enc[:0], w.recs, &info)
	hb := len(b)
	le := binary.LittleEndian
	for _, h := range w.hashes {
		b = le.AppendUint32(b, uint32(h))
	}
	w.enc = b
	t.mu.Lock()
	info.off, info.hashBase = t.recEnd, t.hEnd
	t.recEnd += int64(hb)
	t.hEnd += int64(len(w.hashes))
	t.mu.Unlock()
	if _, err := t.f.WriteAt(b[:hb], info.off); err != nil {
		t.fail(err)
	}
	if _, err := t.hf.WriteAt(b[hb:], info.hashBase*4); err != nil {
		t.fail(err)
	}
	w.done = append(w.done, info)
	w.recs, w.hashes = w.recs[:0], w.hashes[:0]
}

// encodeBlock appends the coded records of one block to b and notes the
// form it chose in info: compact (recSlotSmall bytes a record) when the
// block's values fit it, else wide (recSlot bytes, every field whole).
//
// The compact form keeps what a block of adjacent records of one file
// makes small: phy and hashOff follow from the record before (its phy
// plus its size, its hashOff plus its key count), so they take no bytes;
// queueOff, tagsCode and storeTS are 32-bit differences from the block's
// smallest; topic (the file's own id), queueID and sysFlag 16 bits; nhash
// and flags a byte each. On the 2.7 M records of a 1 GiB store of small
// messages the table's file shrinks from 172 MB to 65 MB; its writes and
// reads were about a tenth of verify's CPU.
func encodeBlock(b []byte, recs []vrec, info *recBlockInfo) []byte {
	le := binary.LittleEndian
	r0 := &recs[0]
	qlo, qhi, tlo, thi, slo, shi := r0.queueOff, r0.queueOff, r0.tagsCode, r0.tagsCode, r0.storeTS, r0.storeTS
	var wide uint64 // bits above the compact widths (size: any int32 fits)
	ok := r0.hashOff == 0
	for i := range recs {
		r := &recs[i]
		qlo, qhi = min(qlo, r.queueOff), max(qhi, r.queueOff)
		tlo, thi = min(tlo, r.tagsCode), max(thi, r.tagsCode)
		slo, shi = min(slo, r.storeTS), max(shi, r.storeTS)
		wide |= uint64(uint32(r.topic)|uint32(r.queueID)|uint32(r.sysFlag))>>16 | uint64(r.nhash>>8)
		if i > 0 {
			p := &recs[i-1]
			ok = ok && r.phy == p.phy+int64(p.size) && r.hashOff == p.hashOff+int64(p.nhash)
		}
	}
	const lim = 1<<32 - 1
	if ok && wide == 0 && uint64(qhi)-uint64(qlo) <= lim && uint64(thi)-uint64(tlo) <= lim && uint64(shi)-uint64(slo) <= lim {
		info.compact = true
		info.qBase, info.tBase, info.sBase = qlo, tlo, slo
		at := len(b)
		b = slices.Grow(b, len(recs)*recSlotSmall)[:at+len(recs)*recSlotSmall]
		for i := range recs {
			r := &recs[i]
			e := (*[recSlotSmall]byte)(b[at+i*recSlotSmall:])
			le.PutUint32(e[0:], uint32(r.size))
			le.PutUint32(e[4:], uint32(r.queueOff-qlo))
			le.PutUint32(e[8:], uint32(r.tagsCode-tlo))
			le.PutUint32(e[12:], uint32(r.storeTS-slo))
			le.PutUint16(e[16:], uint16(r.topic))
			le.PutUint16(e[18:], uint16(r.queueID))
			le.PutUint16(e[20:], uint16(r.sysFlag))
			e[22], e[23] = byte(r.nhash), r.flags
		}
		return b
	}
	var slot [recSlot]byte
	for i := range recs {
		r := &recs[i]
		le.PutUint64(slot[0:], uint64(r.phy))
		le.PutUint64(slot[8:], uint64(r.queueOff))
		le.PutUint64(slot[16:], uint64(r.tagsCode))
		le.PutUint64(slot[24:], uint64(r.storeTS))
		le.PutUint64(slot[32:], uint64(r.hashOff))
		le.PutUint32(slot[40:], uint32(r.size))
		le.PutUint32(slot[44:], uint32(r.topic))
		le.PutUint32(slot[48:], uint32(r.queueID))
		le.PutUint32(slot[52:], uint32(r.sysFlag))
		le.PutUint16(slot[56:], r.nhash)
		slot[58] = r.flags
		b = append(b, slot[:]...)
	}
	return b
}

// adopt appends the blocks of w, whose file follows the files adopted
// before it, with the map of its topic ids. It returns the first
// record's table index (-1 when the file had none).
func (t *recTable) adopt(w *blockWriter, topics []int32) int {
	w.flush()
	first := -1
	for _, b := range w.done {
		if first < 0 {
			first = t.n
		}
		b.first, b.topics = t.n, topics
		t.blocks = append(t.blocks, b)
		t.n += b.n
	}
	w.done = w.done[:0]
	return first
}

// finish ends the writing; lookups may follow.
func (t *recTable) finish() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nh = t.hEnd
	return t.err
}

// blockOf returns the number of the block holding record i (0 <= i < n).
func (t *recTable) blockOf(i int) int {
	if b := t.lastBI; b < len(t.blocks) && i >= t.blocks[b].first && i < t.blocks[b].first+t.blocks[b].n {
		return b
	}
	if b := t.lastBI + 1; b < len(t.blocks) && i >= t.blocks[b].first && i < t.blocks[b].first+t.blocks[b].n {
		t.lastBI = b
		return b
	}
	b := sort.Search(len(t.blocks), func(k int) bool { return t.blocks[k].first > i }) - 1
	t.lastBI = max(b, 0)
	return b
}

// block returns block bi, decoded, through the cache.
func (t *recTable) block(bi int) []vrec {
	t.tick++
	if m := t.mru; m != nil && m.idx == bi {
		m.used = t.tick
		return m.recs
	}
	victim := 0
	for i := range t.cache {
		c := &t.cache[i]
		if c.idx == bi {
			c.used, t.mru = t.tick, c
			return c.recs
		}
		if c.used < t.cache[victim].used {
			victim = i
		}
	}
	c := &t.cache[victim]
	c.idx, c.used = -1, t.tick
	if c.recs = t.decode(bi, c.recs); c.recs == nil {
		return nil
	}
	c.idx, t.mru = bi, c
	return c.recs
}

// decode reads block bi and decodes it into dst's storage (nil after a
// read error).
func (t *recTable) decode(bi int, dst []vrec) []vrec {
	info := &t.blocks[bi]
	slot := recSlot
	if info.compact {
		slot = recSlotSmall
	}
	if cap(t.raw) < recBlockLen*recSlot {
		t.raw = make([]byte, recBlockLen*recSlot)
	}
	raw := t.raw[:info.n*slot]
	if err := readFull(t.f, raw, info.off); err != nil {
		if t.err == nil {
			t.err = err
		}
		return nil
	}
	if cap(dst) < recBlockLen {
		dst = make([]vrec, recBlockLen)
	}
	dst = dst[:info.n]
	le := binary.LittleEndian
	if info.compact {
		phy, hashOff := info.firstPhy, info.hashBase
		for i := range dst {
			e := (*[recSlotSmall]byte)(raw[i*recSlotSmall:])
			size, nh := int32(le.Uint32(e[0:])), uint16(e[22])
			dst[i] = vrec{phy: phy, queueOff: info.qBase + int64(le.Uint32(e[4:])), tagsCode: info.tBase + int64(le.Uint32(e[8:])),
				storeTS: info.sBase + int64(le.Uint32(e[12:])), hashOff: hashOff, size: size,
				topic: info.topics[le.Uint16(e[16:])], queueID: int32(le.Uint16(e[18:])), sysFlag: int32(le.Uint16(e[20:])),
				nhash: nh, flags: e[23]}
			phy += int64(size)
			hashOff += int64(nh)
		}
		return dst
	}
	for i := range dst {
		b := raw[i*recSlot : (i+1)*recSlot]
		dst[i] = vrec{phy: int64(le.Uint64(b[0:])), queueOff: int64(le.Uint64(b[8:])), tagsCode: int64(le.Uint64(b[16:])),
			storeTS: int64(le.Uint64(b[24:])), hashOff: info.hashBase + int64(le.Uint64(b[32:])), size: int32(le.Uint32(b[40:])),
			topic: info.topics[le.Uint32(b[44:])], queueID: int32(le.Uint32(b[48:])), sysFlag: int32(le.Uint32(b[52:])),
			nhash: le.Uint16(b[56:]), flags: b[58]}
	}
	return dst
}

// recCursor follows lookups in increasing phy order (an index file's
// entries, which the broker appends in dispatch order) through a decoded
// block of its own: the record found last, or the one after it, is found
// without the table's search and cache.
type recCursor struct {
	blk   []vrec // block bi, decoded (len 0: none)
	buf   []vrec
	bi    int
	first int // table index of blk[0]
	j     int // the record found last in blk
}

// find returns the index of the record starting at phy below n and the
// record (valid until the next call), or -1: from the cursor when phy is
// the record found last or the next one, else through lookup.
func (c *recCursor) find(t *recTable, phy int64, n int, lookup func(int64) int) (int, *vrec) {
	if c.j < len(c.blk) {
		if r := &c.blk[c.j]; r.phy == phy {
			return c.first + c.j, r
		}
		k := c.j + 1
		if k == len(c.blk) && c.bi+1 < len(t.blocks) && c.first+k < n { // the next block's first record
			if c.load(t, c.bi+1) {
				k = 0
			}
		}
		if k < len(c.blk) && c.blk[k].phy == phy && c.first+k < n {
			c.j = k
			return c.first + k, &c.blk[k]
		}
	}
	i := lookup(phy)
	if i < 0 {
		return -1, nil
	}
	if bi := t.blockOf(i); bi >= 0 && (bi != c.bi || len(c.blk) == 0) && !c.load(t, bi) {
		return -1, nil // a read error (t.err)
	} else if bi < 0 {
		return -1, nil
	}
	c.j = i - c.first
	return i, &c.blk[c.j]
}

// load decodes block bi into the cursor (false after a read error).
func (c *recCursor) load(t *recTable, bi int) bool {
	c.buf = t.decode(bi, c.buf[:0])
	if c.buf == nil {
		c.blk = nil
		return false
	}
	c.blk, c.bi, c.first, c.j = c.buf, bi, t.blocks[bi].first, 0
	return true
}

// at returns record i (0 <= i < n).
func (t *recTable) at(i int) vrec {
	if m := t.mru; m != nil && m.idx >= 0 { // the block returned last: most lookups
		if j := i - t.blocks[m.idx].first; j >= 0 && j < len(m.recs) {
			t.tick++
			m.used = t.tick
			return m.recs[j]
		}
	}
	bi := t.blockOf(i)
	if bi < 0 {
		return vrec{}
	}
	b := t.block(bi)
	if j := i - t.blocks[bi].first; j < len(b) {
		return b[j]
	}
	return vrec{}
}

// lastAtOrBefore returns the index of the last record with phy <= p
// among the first n, or -1.
func (t *recTable) lastAtOrBefore(p int64, n int) int {
	bi := sort.Search(len(t.blocks), func(i int) bool { return t.blocks[i].firstPhy > p }) - 1
	if bi < 0 {
		return -1
	}
	b := t.block(bi)
	j := sort.Search(len(b), func(i int) bool { return b[i].phy > p }) - 1
	if j < 0 { // only after a read error
		return -1
	}
	return min(t.blocks[bi].first+j, n-1)
}

// firstAtOrAfter returns the index of the first record with phy >= p, or
// t.n.
func (t *recTable) firstAtOrAfter(p int64) int {
	i := t.lastAtOrBefore(p, t.n)
	if i >= 0 && t.at(i).phy == p {
		return i
	}
	return i + 1
}

// hasHash reports whether h is one of r's key hashes.
func (t *recTable) hasHash(r *vrec, h int32) bool {
	n := int(r.nhash)
	b := t.hashBytes(r)
	if len(b) < 4*n {
		return false
	}
	for i := range n {
		if int32(binary.LittleEndian.Uint32(b[i*4:])) == h {
			return true
		}
	}
	return false
}

// hashes returns the key hashes of r (valid until the next call).
func (t *recTable) hashes(r *vrec) []int32 {
	b := t.hashBytes(r)
	t.hout = t.hout[:0]
	for i := 0; i+4 <= len(b) && i < 4*int(r.nhash); i += 4 {
		t.hout = append(t.hout, int32(binary.LittleEndian.Uint32(b[i:])))
	}
	return t.hout
}

// hashBytes returns the window bytes from r's first key hash (nil when
// it has none or they cannot be read).
func (t *recTable) hashBytes(r *vrec) []byte {
	lo, n := r.hashOff, int64(r.nhash)
	if n == 0 {
		return nil
	}
	if lo < t.hwOff || lo+n > t.hwOff+t.hwN {
		t.hwOff, t.hwN = lo, min(max(n, hashWindow), t.nh-lo)
		if need := int(t.hwN * 4); cap(t.hwin) < need {
			t.hwin = make([]byte, need)
		}
		t.hwin = t.hwin[:t.hwN*4]
		if err := readFull(t.hf, t.hwin, lo*4); err != nil {
			if t.err == nil {
				t.err = err
			}
			t.hwN = 0
			return nil
		}
	}
	return t.hwin[(lo-t.hwOff)*4:]
}

// maxStoreTS returns the newest store timestamp among the first n records
// (at least 0): whole blocks from their kept maximum, only the last
// partial block is read.
func (t *recTable) maxStoreTS(n int) int64 {
	var m int64
	for bi := range t.blocks {
		b := &t.blocks[bi]
		if b.first+b.n <= n {
			m = max(m, b.maxTS)
			continue
		}
		for i := b.first; i < n; i++ {
			m = max(m, t.at(i).storeTS)
		}
		break
	}
	return m
}
