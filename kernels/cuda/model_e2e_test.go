//go:build cudahost || cuda

package cuda_test

// The model end to end on a backend of this package's CUDA kernels: the
// SIMT host build (cuda.Host, model_host_test.go, in make test) or a GPU
// (cuda.Device, model_cuda_test.go, in make gpu-check). A tiny random bf16
// checkpoint, written as a real Hugging Face folder (config.json and
// model.safetensors), is loaded twice, once on the backend under test and
// once on kernels/cpu, and compared at every entry point the trainer uses
// (e2eVsCPU): all-position logits, continuous batched generation through
// the paged KV cache with a shared prefix, LogProbs; and LoRA training
// steps (e2eTrainVsCPU: forward, PolicyLoss, backward, AdamW).
// e2eTransfers and e2eTrainTransfers wrap the backend in
// kerneltest.Counting and assert the crossings model/transfer_test.go
// asserts on the CPU backend: a decode step never downloads logits and no
// compute op gets host memory the backend did not make.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/cuda"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
)

// e2eShape is the e2e model: small enough that the SIMT build (one fiber
// per CUDA thread) runs every entry point in seconds, large enough that
// every kernel takes its general path: two layers, GQA (4 query heads on 2
// KV heads), head_dim 32, a vocabulary over one 256-thread block, and K/V
// blocks of the paged cache filled past their first block (64 positions).
func e2eShape() model.Config {
	return model.Config{
		VocabSize: 320, HiddenSize: 64, IntermediateSize: 160,
		NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		BOSTokenID: -1, MaxPositions: 512, EOSTokenIDs: []int32{319},
	}
}

// e2eCheckpoint writes the random bf16 checkpoint (matrix weights
// N(0, 0.08), so the logits spread enough that greedy picks are not near
// ties; norm weights 1 + N(0, 0.1)).
func e2eCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, e2eShape(), kernels.BF16, 11, model.RandomOptions{Std: 0.08, NormStd: 0.1}),
		"writing the random checkpoint")
	return dir
}

// newBackend returns a fresh backend under test; the test's cleanup
// closes it if it needs closing.
type newBackend func(t *testing.T) kernels.Backend

// pair is one checkpoint loaded on the backend under test and on the CPU
// backend.
type pair struct {
	be, cpu *model.Model
}

// loadPair loads dir on kernels/cpu and on the backend under test; the
// latter through kerneltest.Counting with CopyImports, so its imports are
// copies as a device's are even on the host build (cuda.Host's own Import
// returns the host memory itself), and a host weight the model updated
// without the backend seeing it would show as a difference.
func loadPair(t *testing.T, dir string, nb newBackend) pair {
	t.Helper()
	cb := cpu.New(2)
	t.Cleanup(cb.Close)
	return pair{be: loadOn(t, dir, &kerneltest.Counting{Backend: nb(t), CopyImports: true}), cpu: loadOn(t, dir, cb)}
}

func loadOn(t *testing.T, dir string, be kernels.Backend) *model.Model {
	t.Helper()
	m, err := model.Load(dir, be)
	require.NoError(t, err, "loading the checkpoint")
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m
}

func tokens(rng *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab - 1)) // never the EOS id, so no request stops early by chance of the prompt
	}
	return ids
}

// maxErr records the largest absolute difference seen per kind of
// comparison, logged at the end of a test (the figures behind the
// tolerance table's model entries).
type maxErr map[string]float64

// check compares got with want under the table's tolerance for kind and
// records the largest absolute difference.
func (e maxErr) check(t *testing.T, kind, what string, got, want []float32) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		e[kind] = math.Max(e[kind], math.Abs(float64(got[i])-float64(want[i])))
	}
	kerneltest.CheckClose(t, what, got, want, kerneltest.Tolerance(kind))
}

// log reports the recorded maxima.
func (e maxErr) log(t *testing.T) {
	t.Helper()
	for kind, d := range e {
		t.Logf("%s: max abs difference vs kernels/cpu %.3g", kind, d)
	}
}

