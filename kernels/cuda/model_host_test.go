//go:build cudahost

package cuda_test

// The model end to end through the SIMT host build: a tiny random bf16
// checkpoint, written as a real Hugging Face folder (config.json and
// model.safetensors), loaded twice, once with cuda.Host as the backend
// (every op one of this package's CUDA kernels, run on the CPU through the
// shim) and once with kernels/cpu, and compared at every entry point the
// trainer uses: all-position logits, continuous batched generation through
// the paged KV cache with a shared prefix, LogProbs, and LoRA training
// steps (forward, PolicyLoss, backward, AdamW). A second test wraps Host in
// kerneltest.Counting and asserts the crossings model/transfer_test.go
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

// hostShape is the e2e model: small enough that the SIMT build (one fiber
// per CUDA thread) runs every entry point in seconds, large enough that
// every kernel takes its general path: two layers, GQA (4 query heads on 2
// KV heads), head_dim 32, a vocabulary over one 256-thread block, and K/V
// blocks of the paged cache filled past their first block (64 positions).
func hostShape() model.Config {
	return model.Config{
		VocabSize: 320, HiddenSize: 64, IntermediateSize: 160,
		NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 32,
		RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
		BOSTokenID: -1, MaxPositions: 512, EOSTokenIDs: []int32{319},
	}
}

// hostCheckpoint writes the random bf16 checkpoint (matrix weights
// N(0, 0.08), so the logits spread enough that greedy picks are not near
// ties; norm weights 1 + N(0, 0.1)).
func hostCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, hostShape(), kernels.BF16, 11, model.RandomOptions{Std: 0.08, NormStd: 0.1}),
		"writing the random checkpoint")
	return dir
}

// pair is one checkpoint loaded on the host build and on the CPU backend.
type pair struct {
	host, cpu *model.Model
}

func loadPair(t *testing.T, dir string) pair {
	t.Helper()
	cb := cpu.New(2)
	t.Cleanup(cb.Close)
	return pair{host: loadOn(t, dir, cuda.NewHost(2)), cpu: loadOn(t, dir, cb)}
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
		t.Logf("%s: max abs difference host build vs kernels/cpu %.3g", kind, d)
	}
}

