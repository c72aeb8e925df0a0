package prefetch

// int32s is Int32s in assembly: PREFETCHT0 of base[idx[k]] for k < n,
// for each idx[k] in [0, size).
//
//go:noescape
func int32s(base *int32, size int64, idx *int64, n int)
