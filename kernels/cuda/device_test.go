//go:build cudahost || cuda

package cuda

// Tests of the Device's runtime layer that hold on any driver: they run on
// the host twin in make cudahost and on the GPU in the gpu-check's kernels
// stage (newTestDevice is NewHost or NewDevice(0)).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// TestPinnedRoundTrip: host → page-locked → device → page-locked → host
// through the driver seam. On the H200 (2026-12-04) it read back zeros for
// the first part of the data: the test cleared the page-locked buffer right
// after queueing the copy from it, and a copy from page-locked memory reads
// it when the stream gets there, not when cuMemcpyHtoDAsync returns (only
// copies from pageable memory are staged before it returns). The fix is
// the wait the test lacked: the host touches page-locked memory only after
// the stream has passed the copies that use it, the rule the Device's
// staging area keeps (staging.go). On the host twin, whose streams run
// only when the host waits, the unfixed order reads back nothing but
// zeros (TestPinnedRaceOnTwin), so without the wait this test fails in
// make cudahost every time, not once in a while on a GPU.
func TestPinnedRoundTrip(t *testing.T) {
	d := newTestDevice(t)
	want, got := pinnedRoundTrip(t, d, true)
	require.Equal(t, want, got)
}

// pinnedRoundTrip runs the round trip, waiting for the host→device copy
// before clearing the page-locked buffer when wait is set.
func pinnedRoundTrip(t *testing.T, d *Device, wait bool) (want, got []float32) {
	const n = 1 << 20
	drv := d.sh.drv
	h, err := drv.hostAlloc(n * 4)
	require.NoError(t, err)
	defer func() { assert.NoError(t, drv.hostFree(h)) }()
	pinned := unsafe.Slice((*float32)(h), n)
	want = make([]float32, n)
	for i := range want {
		want[i] = float32(i) * 0.5
	}
	copy(pinned, want)
	p, err := d.sh.mem.alloc(n*4, d.stream)
	require.NoError(t, err)
	defer func() { assert.NoError(t, d.sh.mem.free(p, d.stream)) }()
	require.NoError(t, drv.copyHtoD(p, h, n*4, d.stream))
	if wait {
		require.NoError(t, d.waitStream())
	}
	clear(pinned)
	require.NoError(t, drv.copyDtoH(h, p, n*4, d.stream))
	require.NoError(t, d.waitStream())
	return want, append([]float32(nil), pinned...)
}

