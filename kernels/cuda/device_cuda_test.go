//go:build cuda

package cuda

// GPU tests: the whole conformance suite (kernels/kerneltest: every op
// against kernels/ref on random inputs at awkward shapes, with the one
// tolerance table, integer outputs exact) on the Device, and the GEMM
// throughput benchmark. A binary built with -tags cuda needs a GPU to
// start at all (gorgonia.org/cu's init calls cuInit and exits without
// one), so these run only on a GPU machine: `make gpu-check`.

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
)

func openDevice(tb testing.TB) *Device {
	tb.Helper()
	d, err := NewDevice(0)
	require.NoError(tb, err, "opening GPU 0")
	tb.Cleanup(func() { require.NoError(tb, d.Close()) })
	return d
}

func gpuConformance(t *testing.T, family func(*testing.T, kernels.Backend)) {
	family(t, openDevice(t))
}

func TestDeviceInfo(t *testing.T) {
	d := openDevice(t)
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	t.Logf("%s; memory %.1f of %.1f GiB free", d.Name(), float64(free)/(1<<30), float64(total)/(1<<30))
	require.NoError(t, d.drv.do(t.Context(), func() error {
		for name, f := range d.drv.fns {
			regs, err := f.Attribute(cu.NumRegs)
			if err != nil {
				return fmt.Errorf("cuda: cuFuncGetAttribute %s NUM_REGS: %w", name, err)
			}
			local, err := f.Attribute(cu.LocalSizeBytes)
			if err != nil {
				return fmt.Errorf("cuda: cuFuncGetAttribute %s LOCAL_SIZE_BYTES: %w", name, err)
			}
			t.Logf("kernel %-28s regs %3d local %d B", name, regs, local)
			// Spills are checked on the ptxas report (make cuda-check); a
			// stack frame (local > 0) is logged here for the record.
		}
		return nil
	}))
}

func TestGPUMatMul(t *testing.T)            { gpuConformance(t, kerneltest.MatMul) }
func TestGPUMatMulNN(t *testing.T)          { gpuConformance(t, kerneltest.MatMulNN) }
func TestGPUMatMulTN(t *testing.T)          { gpuConformance(t, kerneltest.MatMulTN) }
func TestGPUEmbedding(t *testing.T)         { gpuConformance(t, kerneltest.Embedding) }
func TestGPUEmbeddingBackward(t *testing.T) { gpuConformance(t, kerneltest.EmbeddingBackward) }
func TestGPURMSNorm(t *testing.T)           { gpuConformance(t, kerneltest.RMSNorm) }
func TestGPURMSNormBackward(t *testing.T)   { gpuConformance(t, kerneltest.RMSNormBackward) }
func TestGPURoPE(t *testing.T)              { gpuConformance(t, kerneltest.RoPE) }
func TestGPURoPEBackward(t *testing.T)      { gpuConformance(t, kerneltest.RoPEBackward) }
func TestGPUAttention(t *testing.T)         { gpuConformance(t, kerneltest.Attention) }
func TestGPUAttentionBackward(t *testing.T) { gpuConformance(t, kerneltest.AttentionBackward) }
func TestGPUAttentionPaged(t *testing.T)    { gpuConformance(t, kerneltest.AttentionPaged) }
func TestGPUAttentionInvariance(t *testing.T) {
	gpuConformance(t, kerneltest.AttentionInvariance)
}
func TestGPUWriteKV(t *testing.T) { gpuConformance(t, kerneltest.WriteKV) }
func TestGPUFused(t *testing.T)   { gpuConformance(t, kerneltest.Fused) }
func TestGPUAttentionBackwardPaged(t *testing.T) {
	gpuConformance(t, kerneltest.AttentionBackwardPaged)
}
func TestGPUSwiGLU(t *testing.T)           { gpuConformance(t, kerneltest.SwiGLU) }
func TestGPUSwiGLUBackward(t *testing.T)   { gpuConformance(t, kerneltest.SwiGLUBackward) }
func TestGPUAdd(t *testing.T)              { gpuConformance(t, kerneltest.Add) }
func TestGPUScale(t *testing.T)            { gpuConformance(t, kerneltest.Scale) }
func TestGPULogSoftmaxGather(t *testing.T) { gpuConformance(t, kerneltest.LogSoftmaxGather) }
func TestGPULogSoftmaxGatherBackward(t *testing.T) {
	gpuConformance(t, kerneltest.LogSoftmaxGatherBackward)
}
func TestGPUSoftmax(t *testing.T)    { gpuConformance(t, kerneltest.Softmax) }
func TestGPUArgmax(t *testing.T)     { gpuConformance(t, kerneltest.Argmax) }
func TestGPUSampleRows(t *testing.T) { gpuConformance(t, kerneltest.SampleRows) }
func TestGPUAdamW(t *testing.T)      { gpuConformance(t, kerneltest.AdamW) }
func TestGPUPolicyLoss(t *testing.T) { gpuConformance(t, kerneltest.PolicyLoss) }

