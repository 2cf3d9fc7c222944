package model

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// TestScheduleValues checks each schedule against transformers'
// get_*_schedule_with_warmup formulas at hand-computed steps (1e-12).
func TestScheduleValues(t *testing.T) {
	for _, tc := range []struct {
		s     Schedule
		steps []int
		want  []float64
	}{
		{Schedule{LR: 2}, []int{0, 5, 100}, []float64{2, 2, 2}},
		{Schedule{Kind: ScheduleConstant, LR: 2, WarmupSteps: 4}, []int{0, 1, 3, 4, 50}, []float64{0, 0.5, 1.5, 2, 2}},
		{Schedule{Kind: ScheduleLinear, LR: 1, WarmupSteps: 2, TotalSteps: 10}, []int{0, 1, 2, 6, 10, 12}, []float64{0, 0.5, 1, 0.5, 0, 0}},
		{Schedule{Kind: ScheduleCosine, LR: 1, WarmupSteps: 0, TotalSteps: 4}, []int{0, 1, 2, 3, 4, 9}, []float64{1, 0.5 * (1 + math.Cos(math.Pi/4)), 0.5, 0.5 * (1 + math.Cos(3*math.Pi/4)), 0, 0.5 * (1 + math.Cos(math.Pi*9/4))}},
		// Warm up over 2, stable until 10-4 = 6, a cosine to 0 at 10, 0 after (transformers' get_wsd_schedule).
		{Schedule{Kind: ScheduleWSD, LR: 2, WarmupSteps: 2, TotalSteps: 10, DecaySteps: 4}, []int{0, 1, 2, 5, 6, 7, 8, 10, 12}, []float64{0, 1, 2, 2, 2, 1 + math.Cos(math.Pi/4), 1, 0, 0}},
	} {
		require.NoError(t, tc.s.Validate())
		for i, step := range tc.steps {
			assert.InDelta(t, tc.want[i], tc.s.At(step), 1e-12, "%+v step %d", tc.s, step)
		}
	}
	for _, bad := range []Schedule{{LR: -1}, {LR: math.NaN()}, {LR: 1, WarmupSteps: -1}, {Kind: "poly", LR: 1}, {Kind: ScheduleCosine, LR: 1, WarmupSteps: 5, TotalSteps: 5},
		{Kind: ScheduleWSD, LR: 1, TotalSteps: 10}, {Kind: ScheduleWSD, LR: 1, WarmupSteps: 5, DecaySteps: 6, TotalSteps: 10}} {
		assert.Error(t, bad.Validate(), "%+v", bad)
	}
}

// TestAdamWStep checks one step of AdamW (bias correction, decoupled decay
// only where Decay is set) against the formula in float64 (1e-6), clipping
// by global norm, and that a NaN gradient is refused.
func TestAdamWStep(t *testing.T) {
	w := []float32{1, -2}
	n := []float32{0.5}
	gw := []float32{3, 0}
	gn := []float32{4}
	params := []Param{{Name: "w", Data: kernels.HostF32(w), Grad: kernels.HostF32(gw), Decay: true}, {Name: "n", Data: kernels.HostF32(n), Grad: kernels.HostF32(gn)}}
	cfg := AdamWConfig{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, Schedule: Schedule{LR: 0.01}, MaxGradNorm: 1}
	o, err := NewAdamW(ref.Backend{}, params, cfg)
	require.NoError(t, err)
	st, err := o.Step()
	require.NoError(t, err)
	assert.InDelta(t, 5, st.GradNorm, 1e-12)
	assert.True(t, st.Clipped)
	assert.InDelta(t, 1, GradNorm(params), 1e-6, "clipped to max norm")
	// step 1: m̂ = g, v̂ = g², so the update is lr·g/(|g|+eps) = lr·sign(g).
	assert.InDelta(t, 1*(1-0.01*0.1)-0.01, w[0], 1e-6)
	assert.InDelta(t, -2*(1-0.01*0.1), w[1], 1e-6, "zero gradient: decay only")
	assert.InDelta(t, 0.5-0.01, n[0], 1e-6, "no decay on norm weights")
	assert.Equal(t, 1, o.Steps())

	gw[0] = float32(math.NaN())
	before := append([]float32(nil), w...)
	_, err = o.Step()
	require.ErrorIs(t, err, ErrNonFiniteGrad)
	assert.Equal(t, before, w)

	for _, bad := range []AdamWConfig{{Beta1: 1, Beta2: 0.9, Eps: 1e-8, Schedule: Schedule{LR: 1}}, {Beta1: 0.9, Beta2: 0.9, Schedule: Schedule{LR: 1}}, {Beta1: 0.9, Beta2: 0.9, Eps: 1, MaxGradNorm: -1, Schedule: Schedule{LR: 1}}} {
		_, err := NewAdamW(ref.Backend{}, nil, bad)
		assert.Error(t, err, "%+v", bad)
	}
	_, err = NewAdamW(ref.Backend{}, []Param{{Name: "a", Data: kernels.HostF32(w), Grad: kernels.HostF32(gn)}}, cfg)
	assert.Error(t, err, "length mismatch")
	_, err = NewAdamW(ref.Backend{}, []Param{params[0], params[0]}, cfg)
	assert.Error(t, err, "duplicate name")
}