// TestSeamBadIndices: index arguments in device Buffers (token ids, row
// indices, targets, PolicyLoss's Seg) are checked by the kernels, which
// skip a bad one and raise their op's status slot instead of reading or
// writing out of bounds; the Device learns it at the next sync point and
// it becomes the sticky error, naming the op, the argument, the position,
// the value and the bound. No index is downloaded before a launch: the
// ops queue without waiting (asserted on the counters).
func TestSeamBadIndices(t *testing.T) {
	const v, c = 8, 4
	for _, tc := range []struct {
		name string
		run  func(d *Device, dev func(kernels.Buffer) kernels.Buffer)
		want string
	}{
		{"Embedding", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			table := kernels.MatOf(dev(kernels.HostF32(make([]float32, v*c))), v, c)
			d.Embedding(dev(kernels.HostF32(make([]float32, 3*c))), table, dev(kernels.HostI32([]int32{1, v, 2})))
		}, fmt.Sprintf("Embedding: ids[1] = %d outside [0, %d)", v, v)},
		{"EmbeddingBackward", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			d.EmbeddingBackward(dev(kernels.HostF32(make([]float32, v*c))), dev(kernels.HostF32(make([]float32, 3*c))),
				dev(kernels.HostI32([]int32{1, 2, -1})), c)
		}, fmt.Sprintf("EmbeddingBackward: ids[2] = -1 outside [0, %d)", v)},
		{"GatherRows", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			d.GatherRows(dev(kernels.HostF32(make([]float32, 2*c))), dev(kernels.HostF32(make([]float32, v*c))),
				dev(kernels.HostI32([]int32{v + 3, 0})), c)
		}, fmt.Sprintf("GatherRows: idx[0] = %d outside [0, %d)", v+3, v)},
		{"ScatterRows", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			d.ScatterRows(dev(kernels.HostF32(make([]float32, v*c))), dev(kernels.HostF32(make([]float32, 2*c))),
				dev(kernels.HostI32([]int32{0, v})), c)
		}, fmt.Sprintf("ScatterRows: idx[1] = %d outside [0, %d)", v, v)},
		{"LogSoftmaxGather", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			d.LogSoftmaxGather(dev(kernels.HostF32(make([]float32, 3))), kernels.Buffer{}, dev(kernels.HostF32(make([]float32, 3*v))),
				dev(kernels.HostI32([]int32{0, 1, v})), 3, v)
		}, fmt.Sprintf("LogSoftmaxGather: targets[2] = %d outside [0, %d)", v, v)},
		{"LogSoftmaxGatherBackward", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			d.LogSoftmaxGatherBackward(dev(kernels.HostF32(make([]float32, 3*v))), dev(kernels.HostF32(make([]float32, 3*v))),
				dev(kernels.HostI32([]int32{-5, 1, 2})), dev(kernels.HostF32(make([]float32, 3))), kernels.Buffer{}, 3, v)
		}, fmt.Sprintf("LogSoftmaxGatherBackward: targets[0] = -5 outside [0, %d)", v)},
		{"PolicyLoss", func(d *Device, dev func(kernels.Buffer) kernels.Buffer) {
			f := func() kernels.Buffer { return dev(kernels.HostF32(make([]float32, 3))) }
			in := kernels.LossInput{LogP: f(), Weight: f(), SeqAdv: dev(kernels.HostF32([]float32{1})), Seg: dev(kernels.HostI32([]int32{0, 5}))}
			d.PolicyLoss(kernels.LossOutput{Loss: f(), DLogP: f()}, in, kernels.LossParams{Objective: kernels.ObjectivePG}, 3)
		}, "PolicyLoss: Seg[1] = 5: the offsets must run from 0 to n = 3 without decreasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDevice(t)
			dev := func(h kernels.Buffer) kernels.Buffer {
				b, err := d.Import(h)
				require.NoError(t, err)
				return b
			}
			before := d.Counters().Syncs
			tc.run(d, dev)
			assert.Equal(t, before, d.Counters().Syncs, "the op waited for the device")
			assert.NoError(t, d.Err(), "known before the sync point")
			err := d.Sync()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "kernels/cuda: "+tc.want)
			assert.Equal(t, err, d.Err(), "sticky")
			_, err = d.Alloc(kernels.F32, 1)
			assert.Equal(t, d.Err(), err, "later calls return it")
		})
	}
}

// TestSeamBuffers: views at element offsets, DownloadAll's several results
// with one wait, and a Buffer from another Device refused.
func TestSeamBuffers(t *testing.T) {
	d := newTestDevice(t)
	a, err := d.Import(kernels.HostF32([]float32{1, 2, 3, 4, 5, 6}))
	require.NoError(t, err)
	ids, err := d.Import(kernels.HostI32([]int32{7, 8, 9}))
	require.NoError(t, err)
	require.NoError(t, d.Upload(a.Slice(2, 4), kernels.HostF32([]float32{30, 40})))
	gotA, gotIDs := make([]float32, 4), make([]int32, 2)
	before := d.Counters()
	require.NoError(t, d.DownloadAll(kernels.Transfer{Dst: kernels.HostF32(gotA), Src: a.Slice(1, 5)},
		kernels.Transfer{Dst: kernels.HostI32(gotIDs), Src: ids.Slice(1, 3)}))
	after := d.Counters()
	assert.Equal(t, []float32{2, 30, 40, 5}, gotA)
	assert.Equal(t, []int32{8, 9}, gotIDs)
	assert.Equal(t, int64(1), after.Syncs-before.Syncs, "one wait for both")
	assert.Equal(t, int64(2), after.Downloads-before.Downloads)
	assert.Equal(t, int64(24), after.DownloadBytes-before.DownloadBytes)

	other := newTestDevice(t)
	assert.PanicsWithValue(t, "kernels/cuda: Add: a F32[6] not allocated by this Device (host: false)", func() { other.Add(a, a) })
}

