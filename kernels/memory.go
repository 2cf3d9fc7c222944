package kernels

// MemoryStats is a device backend's memory accounting, in bytes unless
// named otherwise. A caching allocator keeps freed blocks for reuse, so
// Reserved (what it holds from the device) is at least Allocated (what
// live Buffers hold, as rounded by the allocator).
type MemoryStats struct {
	Allocated     int64 // bytes held by live Buffers and the backend's own scratch
	Reserved      int64 // bytes held from the device: Allocated plus the cache
	PeakAllocated int64 // the most Allocated has been
	PeakReserved  int64 // the most Reserved has been
	Limit         int64 // the most Reserved may reach (0: the device's memory)
	DeviceAllocs  int64 // calls to the device's allocator (cudaMalloc)
	DeviceFrees   int64 // memory given back to the device (cudaFree)
	OOMRetries    int64 // allocations that found the device full, freed the cache and retried
	OOMs          int64 // allocations that failed after that retry
}

// MemoryReporter is implemented by a backend that keeps its own device
// memory (kernels/cuda's Device); the CPU backends, whose Buffers are Go
// slices, do not. Callers check for it with a type assertion and log the
// figures (grpo's memory/* metrics).
type MemoryReporter interface {
	MemoryStats() MemoryStats
}

// MemoryTrimmer is implemented by a backend with a caching allocator: Trim
// gives the cached free memory back to the device (after waiting for the
// work queued on it) and returns how many bytes it released; live Buffers
// are untouched. Call it between phases whose peaks should not add up
// (generation, then learning).
type MemoryTrimmer interface {
	Trim() (int64, error)
}
