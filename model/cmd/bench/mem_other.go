//go:build !linux

package main

import "runtime"

// memory returns 0 for the peak RSS (not available here) and the Go
// runtime's reserved and in-use heap, in MiB.
func memory() (peakRSS, goSys, goHeap float64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return 0, float64(ms.Sys) / (1 << 20), float64(ms.HeapInuse) / (1 << 20)
}