// TestSeamStagingReuse: uploads whose total is many times the staging
// area, with no wait between them, all arrive. The staging area is reused
// only after a wait for the stream; on the host twin, where queued copies
// run only at a wait, a slot handed out again before one would deliver
// the later upload's bytes for the earlier one.
func TestSeamStagingReuse(t *testing.T) {
	d := newTestDevice(t)
	const n, each = 96, 16 << 10 // floats: 96 × 64 KiB = 6 MiB through a 4 MiB area
	rng := rand.New(rand.NewPCG(3, 4))
	want := make([][]float32, n)
	bufs := make([]kernels.Buffer, n)
	for i := range n {
		want[i] = make([]float32, each)
		for j := range want[i] {
			want[i][j] = rng.Float32()
		}
		b, err := d.Alloc(kernels.F32, each)
		require.NoError(t, err)
		require.NoError(t, d.Upload(b, kernels.HostF32(want[i])))
		bufs[i] = b
	}
	c := d.Counters()
	assert.Equal(t, int64(1), c.Syncs, "one wait, when the area filled up")
	for i := range n {
		got := make([]float32, each)
		require.NoError(t, d.Download(kernels.HostF32(got), bufs[i]))
		require.Equal(t, want[i], got, "buffer %d", i)
	}
}

// TestSeamGraph: Graphs.Run runs a key's ops directly the first time,
// then captures them and replays them with one graph launch and no kernel
// launch from the host, on new inputs uploaded into the same Buffers,
// matching the ops run directly; freeing a Buffer the graph uses makes it
// stale, and the key is run directly and captured again on the new
// Buffer; what a replay could not repeat (an upload, a staged host
// argument, a download, an allocation) is refused while capturing and
// fails the capture.
func TestSeamGraph(t *testing.T) {
	d := newTestDevice(t)
	const n = 1000
	x, err := d.Alloc(kernels.F32, n)
	require.NoError(t, err)
	y, err := d.Alloc(kernels.F32, n)
	require.NoError(t, err)
	step := func() error {
		d.Copy(y, x)
		d.Scale(y, 2)
		d.Add(y, x) // y = 3x
		return nil
	}
	gs := d.NewGraphs()
	defer func() { assert.NoError(t, gs.Close()) }()
	for round := range 6 {
		if round == 3 { // y reallocated: the graph's y is freed memory now
			d.Free(y)
			_, err := d.Alloc(kernels.F32, n) // takes y's old memory
			require.NoError(t, err)
			y, err = d.Alloc(kernels.F32, n)
			require.NoError(t, err)
		}
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(i*(round+1)) - 7
		}
		require.NoError(t, d.Upload(x, kernels.HostF32(in)))
		before := d.Counters()
		require.NoError(t, gs.Run(Bucket(5), step))
		after := d.Counters()
		direct := round == 0 || round == 3
		wantLaunches, wantGraphs := int64(0), int64(1)
		if direct {
			wantLaunches, wantGraphs = 3, 0
		}
		assert.Equal(t, wantLaunches, after.Launches-before.Launches, "round %d: kernels launched from the host", round)
		assert.Equal(t, wantGraphs, after.GraphLaunches-before.GraphLaunches, "round %d", round)
		got := make([]float32, n)
		require.NoError(t, d.Download(kernels.HostF32(got), y))
		for i := range got {
			require.Equal(t, 3*in[i], got[i], "round %d element %d", round, i)
		}
	}
	assert.Equal(t, 1, gs.Len())
	assert.Equal(t, 2, gs.Captures)
	assert.Equal(t, 8, Bucket(5))

	for _, bad := range []struct {
		name string
		op   func(d *Device, x, y kernels.Buffer) error
	}{
		{"Upload", func(d *Device, x, _ kernels.Buffer) error { return d.Upload(x, kernels.HostF32(make([]float32, n))) }},
		{"host argument", func(d *Device, _, y kernels.Buffer) error { d.Add(y, kernels.HostF32(make([]float32, n))); return nil }},
		{"Download", func(d *Device, _, y kernels.Buffer) error { return d.Download(kernels.HostF32(make([]float32, n)), y) }},
		{"Alloc", func(d *Device, _, _ kernels.Buffer) error { _, err := d.Alloc(kernels.F32, 4); return err }},
	} {
		t.Run(bad.name, func(t *testing.T) {
			d := newTestDevice(t)
			x, err := d.Alloc(kernels.F32, n)
			require.NoError(t, err)
			y, err := d.Alloc(kernels.F32, n)
			require.NoError(t, err)
			require.NoError(t, d.BeginCapture())
			d.Copy(y, x)
			opErr := bad.op(d, x, y)
			g, err := d.EndCapture()
			assert.Nil(t, g)
			require.Error(t, err)
			assert.ErrorContains(t, err, "while capturing a graph")
			if opErr != nil {
				assert.ErrorContains(t, opErr, "while capturing a graph")
			}
		})
	}
}

