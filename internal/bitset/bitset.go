// Package bitset is a fixed-size set of small non-negative integers, a
// bit each: the verify index walk's entry numbers, the records a harden
// rewrite protects.
package bitset

import "math/bits"

// Set holds the numbers 0..n-1 of New(n).
type Set []uint64

// New returns an empty set for the numbers below n.
func New(n int64) Set { return make(Set, (n+63)/64) }

// Add adds i.
func (b Set) Add(i int64) { b[i/64] |= 1 << (i % 64) }

// Has reports whether i is in the set.
func (b Set) Has(i int64) bool { return b[i/64]&(1<<(i%64)) != 0 }

// Each calls fn with every number in the set, in increasing order.
func (b Set) Each(fn func(i int64)) {
	for w, word := range b {
		for word != 0 {
			fn(int64(w)*64 + int64(bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
}
