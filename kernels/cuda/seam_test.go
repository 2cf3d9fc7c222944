package cuda

// The runtime layer in the default build: a Device on the host twin whose
// kernels do not run (sigRunner checks each launch's packed parameters
// against the kernel's .cu signature and records it), so make test covers
// the launch path, staging, waits, the allocator behind Alloc and the
// seam's own cost without cgo. The kernels' results are the host build's
// business (make cudahost).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// sigRunner is a twinRunner that knows every kernel's C signature from the
// sources and runs nothing.
type sigRunner struct {
	names []string
	sigs  map[string]string
	runs  map[string]int
}

var classLetter = map[abiClass]byte{abiPtr: 'p', abiI32: 'i', abiI64: 'l', abiF32: 'f', abiF64: 'd'}

func newSigRunner(t testing.TB) *sigRunner {
	r := &sigRunner{sigs: map[string]string{}, runs: map[string]int{}}
	files, err := filepath.Glob("*.cu")
	require.NoError(t, err)
	for _, f := range append(files, "host.cc") {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		ks, err := parseKernels(f, string(src))
		require.NoError(t, err)
		for _, k := range ks {
			var sig []byte
			for _, p := range k.params {
				sig = append(sig, classLetter[p.class])
			}
			r.sigs[k.name] = string(sig)
		}
	}
	return r
}

func (r *sigRunner) kernel(name string) (int, string, error) {
	sig, ok := r.sigs[name]
	if !ok {
		return 0, "", fmt.Errorf("no kernel %s", name)
	}
	for i, n := range r.names {
		if n == name {
			return i, sig, nil
		}
	}
	r.names = append(r.names, name)
	return len(r.names) - 1, sig, nil
}

func (r *sigRunner) run(k int, _ dims, _ int, _ []byte, _ int) error {
	r.runs[r.names[k]]++
	return nil
}

// newSeamDevice is a Device on a twin of capacity bytes whose kernels do
// not run.
func newSeamDevice(t testing.TB, capacity int64) (*Device, *twin, *sigRunner) {
	r := newSigRunner(t)
	tw := newTwin(r, capacity, 1)
	d, err := newDevice(tw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d, tw, r
}

// TestSeamLazy: the twin runs queued work only when the host waits, so an
// upload is pending until the Download that needs it, which waits once
// and brings the bytes back.
func TestSeamLazy(t *testing.T) {
	d, tw, _ := newSeamDevice(t, 1<<30)
	b, err := d.Alloc(kernels.F32, 3)
	require.NoError(t, err)
	require.NoError(t, d.Upload(b, kernels.HostF32([]float32{1, 2, 3})))
	assert.Equal(t, 3, tw.pending(d.stream), "the status words' and the Buffer's zeroing and the upload queued, not run")
	got := make([]float32, 3)
	c0 := d.Counters()
	require.NoError(t, d.Download(kernels.HostF32(got), b))
	assert.Equal(t, []float32{1, 2, 3}, got)
	assert.Equal(t, 0, tw.pending(d.stream))
	assert.Equal(t, int64(1), d.Counters().Syncs-c0.Syncs)
}

// TestSeamNoWaits: ops on device Buffers queue their launches and return
// without waiting; an op given a host output is a sync point (its result
// must be copied back); scalars wait once.
func TestSeamNoWaits(t *testing.T) {
	d, _, r := newSeamDevice(t, 1<<30)
	alloc := func(dt kernels.DType, n int) kernels.Buffer {
		b, err := d.Alloc(dt, n)
		require.NoError(t, err)
		return b
	}
	const m, n, k = 4, 8, 16
	x, y, w := alloc(kernels.F32, m*k), alloc(kernels.F32, m*n), alloc(kernels.BF16, n*k)
	ids := alloc(kernels.I32, m)
	c0 := d.Counters()
	for range 10 {
		d.MatMul(y, x, kernels.MatOf(w, n, k), m, false)
		d.RMSNorm(y, y, y.Slice(0, n), m, n, 1e-6)
		d.Embedding(x, kernels.MatOf(alloc(kernels.F32, 7*k), 7, k), ids)
		d.Add(y, y)
	}
	c1 := d.Counters()
	assert.Equal(t, int64(40), c1.Launches-c0.Launches)
	assert.Equal(t, int64(0), c1.Syncs-c0.Syncs, "ops on device Buffers waited")
	require.NoError(t, d.Sync())
	assert.Equal(t, 10, r.runs["gemm_bf16_s_wt_x3"], "the launches ran at the wait")
	c1 = d.Counters()
	d.Add(kernels.HostF32(make([]float32, m*n)), y) // a host output: staged back
	c2 := d.Counters()
	assert.Equal(t, int64(1), c2.Syncs-c1.Syncs)
	_, err := d.SumSquares(y, x)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Counters().Syncs-c2.Syncs)
	assert.NoError(t, d.Sync())
}

