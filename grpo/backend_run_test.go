package grpo

// The trainer on a device backend. The harness of this file runs the same
// short training on a backend under test and on kernels/cpu and compares
// them: GRPO (LoRA and full weights) with the KL reference pass, SFT, a
// checkpoint and a bit-exact resume on the backend under test, and the
// PEFT adapter it saves. The backend under test is always wrapped in
// kerneltest.Counting with CopyImports, so that its imports are copies as
// a device's are (a host weight updated without the backend seeing it
// would show as a difference) and its live allocations can be counted.
//
// Three files run it: TestBackendHarnessCopyingCPU here, over a copying
// kernels/cpu (the same arithmetic, so everything must be equal bit for
// bit: the harness's own check); backend_host_test.go (-tags cudahost,
// `make cudahost`) over cuda.Host, the CUDA kernels on the CPU through the
// SIMT shim; backend_cuda_test.go (-tags cuda, the gpu-check's grpo stage)
// over a GPU.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// newBackend returns a fresh backend under test; the test's cleanup
// closes it if it needs closing.
type newBackend func(t *testing.T) kernels.Backend

// backendShape is the model of the backend runs: the kernels' general
// paths (GQA 4 on 2 heads, head_dim 32, two layers) at a size the SIMT
// host build runs a GRPO step of in seconds, with the embedded tiny
// tokenizer's 4,096-token vocabulary.
func backendShape() model.Config {
	tok := tokenizer.Tiny()
	return model.Config{
		VocabSize: tok.VocabSize(), HiddenSize: 64, IntermediateSize: 160,
		NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		BOSTokenID: -1, MaxPositions: 1024, EOSTokenIDs: []int32{tok.EOS()},
	}
}

// backendCheckpoint writes the runs' random bf16 checkpoint: matrix
// weights N(0, 0.08), so that sampling has spread but is not uniform.
func backendCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, backendShape(), kernels.BF16, 13, model.RandomOptions{Std: 0.08, NormStd: 0.1}))
	return dir
}

// backendRunConfig is the GRPO run's Config: 2 prompts × 4 rollouts of at
// most 16 tokens per step, one optimizer step per generation, the KL
// reference pass on (β 0.04; full fine-tuning has none). AdamW's ε is 1e-3, not 1e-8: a step moves a
// parameter by at most lr·|Δg|/ε for a gradient difference Δg between
// backends, which ε 1e-8 would turn into a 2·lr jump for a gradient
// near 0 whose sign is float noise (kerneltest.Tolerance "GRPORunParams").
func backendRunConfig(out string) Config {
	cfg := testConfig(4, 2)
	cfg.MaxCompletionLength = 16
	cfg.Seed = 5
	cfg.Beta = 0.04
	cfg.LearningRate = 1e-2
	cfg.AdamEpsilon = 1e-3
	cfg.OutputDir = out
	return cfg
}

// backendRows are generation g's two prompts: short ones, so that a step
// is about 250 tokens and the SIMT host build trains on them in seconds.
func backendRows(g int) []env.Row {
	return []env.Row{{"prompt": fmt.Sprintf("Count from %d:", g)}, {"prompt": fmt.Sprintf("Add %d and 3:", g)}}
}

// backendTrainer makes a GRPO trainer of the checkpoint in dir, loaded on
// be, with a reward that depends on the sampled tokens (so groups have spread and the weights move every step); LoRA r4
// unless full.
func backendTrainer(t *testing.T, dir string, be kernels.Backend, full bool, out string) *Trainer {
	t.Helper()
	m, err := model.Load(dir, be)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	opts := []Option{
		WithReward("tokens", 1, func(_ context.Context, r *Rollout) (float64, error) {
			s := 0
			for i, id := range r.CompletionIDs {
				if r.Mask[i] {
					s += int(id)
				}
			}
			return float64(s % 5), nil
		}),
	}
	if !full {
		opts = append(opts, WithLoRA(model.LoRAConfig{R: 4, Alpha: 8}))
	}
	cfg := backendRunConfig(out)
	if full {
		cfg.Beta = 0 // the KL reference is the model with its adapters off: LoRA only
	}
	tr, err := NewTrainer(m, tokenizer.Tiny(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tr.Close()) })
	return tr
}

// grpoRun is what a short GRPO run produced.
type grpoRun struct {
	completions [][][]int32 // [step][rollout] completion ids
	rewards     [][]float64 // [step][rollout]
	metrics     []Metrics   // one per optimizer step
	params      map[string][]float32
}