// flat concatenates rows.
func flat(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// TestModelHostVsCPU runs the model's entry points on cuda.Host and on
// kernels/cpu and compares them. Tolerances are the table's model-level
// entries (kerneltest.Tolerance "ModelLogits", "ModelLogProbs",
// "ModelGrad", "ModelUpdate"); token ids must be equal.
func TestModelHostVsCPU(t *testing.T) {
	dir := hostCheckpoint(t)
	vocab := hostShape().VocabSize
	ctx := t.Context()

	t.Run("logits", func(t *testing.T) {
		p := loadPair(t, dir)
		ids := tokens(rand.New(rand.NewPCG(1, 2)), 71, vocab) // past one 64-position KV block
		want, err := p.cpu.Logits(ids, model.Options{})
		require.NoError(t, err)
		got, err := p.host.Logits(ids, model.Options{})
		require.NoError(t, err)
		e := maxErr{}
		e.check(t, "ModelLogits", "all-position logits", got, want)
		e.log(t)
	})

	t.Run("generate", func(t *testing.T) {
		p := loadPair(t, dir)
		want := generate(t, ctx, p.cpu, vocab)
		got := generate(t, ctx, p.host, vocab)
		require.Len(t, got, len(want))
		e := maxErr{}
		defer e.log(t)
		for i := range want {
			require.NoError(t, want[i].Err, "CPU request %d", i)
			require.NoError(t, got[i].Err, "host request %d", i)
			assert.Equal(t, want[i].Tokens, got[i].Tokens, "request %d's tokens", i)
			assert.Equal(t, want[i].Stopped, got[i].Stopped, "request %d stopped", i)
			if len(got[i].Tokens) == len(want[i].Tokens) {
				e.check(t, "ModelLogProbs", "sampling log-probs", got[i].LogProbs, want[i].LogProbs)
				e.check(t, "ModelLogProbs", "full log-probs", got[i].FullLogProbs, want[i].FullLogProbs)
			}
		}
	})

	t.Run("logprobs", func(t *testing.T) {
		p := loadPair(t, dir)
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
		got, err := p.host.LogProbs(ctx, seqs, opts)
		require.NoError(t, err)
		e := maxErr{}
		for i := range want {
			e.check(t, "ModelLogProbs", "log-probs", got[i].LogProbs, want[i].LogProbs)
			e.check(t, "ModelLogProbs", "entropies", got[i].Entropy, want[i].Entropy)
		}
		e.log(t)
	})

	t.Run("train", func(t *testing.T) {
		p := loadPair(t, dir)
		want := trainSteps(t, ctx, p.cpu, vocab)
		got := trainSteps(t, ctx, p.host, vocab)
		lpTol := kerneltest.Tolerance("ModelLogProbs")
		e := maxErr{}
		for s := range want {
			assert.InDelta(t, want[s].loss, got[s].loss, lpTol.ATol+lpTol.RTol*math.Abs(want[s].loss), "step %d loss", s)
			e.check(t, "ModelLogProbs", fmt.Sprintf("step %d log-probs", s), got[s].logp, want[s].logp)
			require.Len(t, got[s].grads, len(want[s].grads))
			for i := range want[s].grads {
				e.check(t, "ModelGrad", fmt.Sprintf("step %d gradient of %s", s, want[s].names[i]), got[s].grads[i], want[s].grads[i])
				e.check(t, "ModelUpdate", fmt.Sprintf("step %d update of %s", s, want[s].names[i]), got[s].params[i], want[s].params[i])
			}
		}
		e.log(t)
		// The second step's forward used the first step's update: its
		// log-probs moved by far more than the comparison's tolerance, on
		// both backends alike (checked above).
		moved := 0.0
		for i := range got[0].logp {
			moved = math.Max(moved, math.Abs(float64(got[1].logp[i]-got[0].logp[i])))
		}
		t.Logf("the first step's update moved the log-probs by up to %.3g", moved)
		assert.Greater(t, moved, 100*(lpTol.ATol+lpTol.RTol*8), "the update did not reach the host build's forward")
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

// stepResult is what one training step produced: the loss and log-probs of
// Accumulate, the gradients it accumulated, and the parameters after the
// optimizer step (in Params order).
type stepResult struct {
	loss          float64
	logp          []float32
	names         []string
	grads, params [][]float32
}

// trainSteps attaches LoRA adapters (the same seed on either backend) and
// runs two steps of the clipped GRPO objective with a KL term.
func trainSteps(t *testing.T, ctx context.Context, m *model.Model, vocab int) []stepResult {
	t.Helper()
	require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 4, Alpha: 8}, 21))
	tr, err := model.NewTrainable(m, model.TrainOptions{})
	require.NoError(t, err)
	t.Cleanup(tr.Release)
	be := m.Backend
	cfg := model.DefaultAdamWConfig(2e-2)
	cfg.Eps = 1e-3 // bounds how far a gradient's float32 noise moves the update (kerneltest.Tolerance "ModelUpdate")
	opt, err := model.NewAdamW(be, tr.Params(), cfg)
	require.NoError(t, err)
	t.Cleanup(opt.Release)

	rng := rand.New(rand.NewPCG(9, 10))
	seqs := []model.TrainSeq{{IDs: tokens(rng, 70, vocab), Start: 20}, {IDs: tokens(rng, 13, vocab), Start: 4}}
	ref, err := tr.RefLogProbs(ctx, seqs)
	require.NoError(t, err)
	loss := model.Loss{
		LossParams: kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.05},
		SeqAdv:     []float32{1.5, -0.7},
		RefLogP:    ref,
	}
	for _, s := range seqs {
		w, old := make([]float32, s.Scored()), make([]float32, s.Scored())
		for j := range w {
			w[j] = 1 / float32(s.Scored())
			old[j] = ref[len(loss.Weight)][j] - 0.05*float32(j%3)
		}
		loss.Weight, loss.OldLogP = append(loss.Weight, w), append(loss.OldLogP, old)
	}
	var out []stepResult
	for range 2 {
		tr.ZeroGrad()
		res, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		r := stepResult{loss: res.Loss, logp: flat(res.LogP)}
		for _, p := range tr.Params() {
			g := make([]float32, p.Grad.Len())
			require.NoError(t, be.Download(kernels.HostF32(g), p.Grad), "downloading %s's gradient", p.Name)
			r.names, r.grads = append(r.names, p.Name), append(r.grads, g)
		}
		_, err = opt.Step()
		require.NoError(t, err)
		for _, p := range tr.Params() {
			r.params = append(r.params, append([]float32(nil), p.Data...))
		}
		out = append(out, r)
	}
	require.NoError(t, be.Err())
	return out
}