// TestResumeIsBitExact: N optimizer steps in one run equal k steps, a save
// of the trained weights and optimizer state, a fresh load, and N−k more
// steps, bit for bit, for LoRA and for full fine-tuning.
func TestResumeIsBitExact(t *testing.T) {
	const total, split = 6, 3
	cfg := AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 0.5,
		Schedule: Schedule{Kind: ScheduleCosine, LR: 1e-2, WarmupSteps: 2, TotalSteps: total}}
	lora := LoRAConfig{R: 2, Alpha: 4, Targets: []string{"q_proj", "o_proj", "up_proj"}}
	for _, full := range []bool{false, true} {
		base := t.TempDir()
		require.NoError(t, WriteRandom(base, trMicroConfig(true), kernels.F32, 21, RandomOptions{Std: 0.3}))
		open := func(dir string, adapter string) (*Trainable, *AdamW) {
			m, err := Load(dir, ref.Backend{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			switch {
			case adapter != "":
				_, err = LoadAdapter(adapter, m)
				require.NoError(t, err)
			case !full:
				require.NoError(t, AttachLoRA(m, lora, 1))
			}
			tr, err := NewTrainable(m, TrainOptions{Full: full})
			require.NoError(t, err)
			o, err := NewAdamW(ref.Backend{}, tr.Params(), cfg)
			require.NoError(t, err)
			return tr, o
		}
		train := func(tr *Trainable, o *AdamW, from, to int) {
			for step := from; step < to; step++ {
				rng := rand.New(rand.NewPCG(uint64(step), 99))
				seqs := trRandomSeqs(rng, 48, 8, 5)
				tr.ZeroGrad()
				_, err := tr.Accumulate(context.Background(), seqs, trGradLoss(trRandomWeights(rng, seqs)))
				require.NoError(t, err)
				_, err = o.Step()
				require.NoError(t, err)
			}
		}
		trA, oA := open(base, "")
		train(trA, oA, 0, total)
		trInit, _ := open(base, "")
		assert.NotEqual(t, trInit.Params()[0].Data.F32(), trA.Params()[0].Data.F32(), "training moved the weights")

		trB, oB := open(base, "")
		train(trB, oB, 0, split)
		save := t.TempDir()
		weights, adapter := base, ""
		if full {
			weights = filepath.Join(save, "model")
			require.NoError(t, SaveCheckpoint(weights, trB.Model()))
		} else {
			adapter = filepath.Join(save, "adapter")
			require.NoError(t, SaveAdapter(adapter, trB.Model(), lora, ""))
		}
		state := filepath.Join(save, "optimizer.safetensors")
		require.NoError(t, oB.SaveState(state))

		trC, oC := open(weights, adapter)
		require.NoError(t, oC.LoadState(state))
		assert.Equal(t, split, oC.Steps())
		train(trC, oC, split, total)
		require.Equal(t, len(trA.Params()), len(trC.Params()))
		for i, p := range trA.Params() {
			assert.Equal(t, p.Name, trC.Params()[i].Name)
			assert.Equal(t, p.Data.F32(), trC.Params()[i].Data.F32(), "full=%v %s", full, p.Name)
		}
		assert.Equal(t, downloadAll(t, oA.be, oA.m), downloadAll(t, oC.be, oC.m))
		assert.Equal(t, downloadAll(t, oA.be, oA.v), downloadAll(t, oC.be, oC.v))
	}
}

// downloadAll copies each of bufs (F32, backend memory) to the host.
func downloadAll(t *testing.T, be kernels.Backend, bufs []kernels.Buffer) [][]float32 {
	t.Helper()
	out := make([][]float32, len(bufs))
	for i, b := range bufs {
		out[i] = make([]float32, b.Len())
		require.NoError(t, be.Download(kernels.HostF32(out[i]), b))
	}
	return out
}

// TestLoadStateRejectsMismatch: a state saved for other params is refused
// and leaves the optimizer as it was.
func TestLoadStateRejectsMismatch(t *testing.T) {
	a := []Param{{Name: "x", Data: kernels.HostF32(make([]float32, 3)), Grad: kernels.HostF32(make([]float32, 3))}}
	b := []Param{{Name: "x", Data: kernels.HostF32(make([]float32, 4)), Grad: kernels.HostF32(make([]float32, 4))}}
	c := []Param{{Name: "y", Data: kernels.HostF32(make([]float32, 3)), Grad: kernels.HostF32(make([]float32, 3))}}
	cfg := DefaultAdamWConfig(1e-3)
	oa, err := NewAdamW(ref.Backend{}, a, cfg)
	require.NoError(t, err)
	a[0].Grad.F32()[0] = 1
	_, err = oa.Step()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, oa.SaveState(path))
	for _, ps := range [][]Param{b, c} {
		o, err := NewAdamW(ref.Backend{}, ps, cfg)
		require.NoError(t, err)
		assert.Error(t, o.LoadState(path))
		assert.Equal(t, 0, o.Steps())
	}
	require.NoError(t, WriteSafetensors(path, []Tensor{F32Tensor("x.exp_avg", make([]float32, 3), 3)}, nil))
	assert.ErrorContains(t, oa.LoadState(path), "optimizer")
}