// e2eVsCPU runs the model's inference entry points on the backend under
// test and on kernels/cpu and compares them. Tolerances are the table's
// model-level entries (kerneltest.Tolerance "ModelLogits",
// "ModelLogProbs", "ModelLogProbsBF16KV"); token ids must be equal.
func e2eVsCPU(t *testing.T, nb newBackend) {
	dir := e2eCheckpoint(t)
	vocab := e2eShape().VocabSize
	ctx := t.Context()

	t.Run("logits", func(t *testing.T) {
		p := loadPair(t, dir, nb)
		ids := tokens(rand.New(rand.NewPCG(1, 2)), 71, vocab) // past one 64-position KV block
		want, err := p.cpu.Logits(ids, model.Options{})
		require.NoError(t, err)
		got, err := p.be.Logits(ids, model.Options{})
		require.NoError(t, err)
		e := maxErr{}
		e.check(t, "ModelLogits", "all-position logits", got, want)
		e.log(t)
	})

	// The default KV cache (f32, 64-position blocks) and a bf16 one of
	// 16-position blocks (more blocks per sequence, copy-on-write at
	// another boundary, the bf16 attention path). With bf16 K/V the
	// backends' float32 differences flip an occasional bf16 rounding, so
	// log-probs get that entry of the table; token ids stay equal.
	for _, kv := range []model.KVOptions{{}, {BlockSize: 16, DType: kernels.BF16}} {
		lpKind := "ModelLogProbs"
		if kv.DType == kernels.BF16 {
			lpKind = "ModelLogProbsBF16KV"
		}
		t.Run(fmt.Sprintf("generate/kv%v-%d", kv.DType, kv.BlockSize), func(t *testing.T) {
			p := loadPair(t, dir, nb)
			require.NoError(t, p.cpu.SetKVOptions(kv))
			require.NoError(t, p.be.SetKVOptions(kv))
			want := generate(t, ctx, p.cpu, vocab)
			got := generate(t, ctx, p.be, vocab)
			require.Len(t, got, len(want))
			e := maxErr{}
			defer e.log(t)
			for i := range want {
				require.NoError(t, want[i].Err, "CPU request %d", i)
				require.NoError(t, got[i].Err, "request %d on the backend", i)
				assert.Equal(t, want[i].Tokens, got[i].Tokens, "request %d's tokens", i)
				assert.Equal(t, want[i].Stopped, got[i].Stopped, "request %d stopped", i)
				if len(got[i].Tokens) == len(want[i].Tokens) {
					e.check(t, lpKind, "sampling log-probs", got[i].LogProbs, want[i].LogProbs)
					e.check(t, lpKind, "full log-probs", got[i].FullLogProbs, want[i].FullLogProbs)
				}
			}
		})
	}

	t.Run("logprobs", func(t *testing.T) {
		p := loadPair(t, dir, nb)
		rng := rand.New(rand.NewPCG(5, 6))
		a, b := tokens(rng, 80, vocab), tokens(rng, 9, vocab)
		mask := make([]bool, len(a)-10)
		for i := range mask {
			mask[i] = i%3 != 1
		}
		seqs := []model.Scored{{Tokens: a, Start: 10, Mask: mask}, {Tokens: b}}
		opts := model.LogProbsOptions{Entropy: true, StepTokens: 48, ChunkRows: 16, Temperature: 0.8}
		want, err := p.cpu.LogProbs(ctx, seqs, opts)
		require.NoError(t, err)
		got, err := p.be.LogProbs(ctx, seqs, opts)
		require.NoError(t, err)
		e := maxErr{}
		for i := range want {
			e.check(t, "ModelLogProbs", "log-probs", got[i].LogProbs, want[i].LogProbs)
			e.check(t, "ModelLogProbs", "entropies", got[i].Entropy, want[i].Entropy)
		}
		e.log(t)
	})
}

