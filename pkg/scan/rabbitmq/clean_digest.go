package rabbitmq

// The scan's msg_store_index.ets when the index agrees with the store.
//
// Every check of the clean-shutdown index (clean_lean.go) compares the
// dump's msg_location entries with what the scan found: each entry's
// {File, Offset, TotalSize} must hold a record with its id and size, its
// ref count must be the number of queue references to the id, and every
// referenced id must have an entry. The exact join holds every entry
// (about 50 bytes each, sorted twice) for the length of the scan, to say
// which entry is wrong. But when the index is right, its entries with a
// positive ref count are exactly the referenced ids' first copies: one
// tuple {id, file, offset, size, references} per referenced id. (Entries
// with ref count 0, messages consumed but not yet compacted away, point at
// unreferenced records; the real brokers' clean stops have them.) So the
// scan holds only the ref-count-0 entries for the exact join, and compares
// two 128-bit multiset digests for the rest: the sum of a keyed hash of
// each entry's tuple, and the same sum over the referenced first copies it
// classifies (this file). Equal digests mean the join would find nothing
// wrong with those entries (a different multiset sums the same with
// probability about 2^-128: the hash is seeded at random for each run);
// anything else (a digest that differs, or a case the digests cannot
// speak for) scans the vhost again with every entry held and joined, whose
// findings say which entries are wrong. The findings are the same either
// way; a store whose index is damaged costs a second pass.

import (
	"encoding/binary"
	"hash/maphash"
)

// setDigest is a multiset digest: two independently keyed 64-bit hashes of
// each element, summed (a sum, not a xor: equal elements do not cancel),
// and the count.
type setDigest struct {
	n    int64
	a, b uint64
}

// cleanDigest is the dump's digest and the scan's.
type cleanDigest struct {
	seedA, seedB maphash.Seed
	ents, recs   setDigest
	// broken is set by what the digests cannot vouch for: a referenced
	// first copy in a file whose name is not a number, a file number seen
	// twice among the files the join took records from (the exact join
	// lets the later file override; a file that failed part way counts),
	// a referenced id the persistent store does not hold.
	broken bool
	nums   map[int64]bool // numbered files joined so far
}

func newCleanDigest() *cleanDigest {
	return &cleanDigest{seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed(), nums: map[int64]bool{}}
}

// add adds the tuple {id, file, off, size, refs} to d.
func (c *cleanDigest) add(d *setDigest, id [16]byte, file, off, size, refs int64) {
	var b [48]byte
	copy(b[:16], id[:])
	binary.LittleEndian.PutUint64(b[16:], uint64(file))
	binary.LittleEndian.PutUint64(b[24:], uint64(off))
	binary.LittleEndian.PutUint64(b[32:], uint64(size))
	binary.LittleEndian.PutUint64(b[40:], uint64(refs))
	d.n++
	d.a += maphash.Bytes(c.seedA, b[:])
	d.b += maphash.Bytes(c.seedB, b[:])
}

// file notes that the persistent file numbered num (-1: a name that is
// not a number) was joined: it is classified next, or failed with records
// the join took.
func (c *cleanDigest) file(num int64) {
	if num < 0 {
		return
	}
	if c.nums[num] {
		c.broken = true
	}
	c.nums[num] = true
}

// record adds r, found in the file numbered num and the first copy of an
// id with refs queue references, to the scan's digest.
func (c *cleanDigest) record(num int64, r *Record, refs int) {
	if num < 0 {
		c.broken = true
		return
	}
	c.add(&c.recs, r.MsgID, num, r.Offset, r.TotalSize, int64(refs))
}

// agrees reports whether the dump's entries are exactly the referenced
// first copies the scan found, every referenced id having one (seen: the
// id table after the persistent store's scan).
func (c *cleanDigest) agrees(seen *idTable, li *leanIndex) bool {
	if c.broken || c.ents != c.recs {
		return false
	}
	ok := true
	seen.each(func(_ [16]byte, e idEntry) bool {
		ok = e.set == 0 || e.path() > 0
		return ok
	})
	if !ok {
		return false
	}
	// The entries held (ref count 0 or less) must not be a referenced
	// id's: the digest's account of that id would not be its only entry.
	ents := li.ents.Slice()
	for i := range ents {
		if seen.get(ents[i].id).set != 0 {
			return false
		}
	}
	return true
}

// useCleanDigest reports whether the scan of the vhost can check its
// clean-shutdown index by digest: nothing asks for each record's index
// agreement (Records), the exact join was not asked for, and the queue
// references will be known (the digests count them: hasQueues).
func useCleanDigest(o VHostOptions, hasQueues bool) bool {
	return !o.exactIndex && o.Options.Records == nil && hasQueues
}

// leanIndexHolds reports whether the scan read all n objects of the
// dump (as an exact index or a digest).
func (s *scanner) leanIndexHolds(n int) bool {
	if s.lidx == nil {
		return false
	}
	held := int64(s.lidx.ents.Len())
	if s.cdig != nil {
		held += s.cdig.ents.n
	}
	return held == int64(n)
}