// TestSeamGraphMatMulMany: MatMulMany's multi launch reads a descriptor
// of its GEMMs, uploaded per call; while capturing, where an upload cannot
// be recorded, a store_words launch writes it. Replays on new inputs equal
// one MatMul per weight bit for bit.
func TestSeamGraphMatMulMany(t *testing.T) {
	d := newTestDevice(t)
	const m, k = 3, 64
	js := []int{48, 80, 16}
	rng := rand.New(rand.NewPCG(7, 8))
	fill := func(n int) []float32 {
		h := make([]float32, n)
		for i := range h {
			h[i] = float32(rng.NormFloat64())
		}
		return h
	}
	x, err := d.Alloc(kernels.F32, m*k)
	require.NoError(t, err)
	var ws []kernels.Mat
	var outs, want []kernels.Buffer
	for _, j := range js {
		w, err := d.Import(kernels.HostRounded(kernels.BF16, fill(j*k)))
		require.NoError(t, err)
		ws = append(ws, kernels.MatOf(w, j, k))
		for _, dst := range []*[]kernels.Buffer{&outs, &want} {
			o, err := d.Alloc(kernels.F32, m*j)
			require.NoError(t, err)
			*dst = append(*dst, o)
		}
	}
	gs := d.NewGraphs()
	defer func() { assert.NoError(t, gs.Close()) }()
	for round := range 4 {
		require.NoError(t, d.Upload(x, kernels.HostF32(fill(m*k))))
		require.NoError(t, gs.Run(0, func() error { d.MatMulMany(outs, x, ws, m); return nil }))
		for i := range ws {
			d.MatMul(want[i], x, ws[i], m, false)
			got, exp := make([]float32, m*js[i]), make([]float32, m*js[i])
			require.NoError(t, d.Download(kernels.HostF32(got), outs[i]))
			require.NoError(t, d.Download(kernels.HostF32(exp), want[i]))
			require.Equal(t, exp, got, "round %d weight %d", round, i)
		}
	}
	assert.Equal(t, 1, gs.Captures)
}