// generate runs one continuous batch: a prompt prefilled once and forked
// (its forks share its KV blocks; the first write copies the shared
// block), greedy and sampled forks, two unrelated requests, a prompt long
// enough to be prefilled in chunks while others decode, more requests than
// slots (so queued requests join as others finish) and different lengths.
func generate(t *testing.T, ctx context.Context, m *model.Model, vocab int) []model.Completion {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	root := model.NewSequence(100, tokens(rng, 61, vocab)...) // ends 3 short of a block: forks cross into a second block
	require.NoError(t, m.Prefill(ctx, []*model.Sequence{root}, model.BatchOptions{}))
	t.Cleanup(root.Release)
	greedy := kernels.SamplingParams{}
	sampled := kernels.SamplingParams{Temperature: 0.9, TopK: 40, TopP: 0.95}
	var reqs []model.Request
	for i, s := range []kernels.SamplingParams{greedy, sampled, sampled, greedy} {
		reqs = append(reqs, model.Request{Seq: root.Fork(uint64(i + 1)), MaxNewTokens: 5 + 2*i, Sampling: s})
	}
	reqs = append(reqs,
		model.Request{Seq: model.NewSequence(7, tokens(rng, 90, vocab)...), MaxNewTokens: 6, Sampling: sampled},
		model.Request{Seq: model.NewSequence(8, tokens(rng, 5, vocab)...), MaxNewTokens: 9},
		model.Request{Seq: model.NewSequence(9, tokens(rng, 12, vocab)...), MaxNewTokens: 4, Sampling: kernels.SamplingParams{Temperature: 1.2, MinP: 0.05}})
	comps, err := m.Generate(ctx, reqs, model.BatchOptions{MaxBatch: 3, PrefillTokens: 32})
	require.NoError(t, err)
	for _, r := range reqs {
		r.Seq.Release()
	}
	return comps
}

// e2eTransfers wraps the backend under test in kerneltest.Counting and
// asserts the inference crossings model/transfer_test.go asserts on
// kernels/cpu, with LoRA adapters attached and imports that copy (as
// loadPair's): Load imports each weight once (the checkpoint's bf16
// matrices go to the backend as they are) and moves nothing else; a decode
// step of a Batch uploads its sampling arguments, ids and positions once
// (with the sequence offsets and block tables when they changed; the same
// whether it is replayed from a graph or not) and downloads the sampled
// ids and their two log-probs (one DownloadAll), never the logits ([rows,
// V] stays in backend
// memory); LogProbs moves only its inputs and per-token results; and no
// compute op gets a host Buffer the backend did not allocate or import
// (HostArgs 0).
func e2eTransfers(t *testing.T, nb newBackend) {
	c := &kerneltest.Counting{Backend: nb(t), CopyImports: true}
	m := loadOn(t, e2eCheckpoint(t), c)
	weights := model.WeightNames(m.Config)
	elems := 0
	for _, w := range weights {
		n := 1
		for _, d := range w.Shape {
			n *= d
		}
		elems += n
	}
	assert.Equal(t, kerneltest.Transfers{Imports: len(weights), UploadElems: elems}, c.N,
		"Load: one Import per weight of the checkpoint (the tied lm_head shares the embedding's), nothing else")
	require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 2, Alpha: 4}, 3))
	ctx := t.Context()
	vocab := m.Config.VocabSize

	b := m.NewBatch(model.BatchOptions{MaxBatch: 2})
	t.Cleanup(b.Release)
	for i, prompt := range [][]int32{{1, 2, 3}, {4, 5}} {
		_, err := b.Add(model.Request{Seq: model.NewSequence(uint64(i), prompt...), MaxNewTokens: 6,
			Sampling: kernels.SamplingParams{Temperature: float32(i)}}) // one greedy row, one sampled
		require.NoError(t, err)
	}
	_, err := b.Step(ctx) // prefill and the first token
	require.NoError(t, err)
	for step := range 3 {
		require.Equal(t, 2, b.Len())
		c.Reset()
		_, err = b.Step(ctx)
		require.NoError(t, err)
		up := 12 + 4 // the sampling arguments (6 words a row), the ids and positions
		if step == 0 {
			up += 3 + 2 // the first decode step's new layout: offsets and block tables
		}
		assert.Equal(t, kerneltest.Transfers{Uploads: 1, Downloads: 2, UploadElems: up, DownloadElems: 6}, c.N,
			"decode step %d; host arguments: %v", step, c.Foreign)
		assert.Less(t, c.N.DownloadElems, vocab, "a decode step downloaded logits")
	}

	c.Reset()
	_, err = m.LogProbs(ctx, []model.Scored{{Tokens: []int32{1, 2, 3, 4, 5}, Start: 2}, {Tokens: []int32{6, 7, 8}}}, model.LogProbsOptions{Entropy: true})
	require.NoError(t, err)
	assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 1, UploadElems: 31, DownloadElems: 10}, c.N,
		"LogProbs; host arguments: %v", c.Foreign)

	require.NoError(t, c.Err())
}

