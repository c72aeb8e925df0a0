package rocketmq

import (
	"encoding/binary"
	"os"
	"slices"
	"testing"

	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// TestIdxbCloseWritesEverySlot: closeCur writes the header and slot table
// a chunk at a time and leaves chunks of empty slots as holes. For slot
// tables of one chunk, exactly one, and several with a partial last one,
// with no keys, keys in the first and last slot only, and keys spread,
// the closed file has the full size, the header, and every slot's value.
func TestIdxbCloseWritesEverySlot(t *testing.T) {
	per := int64(idxbChunk / rmq.IndexSlotSize)
	for _, slots := range []int64{1, per - 10, per, 3*per + 7} {
		for _, keys := range [][]int32{nil, {0, int32(slots - 1)}, {1, int32(slots / 2), int32(slots - 2), 7, int32(per + 3)}} {
			lay := rmq.IndexLayout{Slots: slots, Entries: 64}
			b := &idxbBuilder{lay: lay, stage: t.TempDir()}
			for i, k := range keys {
				k %= int32(slots)
				r := rbRecord{phy: int64(100 * (i + 1)), storeTS: 1_700_000_000_000 + int64(i)}
				if err := b.record(&r, []int32{k}); err != nil {
					t.Fatal(err)
				}
			}
			if b.cur == nil { // no keys: a file with only a header
				if err := b.ensure(1_700_000_000_000); err != nil {
					t.Fatal(err)
				}
			}
			f := b.cur
			want, hdr := slices.Clone(f.slots), f.hdr
			if err := b.closeCur(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(got)) != lay.Size() {
				t.Fatalf("slots %d keys %v: file is %d bytes, want %d", slots, keys, len(got), lay.Size())
			}
			if h, err := rmq.DecodeIndexHeader(got, 0); err != nil || h != hdr {
				t.Fatalf("slots %d keys %v: header %+v (%v), want %+v", slots, keys, h, err, hdr)
			}
			set := 0
			for s, v := range want {
				if g := int32(binary.BigEndian.Uint32(got[lay.SlotOffset(int64(s)):])); g != v {
					t.Fatalf("slots %d keys %v: slot %d is %d, want %d", slots, keys, s, g, v)
				}
				if v != 0 {
					set++
				}
			}
			if set != len(keys) && len(keys) > 0 && slots > int64(len(keys)) {
				t.Logf("slots %d: %d keys set %d slots (collisions)", slots, len(keys), set)
			}
		}
	}
}