// h200BF16DensePeak is the H200 SXM's dense bf16 tensor-core peak in
// TFLOP/s (NVIDIA's datasheet: 1979 with 2:4 sparsity, half that dense).
const h200BF16DensePeak = 989.0

// BenchmarkGEMM times gemm_bf16_wt alone on device-resident operands
// (events around the launches, no copies): out[M,N] = x[M,K]·wᵀ at the
// Qwen3-0.6B projection shapes and M from decode (1, 64, 256) to prefill
// (4096). Reported: TFLOP/s (2·M·N·K per launch, the useful flops: the
// kernel's 3-term split of x runs 3× as many mma instructions), the
// fraction of the bf16 dense peak, and GB/s of weight traffic (what bounds
// decode).
func BenchmarkGEMM(b *testing.B) {
	d := openDevice(b)
	for _, sh := range []struct{ n, k int }{{1024, 1024}, {3072, 1024}, {1024, 3072}, {151936, 1024}} {
		for _, m := range []int{1, 64, 256, 4096} {
			b.Run(fmt.Sprintf("M%d_N%d_K%d", m, sh.n, sh.k), func(b *testing.B) {
				benchGEMM(b, d, m, sh.n, sh.k)
			})
		}
	}
}

func benchGEMM(b *testing.B, d *Device, m, n, k int) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, m*k)
	for i := range x {
		x[i] = rng.Float32() - 0.5
	}
	w := make([]uint16, n*k)
	for i := range w {
		w[i] = kernels.F32ToBF16(rng.Float32() - 0.5)
	}
	var ms float64
	err := d.drv.do(b.Context(), func() error {
		s := &session{d: d}
		defer func() {
			for _, p := range s.temps {
				d.drv.pool.put(p)
			}
		}()
		px, pw, po := upload(s, x), upload(s, w), s.alloc(int64(m*n)*4)
		if s.err != nil {
			return s.err
		}
		a := argsOf().ptr(po).ptr(px).ptr(pw).i32(m).i32(n).i32(k).i32(0)
		plan := gemmBF16Plan(m, n)
		if err := d.drv.launch("gemm_bf16_wt", plan, 0, a); err != nil { // warm-up
			return err
		}
		start, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return fmt.Errorf("cuda: cuEventCreate: %w", err)
		}
		defer func() { _ = cu.DestroyEvent(&start) }()
		stop, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return fmt.Errorf("cuda: cuEventCreate: %w", err)
		}
		defer func() { _ = cu.DestroyEvent(&stop) }()
		if err := start.Record(d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuEventRecord: %w", err)
		}
		for range b.N {
			if err := d.drv.launch("gemm_bf16_wt", plan, 0, a); err != nil {
				return err
			}
		}
		if err := stop.Record(d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuEventRecord: %w", err)
		}
		if err := stop.Synchronize(); err != nil {
			return fmt.Errorf("cuda: cuEventSynchronize: %w", err)
		}
		ms, err = start.Elapsed(stop)
		if err != nil {
			return fmt.Errorf("cuda: cuEventElapsedTime: %w", err)
		}
		return nil
	})
	require.NoError(b, err)
	sec := ms / 1e3 / float64(b.N)
	tflops := 2 * float64(m) * float64(n) * float64(k) / sec / 1e12
	b.ReportMetric(tflops, "TFLOP/s")
	b.ReportMetric(100*tflops/h200BF16DensePeak, "%peak")
	b.ReportMetric(float64(n*k)*float64(unsafe.Sizeof(w[0]))/sec/1e9, "weightGB/s")
	b.ReportMetric(sec*1e6, "us/launch")
}