// TestModelHostTransfers wraps cuda.Host in kerneltest.Counting and
// asserts the crossings model/transfer_test.go asserts on kernels/cpu, on
// the backend whose kernels a GPU runs: a decode step of a Batch uploads
// its ids and positions once, learns one scalar (AllFinite over the
// logits chunk) and downloads the sampled ids and their two log-probs,
// never the logits ([rows, V] stays in backend memory); LogProbs and a
// LoRA training step move only their inputs and per-token results; and no
// compute op gets a host Buffer the backend did not allocate or import
// (HostArgs 0).
func TestModelHostTransfers(t *testing.T) {
	c := &kerneltest.Counting{Backend: cuda.NewHost(2)}
	m := loadOn(t, hostCheckpoint(t), c)
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
		assert.Equal(t, kerneltest.Transfers{Uploads: 1, Downloads: 2, Scalars: 1, UploadElems: 4, DownloadElems: 6}, c.N,
			"decode step %d; host arguments: %v", step, c.Foreign)
		assert.Less(t, c.N.DownloadElems, vocab, "a decode step downloaded logits")
	}

	c.Reset()
	_, err = m.LogProbs(ctx, []model.Scored{{Tokens: []int32{1, 2, 3, 4, 5}, Start: 2}, {Tokens: []int32{6, 7, 8}}}, model.LogProbsOptions{Entropy: true})
	require.NoError(t, err)
	assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 1, UploadElems: 26, DownloadElems: 10}, c.N,
		"LogProbs; host arguments: %v", c.Foreign)

	tr, err := model.NewTrainable(m, model.TrainOptions{})
	require.NoError(t, err)
	t.Cleanup(tr.Release)
	opt, err := model.NewAdamW(c, tr.Params(), model.DefaultAdamWConfig(1e-2))
	require.NoError(t, err)
	t.Cleanup(opt.Release)
	seqs := []model.TrainSeq{{IDs: []int32{1, 2, 3, 4, 5}, Start: 2}, {IDs: []int32{6, 7, 8}, Start: 1}}
	loss := model.Loss{LossParams: kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.2},
		SeqAdv: []float32{1, -1}, Weight: [][]float32{{0.2, 0.2, 0.2}, {0.2, 0.2}}, OldLogP: [][]float32{{-6, -5.5, -6}, {-5.8, -6}}}
	for step := range 2 {
		c.Reset()
		res, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		require.Equal(t, 5, res.Tokens)
		_, err = opt.Step()
		require.NoError(t, err)
		explicit := c.N
		explicit.HostArgs = 0
		assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 2, Scalars: 1, UploadElems: 41, DownloadElems: 45}, explicit,
			"training step %d's explicit crossings (Accumulate, AdamW.Step)", step)
		assert.Equal(t, 0, c.N.HostArgs, "training step %d's host Buffer arguments (first: %v)", step, c.Foreign)
	}
	require.NoError(t, c.Err())
}