// runGRPO takes steps generation batches on tr and downloads its trained
// parameters.
func runGRPO(t *testing.T, tr *Trainer, steps int) grpoRun {
	t.Helper()
	ctx := context.Background()
	var r grpoRun
	for g := range steps {
		rep, err := tr.Step(ctx, backendRows(g))
		require.NoError(t, err, "step %d", g)
		var comps [][]int32
		for _, ro := range rep.Rollouts {
			comps = append(comps, slices.Clone(ro.CompletionIDs))
		}
		r.completions = append(r.completions, comps)
		r.rewards = append(r.rewards, slices.Clone(rep.Rewards))
		r.metrics = append(r.metrics, rep.Metrics...)
	}
	r.params = downloadParams(t, tr.pol.m.Backend, tr.pol.params())
	return r
}

// downloadParams copies every parameter's value to the host.
func downloadParams(t *testing.T, be kernels.Backend, ps []model.Param) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, p := range ps {
		v := make([]float32, p.Data.Len())
		require.NoError(t, be.Download(kernels.HostF32(v), p.Data), "downloading %s", p.Name)
		out[p.Name] = v
	}
	return out
}

// onCopying wraps a backend under test as a device-like one.
func onCopying(be kernels.Backend) *kerneltest.Counting {
	return &kerneltest.Counting{Backend: be, CopyImports: true}
}

// samplingLogpBound bounds sampling/sampling_logp_difference/max, the
// sampled log-probs against the training forward's on one backend, where
// they are not the same bits. With BatchInvariantRollouts (on in these
// runs) the sampler's full log-prob is training's arithmetic on the
// decode step's logits (kerneltest.SampleFullLogProbExact) and training
// computes as a decode step does (model.Trainable.SetBatchInvariant), so
// they are equal wherever the backend's attention is batch-invariant too
// (exactSampling): the host build and kernels/cpu off AVX-512. On
// AVX-512 kernels/cpu's tiled attention sums a prefill row's scores in
// an order that depends on the tile's row count, so the decode step's
// logits and the training pass's differ in summation order; the bound is
// the sum of the tolerances that cover that: the sampler's against the
// training arithmetic (SampleFullLogProb) and a model pass's log-probs in
// another order (ModelLogProbs). Measured there: 9.5e-7, one float32 ulp
// of |log p| in [8, 16).
func samplingLogpBound() float64 {
	return kerneltest.Tolerance("SampleFullLogProb").ATol + kerneltest.Tolerance("ModelLogProbs").ATol
}

// exactSampling reports whether sampling_logp_difference/max must be 0 on
// be: whether its attention is batch-invariant (kernels.AttentionInvariant;
// its MatMul is, in the batch-invariant mode or by construction).
func exactSampling(be kernels.Backend) bool {
	a, ok := be.(kernels.AttentionInvariant)
	return ok && a.AttentionBatchInvariant()
}

// checkSamplingLogp asserts a run's sampling_logp_difference/max per
// step: 0 where exact, else within samplingLogpBound.
func checkSamplingLogp(t *testing.T, what string, ms []Metrics, exact bool) {
	t.Helper()
	for s, m := range ms {
		d := m[MetricSamplingLogpDiffMax]
		if exact {
			assert.Zero(t, d, "%s step %d: sampling_logp_difference/max (sampled vs trained log-probs, bit for bit)", what, s)
		} else {
			assert.LessOrEqual(t, d, samplingLogpBound(), "%s step %d: sampling_logp_difference/max", what, s)
		}
	}
}

// backendRunSteps is how many generation batches (= optimizer steps) the
// comparison runs.
const backendRunSteps = 3