// TestPinnedRoundTrip checks the cgo layer's page-locked host memory: a
// host → pinned → device → pinned → host round trip.
func TestPinnedRoundTrip(t *testing.T) {
	d := openDevice(t)
	const n = 1 << 20
	want := make([]float32, n)
	for i := range want {
		want[i] = float32(i) * 0.5
	}
	got := make([]float32, n)
	require.NoError(t, d.drv.do(t.Context(), func() error {
		h, err := hostAlloc(n * 4)
		if err != nil {
			return err
		}
		defer func() { _ = hostFree(h) }()
		pinned := unsafe.Slice((*float32)(h), n)
		copy(pinned, want)
		p, err := d.drv.pool.alloc(n * 4)
		if err != nil {
			return err
		}
		defer d.drv.pool.put(p)
		if err := cu.MemcpyHtoDAsync(p, h, n*4, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyHtoDAsync: %w", err)
		}
		clear(pinned)
		if err := cu.MemcpyDtoHAsync(h, p, n*4, d.drv.stream); err != nil {
			return fmt.Errorf("cuda: cuMemcpyDtoHAsync: %w", err)
		}
		if err := d.drv.sync(); err != nil {
			return err
		}
		copy(got, pinned)
		return nil
	}))
	require.Equal(t, want, got)
}

// TestGPUProbeMMA runs simt_probe_mma on the tensor cores: it places A, B,
// C and D by the PTX ISA fragment tables, as the host shim emulates them,
// so a pass confirms on hardware the layout every mma kernel assumes
// (TestProbeMMA checks the same probe on the host build).
func TestGPUProbeMMA(t *testing.T) {
	d := openDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := make([]uint16, 16*16), make([]uint16, 16*8)
	af, bf := make([]float32, len(a)), make([]float32, len(b))
	for i := range a {
		a[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
		af[i] = kernels.BF16ToF32(a[i])
	}
	for i := range b {
		b[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
		bf[i] = kernels.BF16ToF32(b[i])
	}
	c := make([]float32, 16*8)
	for i := range c {
		c[i] = float32(i) / 16
	}
	out := make([]float32, 16*8)
	d.run("probe mma", func(s *session) {
		po, pa, pb, pc := output(s, out, false), upload(s, a), upload(s, b), upload(s, c)
		s.launch("simt_probe_mma", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(po).ptr(pa).ptr(pb).ptr(pc))
	})
	for r := range 16 {
		for n := range 8 {
			want := float64(c[r*8+n])
			for k := range 16 {
				want += float64(af[r*16+k]) * float64(bf[k*8+n])
			}
			assert.InDelta(t, want, float64(out[r*8+n]), 1e-5, "D[%d][%d]", r, n)
		}
	}
}

// TestGPUProbeBarrier runs simt_probe_barrier (__syncthreads, __shared__,
// __shfl_xor_sync, __ballot_sync) on the device with the expectations of
// the host build's TestProbeBarrier.
func TestGPUProbeBarrier(t *testing.T) {
	d := openDevice(t)
	for _, n := range []int{32, 96, 1024} {
		out := make([]int32, n)
		d.run("probe barrier", func(s *session) {
			s.launch("simt_probe_barrier", dims{gx: 1, gy: 1, gz: 1, bx: uint32(n), by: 1, bz: 1}, argsOf().ptr(output(s, out, false)))
		})
		for i := range n {
			base := i / 32 * 32
			sum := 0
			for j := base; j < base+32; j++ {
				sum += j + 1
			}
			assert.Equal(t, int32((i+1)%n+1+sum+1), out[i], "n %d thread %d", n, i)
		}
	}
}

// TestGPUBuffers checks the device-memory layer under the coming
// buffer interface: zeroed allocation, upload and download at element
// offsets (views), device-to-device copy, and errors for a wrong host
// element type, a cast and a range outside the buffer.
func TestGPUBuffers(t *testing.T) {
	d := openDevice(t)
	ctx := t.Context()
	a, err := d.allocBuffer(ctx, kernels.F32, 100)
	require.NoError(t, err)
	defer func() { assert.NoError(t, d.freeBuffer(ctx, a)) }()
	b, err := d.allocBuffer(ctx, kernels.F32, 50)
	require.NoError(t, err)
	defer func() { assert.NoError(t, d.freeBuffer(ctx, b)) }()

	zeros := make([]float32, 100)
	for i := range zeros {
		zeros[i] = 1
	}
	require.NoError(t, downloadBuffer(ctx, d, zeros, a, 0))
	assert.Equal(t, make([]float32, 100), zeros, "allocation is zeroed")

	src := []float32{1, 2, 3, 4, 5}
	require.NoError(t, uploadBuffer(ctx, d, a, 10, src))
	require.NoError(t, d.copyBuffer(ctx, b, 40, a, 10, 5))
	got := make([]float32, 7)
	require.NoError(t, downloadBuffer(ctx, d, got, b, 39))
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5, 0}, got)

	h, err := d.allocBuffer(ctx, kernels.BF16, 8)
	require.NoError(t, err)
	defer func() { assert.NoError(t, d.freeBuffer(ctx, h)) }()
	bits := []uint16{kernels.F32ToBF16(1.5), kernels.F32ToBF16(-2)}
	require.NoError(t, uploadBuffer(ctx, d, h, 6, bits))
	back := make([]uint16, 2)
	require.NoError(t, downloadBuffer(ctx, d, back, h, 6))
	assert.Equal(t, bits, back)

	assert.ErrorContains(t, uploadBuffer(ctx, d, h, 0, src), "host float32 elements for a")
	assert.ErrorContains(t, d.copyBuffer(ctx, h, 0, a, 0, 1), "a cast, not a copy")
	assert.ErrorContains(t, uploadBuffer(ctx, d, a, 98, src), "outside a buffer of 100")
}

