package rabbitmq

// Sorting by msg id. The lean tables (the id table, msg_store_index.ets's
// entries) are sorted once before the first file's statuses, on the
// scan's critical path: a comparison sort of 350k ids took 130-230 ms of
// a 4 GiB scan. Msg ids are uniformly spread (rabbit_guid), so one
// in-place pass of American flag sort on the leading bits leaves buckets
// of a few ids, each then put in order by a comparison sort: linear time
// for real stores, and no worse than a comparison sort for skewed ones
// (a bucket that holds them all is sorted as a whole).

import (
	"cmp"
	"encoding/binary"
	"sort"
)

// radixMin is the length below which a bucket is put in order by
// comparisons (an insertion sort). A radix pass over a bucket of 16-64
// ids costs less than comparing them: at 64, the buckets of the second
// byte (about 60 ids each for 3 million references) went to sort.Sort,
// and sorting 3 million references took twice the CPU.
const radixMin = 16

// compareID orders ids as bytes.Compare does, as two big-endian words.
// idKey is the first 8 bytes of an id, big-endian: the prefix of
// compareID's order a merge compares first (runsort.Sorter.Key).
func idKey(id *[16]byte) uint64 { return binary.BigEndian.Uint64(id[:8]) }

func compareID(a, b *[16]byte) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:]))
}

// sortByID sorts s ascending by id, and elements with equal ids by tie:
// the order slices.SortFunc gives with that comparison (elements equal
// under both may come in any order, as with slices.SortFunc).
func sortByID[T any](s []T, id func(*T) *[16]byte, tie func(a, b *T) int) {
	sortByIDFrom(s, 0, id, tie)
}

// sortByIDFrom sorts s, whose ids agree before byte k. One pass of
// American flag sort puts s in 256 buckets by byte k, each then sorted on
// the next byte. 256 buckets, not one pass on the leading 16 bits: the 256
// insertion points stay in the cache, so an element's move costs no
// memory miss (65536 of them cost one each: 250 ns a move on this host,
// slower than a comparison sort).
func sortByIDFrom[T any](s []T, k int, id func(*T) *[16]byte, tie func(a, b *T) int) {
	if len(s) < radixMin || k == len(id(&s[0])) {
		sortBucket(s, id, tie)
		return
	}
	var start [257]int32 // bucket b is s[start[b]:start[b+1]]
	for i := range s {
		start[int(id(&s[i])[k])+1]++
	}
	if start[int(id(&s[0])[k])+1] == int32(len(s)) { // one bucket: on to the next byte
		sortByIDFrom(s, k+1, id, tie)
		return
	}
	for b := range 256 {
		start[b+1] += start[b]
	}
	next := start
	// Buckets before b are complete, so whatever is at next[b] belongs to
	// b or a later bucket: swap it there until b is full.
	for b := range 256 {
		for end := start[b+1]; next[b] < end; {
			i := next[b]
			c := int(id(&s[i])[k])
			if c == b {
				next[b]++
				continue
			}
			s[i], s[next[c]] = s[next[c]], s[i]
			next[c]++
		}
	}
	for b := range 256 {
		if lo, hi := start[b], start[b+1]; hi-lo > 1 {
			sortByIDFrom(s[lo:hi], k+1, id, tie)
		}
	}
}

// sortBucket sorts s by id, then tie: an insertion sort for the few
// elements of a bucket (fewer than radixMin), sort.Sort for more (ids
// that agree to their last byte). Both compare through pointers into s
// (a comparison taking elements by value would copy them to the heap to
// pass their addresses on).
func sortBucket[T any](s []T, id func(*T) *[16]byte, tie func(a, b *T) int) {
	if len(s) >= radixMin {
		sort.Sort(bucketSorter[T]{s, id, tie})
		return
	}
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && lessByID(&s[j], &s[j-1], id, tie); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func lessByID[T any](a, b *T, id func(*T) *[16]byte, tie func(a, b *T) int) bool {
	if c := compareID(id(a), id(b)); c != 0 {
		return c < 0
	}
	return tie(a, b) < 0
}

type bucketSorter[T any] struct {
	s   []T
	id  func(*T) *[16]byte
	tie func(a, b *T) int
}

func (x bucketSorter[T]) Len() int           { return len(x.s) }
func (x bucketSorter[T]) Less(i, j int) bool { return lessByID(&x.s[i], &x.s[j], x.id, x.tie) }
func (x bucketSorter[T]) Swap(i, j int)      { x.s[i], x.s[j] = x.s[j], x.s[i] }