// backendGRPOVsCPU runs backendRunSteps GRPO steps on the backend under test
// and on kernels/cpu from the same checkpoint and seed, and compares:
// the sampled completions and their rewards must be equal (the two
// backends' logits differ by ModelLogits-sized amounts, so a sampled token
// differs only where a uniform falls within that of a boundary of the
// sampling CDF: about tokens × 1e-5 per run, and the seeds are fixed);
// the loss, KL and entropy metrics within ModelLogProbs's tolerance; the
// trained parameters within GRPORunParams's; and on the backend under test
// each step's sampling/sampling_logp_difference/max (the sampled log-probs
// against the training forward's on the same backend) 0 where
// exactSampling, else within samplingLogpBound, on both backends.
func backendGRPOVsCPU(t *testing.T, nb newBackend, full bool) {
	dir := backendCheckpoint(t)
	c := cpu.New(2)
	t.Cleanup(c.Close)
	want := runGRPO(t, backendTrainer(t, dir, c, full, t.TempDir()), backendRunSteps)
	be := nb(t)
	got := runGRPO(t, backendTrainer(t, dir, onCopying(be), full, t.TempDir()), backendRunSteps)
	compareGRPORuns(t, want, got)
	for s, m := range got.metrics {
		t.Logf("step %d: reward %.4g, loss %.6g (cpu %.6g), sampling_logp_difference/max %.3g (cpu %.3g)",
			s, m[MetricReward], m[MetricLoss], want.metrics[s][MetricLoss], m[MetricSamplingLogpDiffMax], want.metrics[s][MetricSamplingLogpDiffMax])
	}
	checkSamplingLogp(t, "backend under test", got.metrics, exactSampling(be))
	checkSamplingLogp(t, "kernels/cpu", want.metrics, exactSampling(c))
}

// compareGRPORuns asserts what backendGRPOVsCPU promises.
func compareGRPORuns(t *testing.T, want, got grpoRun) {
	t.Helper()
	require.Equal(t, want.completions, got.completions, "sampled completions")
	require.Equal(t, want.rewards, got.rewards, "rewards")
	lp := kerneltest.Tolerance("ModelLogProbs")
	require.Len(t, got.metrics, len(want.metrics))
	for s := range want.metrics {
		for _, k := range []string{MetricLoss, MetricKL, MetricEntropy, MetricReward, MetricRewardStd} {
			w, g := want.metrics[s][k], got.metrics[s][k]
			assert.InDelta(t, w, g, lp.ATol+lp.RTol*math.Abs(w), "step %d %s", s, k)
		}
	}
	tol := kerneltest.Tolerance("GRPORunParams")
	require.Len(t, got.params, len(want.params))
	worst := 0.0
	for name, w := range want.params {
		g, ok := got.params[name]
		require.True(t, ok, "parameter %s", name)
		for i := range w {
			worst = math.Max(worst, math.Abs(float64(g[i])-float64(w[i])))
		}
		kerneltest.CheckClose(t, "parameter "+name, g, w, tol)
	}
	t.Logf("parameters after %d steps: max abs difference vs kernels/cpu %.3g", len(want.metrics), worst)
}

// backendResume checks a bit-exact resume on the backend under test: a
// run of 3 generation batches checkpointed after the second, and a fresh
// trainer (a fresh backend, the checkpoint reloaded) resumed from there,
// must write byte-identical adapter and optimizer files. It then loads the
// PEFT adapter the run saved onto a kernels/cpu model and compares its
// logits with the backend model's.
func backendResume(t *testing.T, nb newBackend) {
	dir := backendCheckpoint(t)
	fresh := func() *Trainer { return backendTrainer(t, dir, onCopying(nb(t)), false, t.TempDir()) }
	resumed, want := checkResumeBitExact(t, fresh(), fresh, backendRows, 3, 2)

	// The checkpoint's adapter is a PEFT folder: on kernels/cpu it gives
	// the backend model's logits.
	c := cpu.New(2)
	t.Cleanup(c.Close)
	m, err := model.Load(dir, c)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	_, err = model.LoadAdapter(want, m)
	require.NoError(t, err)
	ids := tokenizer.Tiny().Encode("Guess the number: 5")
	wantLogits, err := resumed.pol.m.Logits(ids, model.Options{})
	require.NoError(t, err)
	gotLogits, err := m.Logits(ids, model.Options{})
	require.NoError(t, err)
	kerneltest.CheckClose(t, "logits of the saved adapter on kernels/cpu", gotLogits, wantLogits, kerneltest.Tolerance("ModelLogits"))
}

// backendConversations are short SFT examples (about 25 tokens each), so
// that the SIMT host build trains on them in seconds.
func backendConversations() []Conversation {
	var out []Conversation
	for i := range 4 {
		out = append(out, Conversation{Messages: []tokenizer.Message{
			{Role: "user", Content: fmt.Sprintf("Count from %d.", i)},
			{Role: "assistant", Content: fmt.Sprintf("%d %d %d", i, i+1, i+2)},
		}})
	}
	return out
}