func TestGPUMemory(t *testing.T)      { gpuConformance(t, kerneltest.Memory) }
func TestGPUCopy(t *testing.T)        { gpuConformance(t, kerneltest.Copy) }
func TestGPUGatherRows(t *testing.T)  { gpuConformance(t, kerneltest.GatherRows) }
func TestGPUScatterRows(t *testing.T) { gpuConformance(t, kerneltest.ScatterRows) }
func TestGPUTranspose(t *testing.T)   { gpuConformance(t, kerneltest.Transpose) }
func TestGPUSumSquares(t *testing.T)  { gpuConformance(t, kerneltest.SumSquares) }
func TestGPUAllFinite(t *testing.T)   { gpuConformance(t, kerneltest.AllFinite) }
func TestGPUResident(t *testing.T)    { gpuConformance(t, kerneltest.Resident) }

// TestGPUDeviceIndices: index arguments held in device Buffers (token ids,
// targets, PolicyLoss's Seg) are range-checked like host ones, with a
// panic naming the op, before a kernel indexes with them: the kernels do
// not guard their reads, so an unchecked bad id would read or write
// outside the table on the GPU.
func TestGPUDeviceIndices(t *testing.T) {
	d := openDevice(t)
	dev := func(h kernels.Buffer) kernels.Buffer {
		b, err := d.Import(h)
		require.NoError(t, err)
		t.Cleanup(func() { d.Free(b) })
		return b
	}
	const v, c = 8, 4
	table := kernels.MatOf(dev(kernels.HostF32(make([]float32, v*c))), v, c)
	bad := dev(kernels.HostI32([]int32{1, v, 2}))
	assert.PanicsWithValue(t, fmt.Sprintf("kernels/cuda: Embedding: idx[1] = %d outside [0, %d)", v, v), func() {
		d.Embedding(kernels.HostF32(make([]float32, 3*c)), table, bad)
	})
	assert.PanicsWithValue(t, fmt.Sprintf("kernels/cuda: EmbeddingBackward: idx[1] = %d outside [0, %d)", v, v), func() {
		d.EmbeddingBackward(kernels.HostF32(make([]float32, v*c)), kernels.HostF32(make([]float32, 3*c)), bad, c)
	})
	logits := kernels.HostF32(make([]float32, 3*v))
	assert.PanicsWithValue(t, fmt.Sprintf("kernels/cuda: LogSoftmaxGather: idx[1] = %d outside [0, %d)", v, v), func() {
		d.LogSoftmaxGather(kernels.HostF32(make([]float32, 3)), kernels.Buffer{}, logits, bad, 3, v)
	})
	assert.PanicsWithValue(t, fmt.Sprintf("kernels/cuda: LogSoftmaxGatherBackward: idx[1] = %d outside [0, %d)", v, v), func() {
		d.LogSoftmaxGatherBackward(kernels.HostF32(make([]float32, 3*v)), logits, bad, kernels.HostF32(make([]float32, 3)), kernels.Buffer{}, 3, v)
	})
	f := func() kernels.Buffer { return kernels.HostF32(make([]float32, 3)) }
	in := kernels.LossInput{LogP: f(), Weight: f(), SeqAdv: kernels.HostF32([]float32{1}), Seg: dev(kernels.HostI32([]int32{0, 5}))}
	assert.Panics(t, func() {
		d.PolicyLoss(kernels.LossOutput{Loss: f(), DLogP: f()}, in, kernels.LossParams{Objective: kernels.ObjectivePG}, 3)
	}, "Seg running past n in device memory")
	assert.NoError(t, d.Err())
}
