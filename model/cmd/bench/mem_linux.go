//go:build linux

package main

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// memory returns the peak resident set size of the process (getrusage) and
// the Go runtime's reserved and in-use heap, in MiB.
func memory() (peakRSS, goSys, goHeap float64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err == nil {
		peakRSS = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return peakRSS, float64(ms.Sys) / (1 << 20), float64(ms.HeapInuse) / (1 << 20)
}