// TestSeamLaunchSignature: the twin refuses a launch whose packed
// parameters disagree with the kernel's C signature before queueing it
// (the driver is called directly: TestKernelABI would rightly reject this
// launch in an op).
func TestSeamLaunchSignature(t *testing.T) {
	d, tw, _ := newSeamDevice(t, 1<<30)
	k, err := d.sh.kernel("add_f32")
	require.NoError(t, err)
	bad := argsOf().ptr(0).ptr(0)
	bad.i32(4)
	err = tw.launchKernel(k, elementwisePlan(4), 0, bad, d.stream)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "twin: cuLaunchKernel add_f32: the launch packs parameters (ppi), the kernel takes (ppl)")
	assert.Equal(t, 1, tw.pending(d.stream), "not queued (the one queued op zeroes the status words)")
}

// TestSeamMemory: Alloc through the caching allocator against the twin's
// limited memory: freed Buffers are reused without a device allocation;
// when the cap (a fraction of what was free at open) or the device is
// full, the cache goes back and the allocation is retried, then fails
// with the figures; Trim gives the cache back.
func TestSeamMemory(t *testing.T) {
	d, _, _ := newSeamDevice(t, 256<<20)
	st := d.MemoryStats()
	assert.Equal(t, int64(256<<20)*95/100, st.Limit, "default cap")
	a, err := d.Alloc(kernels.F32, 30<<20/4) // 30 MiB: a segment of its own
	require.NoError(t, err)
	d.Free(a)
	b, err := d.Alloc(kernels.F32, 29<<20/4) // fits the cached 30 MiB block
	require.NoError(t, err)
	st = d.MemoryStats()
	assert.Equal(t, int64(2), st.DeviceAllocs, "status words and one segment")
	d.Free(b)
	require.NoError(t, d.SetMemoryFraction(0.25)) // 64 MiB
	big, err := d.Alloc(kernels.F32, 40<<20/4)    // 40 MiB: the 30 MiB cached segment must go first
	require.NoError(t, err)
	st = d.MemoryStats()
	assert.Equal(t, int64(1), st.OOMRetries)
	assert.Equal(t, int64(1), st.DeviceFrees)
	_, err = d.Alloc(kernels.F32, 40<<20/4)
	require.Error(t, err)
	assert.ErrorContains(t, err, "kernels/cuda: Alloc F32[10485760]")
	assert.ErrorContains(t, err, "limit")
	assert.Equal(t, int64(1), d.MemoryStats().OOMs)
	require.NoError(t, d.Err(), "a failed Alloc returns its error; it is not sticky")
	d.Free(big)
	n, err := d.Trim()
	require.NoError(t, err)
	assert.Equal(t, int64(40<<20), n)
	assert.Less(t, d.MemoryStats().Reserved, int64(4<<20))
}

// failingMemset is nullDriver with memset8 failing once fail is set.
type failingMemset struct {
	nullDriver
	fail bool
}

func (f *failingMemset) memset8(dst devptr, v byte, n int64, s streamH) error {
	if f.fail {
		return errors.New("fake cuMemsetD8Async: an earlier launch failed")
	}
	return nil
}

// TestSeamAllocFailureFrees: an Alloc whose zeroing cannot be queued
// returns its error and gives the memory back.
func TestSeamAllocFailureFrees(t *testing.T) {
	drv := &failingMemset{}
	d, err := newDevice(drv)
	require.NoError(t, err)
	defer d.Close()
	before := d.MemoryStats().Allocated
	drv.fail = true
	_, err = d.Alloc(kernels.F32, 1000)
	require.ErrorContains(t, err, "kernels/cuda: Alloc F32[1000]: fake cuMemsetD8Async")
	assert.Equal(t, before, d.MemoryStats().Allocated, "the block was kept")
}