// e2eSyncs counts on the Device itself (Counters, at the driver seam) what
// a decode step and a training step ask of the driver. A decode step of a
// two-row batch waits for the device exactly once (the sampled ids and
// log-probs, one DownloadAll). Op by op (BatchOptions.NoGraphs) it makes
// the same launches and staged uploads every step (the step's one Upload
// of sampling arguments, ids and positions, and MatMulMany's descriptors);
// with the Device's graphs, the first decode step runs op by op too (it
// sizes what the ops keep), and every later one makes no kernel launch
// from the host: one Upload, one graph launch, one wait. A LoRA training
// step (Accumulate, AdamW.Step) waits only where the host reads a value
// (its two downloads and the gradient norm), not per op.
func e2eSyncs(t *testing.T, nb newBackend) {
	d, ok := nb(t).(*cuda.Device)
	require.True(t, ok, "the backend under test is not a *cuda.Device")
	m := loadOn(t, e2eCheckpoint(t), d)
	require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 2, Alpha: 4}, 3))
	ctx := t.Context()
	decode := func(noGraphs bool) (launches, uploads []int64) {
		b := m.NewBatch(model.BatchOptions{MaxBatch: 2, NoGraphs: noGraphs})
		defer b.Release()
		for i, prompt := range [][]int32{{1, 2, 3}, {4, 5}} {
			_, err := b.Add(model.Request{Seq: model.NewSequence(uint64(i), prompt...), MaxNewTokens: 8,
				Sampling: kernels.SamplingParams{Temperature: float32(i)}})
			require.NoError(t, err)
		}
		_, err := b.Step(ctx) // prefill and the first token
		require.NoError(t, err)
		for step := range 4 {
			c0 := d.Counters()
			_, err := b.Step(ctx)
			require.NoError(t, err)
			c1 := d.Counters()
			assert.Equal(t, int64(1), c1.Syncs-c0.Syncs, "decode step %d: waits for the device", step)
			assert.Equal(t, int64(2), c1.Downloads-c0.Downloads, "decode step %d: downloads", step)
			wantGraphs := int64(0)
			if !noGraphs && step > 0 {
				wantGraphs = 1
			}
			assert.Equal(t, wantGraphs, c1.GraphLaunches-c0.GraphLaunches, "decode step %d: graph launches", step)
			launches = append(launches, c1.Launches-c0.Launches)
			uploads = append(uploads, c1.Uploads-c0.Uploads)
		}
		return launches, uploads
	}
	launches, uploads := decode(true)
	for i := range launches {
		assert.Equal(t, launches[0], launches[i], "launches per decode step %v", launches)
		assert.Equal(t, uploads[0], uploads[i], "uploads per decode step %v", uploads)
	}
	t.Logf("a decode step of %d layers, batch 2, op by op: %d launches, %d staged uploads, 1 wait", m.Config.NumLayers, launches[0], uploads[0])
	gl, gu := decode(false)
	assert.Equal(t, []int64{launches[0], 0, 0, 0}, gl, "launches per decode step with graphs")
	assert.Equal(t, []int64{uploads[0], 1, 1, 1}, gu, "uploads per decode step with graphs")
	t.Logf("with graphs: launches %v, uploads %v, 1 wait each", gl, gu)

	tr, opt, seqs, loss := smallTraining(t, m, d)
	for step := range 2 {
		c0 := d.Counters()
		_, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		_, err = opt.Step()
		require.NoError(t, err)
		c1 := d.Counters()
		syncs, n := c1.Syncs-c0.Syncs, c1.Launches-c0.Launches
		assert.Equal(t, int64(3), syncs, "training step %d: waits (results, clip flags, gradient norm)", step)
		assert.Greater(t, n, 20*syncs, "training step %d: %d launches", step, n)
		t.Logf("training step %d: %d launches, %d waits", step, n, syncs)
	}
	require.NoError(t, d.Sync())
}
