package rocketmq

import (
	"bufio"
	"encoding/binary"
	"os"
	"sort"

	"github.com/storectl/storectl/pkg/scan"
)

// recTable holds the compact records (vrec) the cross-file checks look
// up, in phy order, in an unlinked temp file instead of the heap, so
// verify's memory does not grow with the store: the heap keeps only the
// first phy of every block of recBlockLen records, a small LRU of decoded
// blocks and one window over the key hash file. The consume queue and
// index walks look records up in increasing phy order (per queue, per
// index file), so nearly every lookup hits a cached block.
type recTable struct {
	f, hf  *os.File      // records (recSlot bytes each), key hashes (4 bytes each)
	w, hw  *bufio.Writer // while the scan appends
	n      int           // records written
	nh     int64         // hashes written
	firsts []int64       // phy of the first record of each block
	maxTS  []int64       // newest store timestamp of each block
	err    error         // first I/O error; lookups then find nothing
	cache  [recCacheBlocks]recBlock
	mru    *recBlock // the block returned last
	tick   uint64
	slot   [recSlot]byte
	hwin   []byte // window over the hash file
	hwOff  int64  // first hash in hwin
	hwN    int64  // hashes in hwin
	hout   []int32
	raw    []byte // read buffer of one block
}

// recBlock is one cached block of decoded records.
type recBlock struct {
	idx  int // block number; -1 when empty
	used uint64
	recs []vrec
}

const (
	// recSlot is the encoded size of one vrec in the temp file.
	recSlot = 64
	// recBlockLen is the records per block: 64 KiB of file, one pread.
	recBlockLen = 1024
	// recCacheBlocks bounds the decoded blocks kept (8 x 64 KiB): enough
	// for the sequential walks and a few stray lookups of damaged units.
	recCacheBlocks = 8
	// hashWindow is the hash file window in hashes (64 KiB): the index
	// walk reads the hashes of records in increasing phy order.
	hashWindow = 16 << 10
	// spillBuf is the write buffer of each temp file while the scan runs.
	spillBuf = 256 << 10
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
	t.w, t.hw = bufio.NewWriterSize(t.f, spillBuf), bufio.NewWriterSize(t.hf, spillBuf)
	for i := range t.cache {
		t.cache[i].idx = -1
	}
	return t, nil
}

// Close releases the temp files.
func (t *recTable) Close() {
	t.f.Close()
	t.hf.Close()
}

// appendHashes stores key hashes and returns the index of the first.
func (t *recTable) appendHashes(h []int32) int64 {
	first := t.nh
	var b [4]byte
	for _, x := range h {
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		if _, err := t.hw.Write(b[:]); err != nil && t.err == nil {
			t.err = err
		}
	}
	t.nh += int64(len(h))
	return first
}

// append stores r, which must not start before the previous record.
func (t *recTable) append(r *vrec) {
	if t.n%recBlockLen == 0 {
		t.firsts = append(t.firsts, r.phy)
		t.maxTS = append(t.maxTS, r.storeTS)
	} else if b := len(t.maxTS) - 1; r.storeTS > t.maxTS[b] {
		t.maxTS[b] = r.storeTS
	}
	b := t.slot[:]
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(r.phy))
	le.PutUint64(b[8:], uint64(r.queueOff))
	le.PutUint64(b[16:], uint64(r.tagsCode))
	le.PutUint64(b[24:], uint64(r.storeTS))
	le.PutUint64(b[32:], uint64(r.hashOff))
	le.PutUint32(b[40:], uint32(r.size))
	le.PutUint32(b[44:], uint32(r.topic))
	le.PutUint32(b[48:], uint32(r.queueID))
	le.PutUint32(b[52:], uint32(r.sysFlag))
	le.PutUint16(b[56:], r.nhash)
	b[58] = r.flags
	if _, err := t.w.Write(b); err != nil && t.err == nil {
		t.err = err
	}
	t.n++
}

// finish flushes the writers; lookups may follow.
func (t *recTable) finish() error {
	for _, w := range []*bufio.Writer{t.w, t.hw} {
		if err := w.Flush(); err != nil && t.err == nil {
			t.err = err
		}
	}
	return t.err
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
	n := min(recBlockLen, t.n-bi*recBlockLen)
	if cap(t.raw) < n*recSlot {
		t.raw = make([]byte, recBlockLen*recSlot)
	}
	raw := t.raw[:n*recSlot]
	if err := readFull(t.f, raw, int64(bi)*recBlockLen*recSlot); err != nil {
		if t.err == nil {
			t.err = err
		}
		return nil
	}
	if cap(c.recs) < n {
		c.recs = make([]vrec, recBlockLen)
	}
	c.recs = c.recs[:n]
	le := binary.LittleEndian
	for i := range c.recs {
		b := raw[i*recSlot : (i+1)*recSlot]
		c.recs[i] = vrec{phy: int64(le.Uint64(b[0:])), queueOff: int64(le.Uint64(b[8:])), tagsCode: int64(le.Uint64(b[16:])),
			storeTS: int64(le.Uint64(b[24:])), hashOff: int64(le.Uint64(b[32:])), size: int32(le.Uint32(b[40:])),
			topic: int32(le.Uint32(b[44:])), queueID: int32(le.Uint32(b[48:])), sysFlag: int32(le.Uint32(b[52:])),
			nhash: le.Uint16(b[56:]), flags: b[58]}
	}
	c.idx, t.mru = bi, c
	return c.recs
}

// at returns record i (0 <= i < n).
func (t *recTable) at(i int) vrec {
	b := t.block(i / recBlockLen)
	if j := i % recBlockLen; j < len(b) {
		return b[j]
	}
	return vrec{}
}

// lastAtOrBefore returns the index of the last record with phy <= p
// among the first n, or -1.
func (t *recTable) lastAtOrBefore(p int64, n int) int {
	bi := sort.Search(len(t.firsts), func(i int) bool { return t.firsts[i] > p }) - 1
	if bi < 0 {
		return -1
	}
	b := t.block(bi)
	j := sort.Search(len(b), func(i int) bool { return b[i].phy > p }) - 1
	if j < 0 { // only after a read error
		return -1
	}
	return min(bi*recBlockLen+j, n-1)
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

// hashes returns the key hashes of r (valid until the next call).
func (t *recTable) hashes(r *vrec) []int32 {
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
	t.hout = t.hout[:0]
	b := t.hwin[(lo-t.hwOff)*4:]
	for i := int64(0); i < n; i++ {
		t.hout = append(t.hout, int32(binary.LittleEndian.Uint32(b[i*4:])))
	}
	return t.hout
}

// maxStoreTS returns the newest store timestamp among the first n records
// (at least 0): whole blocks from their kept maximum, only the last
// partial block is read.
func (t *recTable) maxStoreTS(n int) int64 {
	var m int64
	full := n / recBlockLen
	for _, ts := range t.maxTS[:min(full, len(t.maxTS))] {
		m = max(m, ts)
	}
	for i := full * recBlockLen; i < n; i++ {
		m = max(m, t.at(i).storeTS)
	}
	return m
}