// TestSeamGraphScratch: an op's scratch recorded in a graph (here
// RMSNormBackward's rstd; a split GEMM's workspace is the same) is written
// again by every replay, so it must stay out of the allocator until the
// Graph is closed. A Buffer allocated after the capture keeps its contents
// across replays, and the replay's own results are right. The captured
// ops reuse one another's scratch, as they run one after the other: two
// captured ops hold one block.
func TestSeamGraphScratch(t *testing.T) {
	d := newTestDevice(t)
	const rows, cols = 4, 64
	rng := rand.New(rand.NewPCG(5, 6))
	dev := func(n int) kernels.Buffer {
		h := make([]float32, n)
		for i := range h {
			h[i] = float32(rng.NormFloat64())
		}
		b, err := d.Import(kernels.HostF32(h))
		require.NoError(t, err)
		return b
	}
	dx, dw, dout, x, w := dev(rows*cols), dev(cols), dev(rows*cols), dev(rows*cols), dev(cols)
	dw2 := dev(cols)
	require.NoError(t, d.BeginCapture())
	d.RMSNormBackward(dx, dw, dout, x, w, rows, cols, 1e-6)
	d.RMSNormBackward(dx, dw2, dout, x, w, rows, cols, 1e-6)
	g, err := d.EndCapture()
	require.NoError(t, err)
	assert.Len(t, g.spare, 1, "scratch blocks the graph holds")

	z, err := d.Alloc(kernels.F32, rows) // the size of the rstd scratch
	require.NoError(t, err)
	pattern := []float32{11, 22, 33, 44}
	require.NoError(t, d.Upload(z, kernels.HostF32(pattern)))
	require.NoError(t, g.Replay())
	require.NoError(t, g.Replay())
	got := make([]float32, rows)
	require.NoError(t, d.Download(kernels.HostF32(got), z))
	assert.Equal(t, pattern, got, "a replay wrote into memory allocated after the capture")

	// The replays computed what the op computes directly.
	gotDX := make([]float32, rows*cols)
	require.NoError(t, d.Download(kernels.HostF32(gotDX), dx))
	wantDX, err := d.Alloc(kernels.F32, rows*cols)
	require.NoError(t, err)
	d.RMSNormBackward(wantDX, dev(cols), dout, x, w, rows, cols, 1e-6)
	want := make([]float32, rows*cols)
	require.NoError(t, d.Download(kernels.HostF32(want), wantDX))
	assert.Equal(t, want, gotDX)
	require.NoError(t, g.Close())
}

// TestSeamStreams: two Devices on two streams share memory; an event
// orders the consumer after the producer. The consumer's Free of a Buffer
// the producer allocated waits for the consumer's stream before the
// memory is reused.
func TestSeamStreams(t *testing.T) {
	d := newTestDevice(t)
	e, err := d.NewStream()
	require.NoError(t, err)
	defer func() { assert.NoError(t, e.Close()) }()
	const n = 4096
	x, err := d.Import(kernels.HostF32(make([]float32, n)))
	require.NoError(t, err)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	src, err := d.Import(kernels.HostF32(ones))
	require.NoError(t, err)
	d.Add(x, src) // x = 1 on d's stream
	ev, err := d.RecordEvent()
	require.NoError(t, err)
	defer func() { assert.NoError(t, ev.Close()) }()
	require.NoError(t, e.WaitEvent(ev))
	e.Scale(x, 5) // on e's stream, after the event: x = 5
	got := make([]float32, n)
	require.NoError(t, e.Download(kernels.HostF32(got), x))
	assert.Equal(t, float32(5), got[0])
	assert.Equal(t, float32(5), got[n-1])
	e.Free(x) // freed from the other stream
	require.NoError(t, e.Err())
	require.NoError(t, d.Sync())
}

// TestSeamProbeMMA checks mma.sync against a direct product: the probe
// kernel places A, B, C and D by the PTX ISA fragment tables, as the host
// shim emulates them, so a pass on the GPU confirms the layout every mma
// kernel assumes, and on the host build the shim's emulation.
func TestSeamProbeMMA(t *testing.T) {
	dev := newTestDevice(t)
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
	d := make([]float32, 16*8)
	require.NoError(t, dev.probeMMA(d, a, b, c))
	for r := range 16 {
		for n := range 8 {
			want := float64(c[r*8+n])
			for k := range 16 {
				want += float64(af[r*16+k]) * float64(bf[k*8+n])
			}
			assert.InDelta(t, want, float64(d[r*8+n]), 1e-5, "D[%d][%d]", r, n)
		}
	}
}

// TestSeamProbeBarrier runs simt_probe_barrier (__syncthreads, __shared__,
// __shfl_xor_sync, __ballot_sync) on blocks of one to 32 warps.
func TestSeamProbeBarrier(t *testing.T) {
	dev := newTestDevice(t)
	for _, n := range []int{32, 96, 1024} {
		out := make([]int32, n)
		require.NoError(t, dev.probeBarrier(out))
		checkBarrier(t, out)
	}
}

