package rabbitmq

// The id table's fixed part: every referenced id, ascending, each with its
// packed entry (idPack), found through a bucket index on the id's leading
// bits (idBuckets). A slot holds the id without the leading bytes its
// bucket already says (1 byte from 256 buckets on, 2 from 65,536: at
// two to four ids a bucket, from 513 and 131,073 ids on), then the entry
// in as many bytes as the packing needs: 20 bytes an id for the bench's
// 1 and 4 GiB stores (15 + 5 and 14 + 6) where a [16]byte id and a uint64
// took 24. Referenced ids are the one part of the scan's memory that
// grows with the store, so these bytes are its growth. The slots are
// mapped outside the Go heap (internal/offheap).

import (
	"encoding/binary"

	"github.com/storectl/storectl/internal/offheap"
)

// fixedIDs is the fixed part. It is built once, ids in ascending order
// (add, then done); afterwards only entries change (setVal). Concurrent
// reads are safe; a write is not safe with anything else on the same slot.
type fixedIDs struct {
	buf    *offheap.Buf[byte]
	b      []byte // the slots, stride bytes each, then 8 spare bytes (word loads)
	idx    idBuckets
	skip   int // leading id bytes the bucket implies
	vbytes int // bytes of a packed entry
	stride int
	vmask  uint64
	added  int // while building
}

// newFixedIDs makes room for n ids whose entries pack with pack.
func newFixedIDs(n int, pack idPack) *fixedIDs {
	f := &fixedIDs{idx: newIDBucketsFor(n), buf: offheap.New[byte]()}
	f.skip = f.idx.impliedBytes()
	f.vbytes = (int(pack.setBits+pack.pathBits+pack.offBits) + 4 + 7) / 8
	f.vmask = ^uint64(0) >> (64 - 8*f.vbytes)
	f.stride = 16 - f.skip + f.vbytes
	f.b = f.buf.Extend(n*f.stride + 8)
	return f
}

// add appends the next id (ascending, unique) with its packed entry.
func (f *fixedIDs) add(id *[16]byte, v uint64) {
	i := f.added
	f.added++
	f.idx.add(i, id)
	s := f.b[i*f.stride : (i+1)*f.stride]
	copy(s, id[f.skip:])
	f.putVal(s[16-f.skip:], v)
}

// done finishes the bucket index once every id was added.
func (f *fixedIDs) done() { f.idx.finish(f.added) }

func (f *fixedIDs) putVal(s []byte, v uint64) {
	for k := range f.vbytes {
		s[k] = byte(v >> (8 * k))
	}
}

// val returns slot i's packed entry.
func (f *fixedIDs) val(i int) uint64 {
	o := i*f.stride + 16 - f.skip
	// The next slot's leading id bytes, or the spare ones, fill the word.
	return binary.LittleEndian.Uint64(f.b[o:]) & f.vmask
}

// setVal sets slot i's packed entry.
func (f *fixedIDs) setVal(i int, v uint64) {
	o := i*f.stride + 16 - f.skip
	f.putVal(f.b[o:o+f.vbytes], v)
}

// find returns the slot of id, or -1: a binary search of id's bucket (a
// few ids) on the bytes the bucket does not imply, compared as two
// big-endian words (the first 8 of them and the last 8, which overlap
// when fewer than 16 are left: where the first word is equal, so are the
// shared bytes).
func (f *fixedIDs) find(id *[16]byte) int {
	lo, hi := f.idx.span(id)
	if lo >= hi {
		return -1
	}
	last := 16 - f.skip - 8 // where the second word starts in a slot
	k0, k1 := binary.BigEndian.Uint64(id[f.skip:]), binary.BigEndian.Uint64(id[8:])
	b := f.b
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		o := m * f.stride
		s, k := binary.BigEndian.Uint64(b[o:]), k0
		if s == k {
			if s, k = binary.BigEndian.Uint64(b[o+last:]), k1; s == k { // decide by the second word
				return m
			}
		}
		if s < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return -1
}

// warmBatch is how many ids warm takes at a time.
const warmBatch = 32

// warmSink keeps warm's loads from being dropped as dead code.
var warmSink byte

// warm loads the bucket index entries and the first slots that finding
// id(0) ... id(n-1) (n <= warmBatch) will read, before they are found one
// after another. In a table larger than the caches each find misses
// twice (the index, then the slot), and one miss waits for the other;
// loads of different ids do not depend on each other, so here the CPU
// has many in flight at once, and the finds that follow hit the cache.
func (f *fixedIDs) warm(n int, id func(i int) *[16]byte) {
	ix := f.idx.index
	if len(ix) == 0 || n > warmBatch {
		return
	}
	var at [warmBatch]int32
	for i := range n {
		at[i] = ix[f.idx.of(id(i))]
	}
	var sink byte
	for i := range n {
		if o := int(at[i]) * f.stride; o < len(f.b) {
			sink ^= f.b[o]
		}
	}
	warmSink = sink
}

// idOf returns slot i's id, bucket k holding it.
func (f *fixedIDs) idOf(k, i int) [16]byte {
	var id [16]byte
	p := uint32(k) << f.idx.shift
	for j := range f.skip {
		id[j] = byte(p >> (24 - 8*j))
	}
	copy(id[f.skip:], f.b[i*f.stride:i*f.stride+16-f.skip])
	return id
}

// each calls fn for every slot in id order until it returns false.
func (f *fixedIDs) each(fn func(i int, id [16]byte) bool) bool {
	ix := f.idx.index
	for k := 0; k+1 < len(ix); k++ {
		for i := int(ix[k]); i < int(ix[k+1]); i++ {
			if !fn(i, f.idOf(k, i)) {
				return false
			}
		}
	}
	return true
}

// free gives the memory back; f is empty afterwards.
func (f *fixedIDs) free() {
	if f.buf != nil {
		f.buf.Free()
	}
	f.idx.free()
	*f = fixedIDs{}
}