// backendSFTVsCPU runs 3 SFT steps (LoRA and full) on the backend under
// test and on kernels/cpu: the losses must agree within ModelLogProbs's
// tolerance, and no allocation of the backend under test may be left live
// after the model is closed. (SFT's AdamW ε is 1e-8, so a gradient near 0
// whose sign is float noise may jump by 2·lr on one backend only; such a
// parameter's effect on the next loss is its near-0 gradient times the
// jump, far below the tolerance, which is why the losses, not the
// parameters, are compared here.)
func backendSFTVsCPU(t *testing.T, nb newBackend) {
	dir := backendCheckpoint(t)
	for _, lora := range []*model.LoRAConfig{{R: 4, Alpha: 8}, nil} {
		name := map[bool]string{true: "lora", false: "full"}[lora != nil]
		t.Run(name, func(t *testing.T) {
			run := func(be kernels.Backend) []float64 {
				m, err := model.Load(dir, be)
				require.NoError(t, err)
				cfg := DefaultSFTConfig()
				cfg.MaxSteps, cfg.BatchSize, cfg.LearningRate = 3, 2, 3e-3
				cfg.LoRA, cfg.OutputDir, cfg.Seed = lora, t.TempDir(), 3
				rep, err := SFT(context.Background(), m, tokenizer.Tiny(), backendConversations(), cfg)
				require.NoError(t, err)
				var losses []float64
				for _, h := range rep.History {
					losses = append(losses, h.Metrics[MetricLoss])
				}
				require.NoError(t, m.Close())
				return losses
			}
			c := cpu.New(2)
			defer c.Close()
			want := run(c)
			under := onCopying(nb(t))
			got := run(under)
			lp := kerneltest.Tolerance("ModelLogProbs")
			require.Len(t, got, len(want))
			for s := range want {
				assert.InDelta(t, want[s], got[s], lp.ATol+lp.RTol*math.Abs(want[s]), "step %d loss", s)
			}
			t.Logf("SFT %s losses: %v (kernels/cpu %v)", name, got, want)
			assert.Equal(t, 0, under.Live(), "allocations live after SFT and Model.Close")
			assert.Empty(t, under.BadFrees, "memory freed twice")
		})
	}
}

// TestBackendHarnessCopyingCPU runs the harness over kernels/cpu behind a
// copying kerneltest.Counting: the arithmetic is kernels/cpu's on both
// sides, so the GRPO runs' parameters, the SFT losses and the resume must
// come out bit for bit equal (the harness's tolerances are then not
// needed), and the sampled log-probs equal the training forward's: bit for
// bit where kernels/cpu's attention is batch-invariant (off AVX-512: run
// it with GODEBUG=cpu.avx512f=off on an AVX-512 machine), within
// samplingLogpBound elsewhere, and within the bound with
// BatchInvariantRollouts off (where they differ: the training MatMul packs
// and reads Bᵀ, so the check is not vacuous).
func TestBackendHarnessCopyingCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	nb := func(t *testing.T) kernels.Backend {
		c := cpu.New(2)
		t.Cleanup(c.Close)
		return c
	}
	t.Run("grpo-lora", func(t *testing.T) { backendGRPOVsCPU(t, nb, false) })
	t.Run("grpo-full", func(t *testing.T) { backendGRPOVsCPU(t, nb, true) })
	t.Run("resume", func(t *testing.T) { backendResume(t, nb) })
	t.Run("sft", func(t *testing.T) { backendSFTVsCPU(t, nb) })
	t.Run("grpo-lora-mode-off", func(t *testing.T) {
		c := cpu.New(2)
		t.Cleanup(c.Close)
		tr := backendTrainer(t, backendCheckpoint(t), c, false, t.TempDir())
		tr.pol.invariant = false // what BatchInvariantRollouts false sets
		tr.pol.tr.SetBatchInvariant(false)
		r := runGRPO(t, tr, backendRunSteps)
		checkSamplingLogp(t, "mode off", r.metrics, false)
		worst := 0.0
		for _, m := range r.metrics {
			worst = max(worst, m[MetricSamplingLogpDiffMax])
		}
		t.Logf("sampling_logp_difference/max without the mode: %.3g", worst)
		if c.SIMD() != "generic" {
			assert.Positive(t, worst, "without the mode the training passes sum in other orders")
		}
	})
}