// checkBarrier checks simt_probe_barrier's output for a block of len(out)
// threads.
func checkBarrier(t *testing.T, out []int32) {
	n := len(out)
	for i := range n {
		base := i / 32 * 32
		sum := 0
		for j := base; j < base+32; j++ {
			sum += j + 1
		}
		assert.Equal(t, int32((i+1)%n+1+sum+1), out[i], "n %d thread %d", n, i)
	}
}

// TestSeamConcurrentStreams: Devices on two streams of one memory are used
// from two goroutines at once (the allocator, the kernel table, the
// driver and the counters are shared); each sees its own results.
func TestSeamConcurrentStreams(t *testing.T) {
	d := newTestDevice(t)
	e, err := d.NewStream()
	require.NoError(t, err)
	defer func() { assert.NoError(t, e.Close()) }()
	errs := make(chan error, 2)
	for g, dev := range []*Device{d, e} {
		go func() {
			errs <- func() error {
				for i := range 20 {
					in := make([]float32, 1000+i)
					for j := range in {
						in[j] = float32(g*1000 + j)
					}
					x, err := dev.Import(kernels.HostF32(in))
					if err != nil {
						return err
					}
					dev.Scale(x, 2)
					got := make([]float32, len(in))
					if err := dev.Download(kernels.HostF32(got), x); err != nil {
						return err
					}
					dev.Free(x)
					for j := range got {
						if got[j] != 2*in[j] {
							return fmt.Errorf("stream %d round %d: element %d = %v, want %v", g, i, j, got[j], 2*in[j])
						}
					}
				}
				return dev.Err()
			}()
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
}

// TestSeamGraphFallback: a step whose recording is refused (here it
// uploads, which a replay could not repeat; a driver without graph
// support fails the same way) is done directly instead, that time and
// every time after, with the right results and no error left on the
// Device; Fallback says why. A failure the Device had before a recording
// is returned, not taken for the recording's.
func TestSeamGraphFallback(t *testing.T) {
	d := newTestDevice(t)
	const n = 256
	x, err := d.Alloc(kernels.F32, n)
	require.NoError(t, err)
	y, err := d.Alloc(kernels.F32, n)
	require.NoError(t, err)
	in := make([]float32, n)
	step := func() error {
		if err := d.Upload(x, kernels.HostF32(in)); err != nil {
			return err
		}
		d.Copy(y, x)
		d.Scale(y, 2)
		return nil
	}
	gs := d.NewGraphs()
	defer func() { assert.NoError(t, gs.Close()) }()
	for round := range 4 {
		for i := range in {
			in[i] = float32(i+round) - 3
		}
		before := d.Counters()
		require.NoError(t, gs.Run(1, step), "round %d", round)
		after := d.Counters()
		require.NoError(t, d.Err(), "round %d", round)
		assert.Equal(t, int64(0), after.GraphLaunches-before.GraphLaunches, "round %d", round)
		assert.Equal(t, int64(2), after.Launches-before.Launches, "round %d: the step's kernels, counted once", round)
		got := make([]float32, n)
		require.NoError(t, d.Download(kernels.HostF32(got), y))
		for i := range got {
			require.Equal(t, 2*in[i], got[i], "round %d element %d", round, i)
		}
		if round == 0 {
			assert.NoError(t, gs.Fallback, "the first run is direct: nothing recorded yet")
		}
	}
	require.Error(t, gs.Fallback)
	assert.ErrorContains(t, gs.Fallback, "while capturing a graph")
	assert.Equal(t, 0, gs.Captures)
	assert.Equal(t, 0, gs.Len())

	t.Run("an earlier failure is returned", func(t *testing.T) {
		d := newTestDevice(t)
		y, err := d.Alloc(kernels.F32, n)
		require.NoError(t, err)
		gs := d.NewGraphs()
		defer func() { _ = gs.Close() }()
		step := func() error { d.Scale(y, 2); return nil }
		require.NoError(t, gs.Run(1, step))
		boom := errors.New("an earlier kernel fault")
		d.fail("Scale", boom)
		err = gs.Run(1, step)
		require.ErrorIs(t, err, boom)
		assert.NoError(t, gs.Fallback)
		assert.ErrorIs(t, d.Err(), boom)
	})
}
