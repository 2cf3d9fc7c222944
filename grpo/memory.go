package grpo

import "github.com/x/kernels"

// Device memory metrics, logged with each optimizer step when the policy's
// backend keeps its own memory (kernels.MemoryReporter: kernels/cuda's
// Device); the CPU backends, whose Buffers are Go slices, log none.
const (
	MetricMemoryAllocated    = "memory/allocated_gib" // held by live Buffers after the step
	MetricMemoryReserved     = "memory/reserved_gib"  // held from the device, the allocator's cache included
	MetricMemoryPeak         = "memory/peak_gib"      // the most ever allocated
	MetricMemoryDeviceAllocs = "memory/device_allocs" // calls to the device's allocator so far
	MetricMemoryOOMRetries   = "memory/oom_retries"   // allocations that freed the cache and retried, so far
)

// memoryMetrics puts be's memory figures in m, if it reports any.
func memoryMetrics(m Metrics, be kernels.Backend) {
	r, ok := be.(kernels.MemoryReporter)
	if !ok {
		return
	}
	const gib = 1 << 30
	st := r.MemoryStats()
	m[MetricMemoryAllocated] = float64(st.Allocated) / gib
	m[MetricMemoryReserved] = float64(st.Reserved) / gib
	m[MetricMemoryPeak] = float64(st.PeakAllocated) / gib
	m[MetricMemoryDeviceAllocs] = float64(st.DeviceAllocs)
	m[MetricMemoryOOMRetries] = float64(st.OOMRetries)
}