// TestSeamLaunchLimits: a launch past CUDA's limits (here gemm_f32's
// grid.y of ⌈M/64⌉ over 65,535, at M = 64·65,536 + 1 rows) fails the op
// with an error naming the kernel and the limit before the driver sees
// it: the GPU would refuse it with CUDA_ERROR_INVALID_VALUE, the twin
// would have run it.
func TestSeamLaunchLimits(t *testing.T) {
	d, _, r := newSeamDevice(t, 1<<30)
	const m = 64*65536 + 1
	x, err := d.Alloc(kernels.F32, m)
	require.NoError(t, err)
	out, err := d.Alloc(kernels.F32, m)
	require.NoError(t, err)
	w, err := d.Alloc(kernels.F32, 1)
	require.NoError(t, err)
	d.MatMul(out, x, kernels.MatOf(w, 1, 1), m, false)
	require.ErrorContains(t, d.Err(), "kernels/cuda: launch of gemm_f32: grid 1×65537×1 exceeds CUDA's 2147483647×65535×65535")
	assert.Zero(t, r.runs["gemm_f32"])

	for _, c := range []struct {
		dm   dims
		smem int
		want string
	}{
		{dims{gx: 1, gy: 1, gz: 1, bx: 1025, by: 1, bz: 1}, 0, "block 1025×1×1"},
		{dims{gx: 1, gy: 1, gz: 1, bx: 64, by: 1, bz: 65}, 0, "block 64×1×65"},
		{dims{gx: 1, gy: 1, gz: 1, bx: 128, by: 1, bz: 1}, 228 << 10, "233472 bytes of dynamic shared memory"},
	} {
		assert.ErrorContains(t, c.dm.check("k", c.smem), c.want)
	}
	assert.NoError(t, dims{gx: 1 << 30, gy: 65535, gz: 65535, bx: 1024, by: 1, bz: 1}.check("k", 227<<10))
}

// TestSeamProbeLaunches: the probes' launches pack what their kernels
// take (the runner checks each against the .cu signature).
func TestSeamProbeLaunches(t *testing.T) {
	d, _, r := newSeamDevice(t, 1<<30)
	require.NoError(t, d.probeMMA(make([]float32, 128), make([]uint16, 256), make([]uint16, 128), make([]float32, 128)))
	require.NoError(t, d.probeBarrier(make([]int32, 64)))
	require.NoError(t, d.probeLdmatrix(make([]uint32, 32*12), make([]uint16, 32*8)))
	require.NoError(t, d.probeCpAsync(make([]float32, 768), make([]float32, 384)))
	require.NoError(t, d.probeMMAChain(make([]float32, 128), make([]float32, 16*32), make([]uint16, 32*8), 32))
	for _, k := range []string{"diverge", "mask", "ldmatrix", "cp_async"} {
		require.NoError(t, d.probeBroken(k, make([]int32, 32*4)))
	}
	assert.Equal(t, map[string]int{"simt_probe_mma": 1, "simt_probe_barrier": 1, "simt_probe_ldmatrix": 1, "simt_probe_cp_async": 1,
		"simt_probe_mma_chain": 1, "simt_broken_diverge": 1, "simt_broken_mask": 1, "simt_broken_ldmatrix": 1, "simt_broken_cp_async": 1}, r.runs)
}

// nullDriver accepts every call and does nothing: what is left of a
// Device op's cost is the runtime layer's own (BenchmarkSeam).
type nullDriver struct{ next uintptr }

