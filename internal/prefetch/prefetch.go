// Package prefetch asks the CPU to start loading table elements that a
// loop will read a little later, without waiting for them: a load whose
// value is used stalls the loop (or fills the reorder window) until its
// cache miss is served, a prefetch retires at once. A walk that reads a
// large table at random (the RocketMQ index check's slot table, 20 MB at
// the broker's defaults) issues the prefetches some elements ahead, so
// the misses of many elements are in flight together. Where there is no
// prefetch instruction the calls do nothing; results never depend on
// them.
package prefetch

// Int32s prefetches tab[i] for each i of idx (an index out of range is
// skipped: a prefetch never faults, but Int32s does not compute such an
// address).
func Int32s(tab []int32, idx []int64) {
	if len(tab) == 0 || len(idx) == 0 {
		return
	}
	int32s(&tab[0], int64(len(tab)), &idx[0], len(idx))
}