func (*nullDriver) describe() string               { return "null" }
func (*nullDriver) memInfo() (int64, int64, error) { return 1 << 40, 1 << 40, nil }
func (n *nullDriver) malloc(s int64) (devptr, error) {
	n.next += uintptr(s)
	return devptr(n.next), nil
}
func (*nullDriver) free(devptr) error { return nil }
func (*nullDriver) hostAlloc(s int64) (unsafe.Pointer, error) {
	b := make([]byte, s)
	return unsafe.Pointer(&b[0]), nil
}
func (*nullDriver) hostFree(unsafe.Pointer) error                         { return nil }
func (*nullDriver) streamCreate() (streamH, error)                        { return 1, nil }
func (*nullDriver) streamDestroy(streamH) error                           { return nil }
func (*nullDriver) streamSync(streamH) error                              { return nil }
func (*nullDriver) eventCreate() (eventH, error)                          { return 1, nil }
func (*nullDriver) eventDestroy(eventH) error                             { return nil }
func (*nullDriver) eventRecord(eventH, streamH) error                     { return nil }
func (*nullDriver) eventSync(eventH) error                                { return nil }
func (*nullDriver) eventQuery(eventH) (bool, error)                       { return true, nil }
func (*nullDriver) streamWait(streamH, eventH) error                      { return nil }
func (*nullDriver) kernel(string) (kernelH, error)                        { return 0, nil }
func (*nullDriver) launchKernel(kernelH, dims, int, *args, streamH) error { return nil }
func (*nullDriver) captureBegin(streamH) error                            { return nil }
func (*nullDriver) captureEnd(streamH) (graphH, error)                    { return 1, nil }
func (*nullDriver) graphLaunch(graphH, streamH) error                     { return nil }
func (*nullDriver) graphDestroy(graphH) error                             { return nil }
func (*nullDriver) close() error                                          { return nil }
func (*nullDriver) copyHtoD(devptr, unsafe.Pointer, int64, streamH) error { return nil }
func (*nullDriver) copyDtoH(unsafe.Pointer, devptr, int64, streamH) error { return nil }
func (*nullDriver) copyDtoD(devptr, devptr, int64, streamH) error         { return nil }
func (*nullDriver) memset8(devptr, byte, int64, streamH) error            { return nil }
func (*nullDriver) memset32(devptr, uint32, int64, streamH) error         { return nil }

// BenchmarkSeam is the host cost of the runtime layer itself, per op on
// device Buffers, over a driver that does nothing (the GPU's driver adds
// its own: cuLaunchKernel costs microseconds of host time, which is why a
// decode step is meant to replay a graph): ns/op here, and what each op
// asks of the driver (launches, waits, bytes moved per op).
func BenchmarkSeam(b *testing.B) {
	for _, c := range []struct {
		name string
		op   func(d *Device, x, y, ids kernels.Buffer, w kernels.Mat)
	}{
		{"Add", func(d *Device, x, y, _ kernels.Buffer, _ kernels.Mat) { d.Add(y, x) }},
		{"MatMul", func(d *Device, x, y, _ kernels.Buffer, w kernels.Mat) { d.MatMul(y, x, w, 4, false) }},
		{"Embedding", func(d *Device, x, _, ids kernels.Buffer, w kernels.Mat) { d.Embedding(x, w, ids) }},
		{"Attention", func(d *Device, x, y, ids kernels.Buffer, _ kernels.Mat) {
			lay := kernels.BatchLayout{QStart: ids.Slice(0, 2), Pos: ids.Slice(2, 3), B: 1, N: 1, MaxT: 1, MaxLen: 4}
			d.Attention(kernels.AttentionBatch{Layout: lay, Out: y, Q: x, K: x, V: x, KStart: ids.Slice(0, 2)}, 2, 1, 32, 0.1)
		}},
		{"Upload", func(d *Device, _, _, ids kernels.Buffer, _ kernels.Mat) {
			_ = d.Upload(ids, kernels.HostI32([]int32{1, 2, 3, 4}))
		}},
		{"Download", func(d *Device, _, _, ids kernels.Buffer, _ kernels.Mat) {
			_ = d.Download(kernels.HostI32(make([]int32, 4)), ids)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			d, err := newDevice(&nullDriver{})
			require.NoError(b, err)
			defer d.Close()
			alloc := func(dt kernels.DType, n int) kernels.Buffer {
				buf, err := d.Alloc(dt, n)
				require.NoError(b, err)
				return buf
			}
			x, y, ids := alloc(kernels.F32, 128), alloc(kernels.F32, 128), alloc(kernels.I32, 4)
			w := kernels.MatOf(alloc(kernels.BF16, 32*32), 32, 32)
			c0 := d.Counters()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.op(d, x, y, ids, w)
			}
			b.StopTimer()
			c1 := d.Counters()
			per := func(v int64) float64 { return float64(v) / float64(b.N) }
			b.ReportMetric(per(c1.Launches-c0.Launches), "launches/op")
			b.ReportMetric(per(c1.Syncs-c0.Syncs), "syncs/op")
			b.ReportMetric(per(c1.UploadBytes-c0.UploadBytes+c1.DownloadBytes-c0.DownloadBytes), "bytes/op")
			require.NoError(b, d.Err())
		})
	}
}
