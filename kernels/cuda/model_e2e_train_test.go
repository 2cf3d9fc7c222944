//go:build cudahost || cuda

package cuda_test

// LoRA training end to end on a backend of this package's CUDA kernels
// against kernels/cpu (see model_e2e_test.go): the host build's
// model_host_test.go and the GPU check's model_cuda_test.go run it.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
)

// e2eTrainVsCPU attaches the same LoRA adapters on the backend under test
// and on kernels/cpu and runs three training steps on each (Accumulate
// with the clipped objective and a KL term, AdamW): the loss, log-probs,
// gradients and updated adapters must be close, and each step's forward
// must see the previous update.
func e2eTrainVsCPU(t *testing.T, nb newBackend) {
	dir := e2eCheckpoint(t)
	vocab := e2eShape().VocabSize
	ctx := t.Context()
	p := loadPair(t, dir, nb)
	want := trainSteps(t, ctx, p.cpu, vocab)
	got := trainSteps(t, ctx, p.be, vocab)
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
	// Each step's forward used the previous step's update: its log-probs
	// moved by far more than the comparison's tolerance, on both
	// backends alike (checked above). The first update moves B (A's
	// gradient is 0 while B is, as PEFT initialises it, so A only decays);
	// the second moves A too.
	for s := 1; s < len(got); s++ {
		moved := 0.0
		for i := range got[s].logp {
			moved = math.Max(moved, math.Abs(float64(got[s].logp[i]-got[s-1].logp[i])))
		}
		t.Logf("step %d's update moved the log-probs by up to %.3g", s-1, moved)
		assert.Greater(t, moved, 100*(lpTol.ATol+lpTol.RTol*8), "step %d's update did not reach the forward", s-1)
	}
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
// runs three steps of the clipped GRPO objective with a KL term.
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
	for range 3 {
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
			v := make([]float32, p.Data.Len())
			require.NoError(t, be.Download(kernels.HostF32(v), p.Data), "downloading %s", p.Name)
			r.params = append(r.params, v)
		}
		out = append(out, r)
	}
	require.NoError(t, be.Err())
	return out
}

// flat concatenates rows.
func flat(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// e2eTrainTransfers wraps the backend under test in kerneltest.Counting
// and asserts a LoRA training step's crossings, as model/transfer_test.go
// does on kernels/cpu: Accumulate uploads the ids, positions, scored rows
// and targets once and the loss's per-token inputs once, downloads the
// per-token results and the clip flags once each, AdamW.Step learns the
// gradient norm's scalar; no compute op gets host memory the backend did
// not allocate or import (HostArgs 0: the parameters, their gradients and
// moments, the adapters' Bᵀ and every activation are the backend's).
func e2eTrainTransfers(t *testing.T, nb newBackend) {
	c := &kerneltest.Counting{Backend: nb(t), CopyImports: true}
	m := loadOn(t, e2eCheckpoint(t), c)
	require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 2, Alpha: 4}, 3))
	ctx := t.Context()
	tr, opt, seqs, loss := smallTraining(t, m, c)
	for step := range 2 {
		c.Reset()
		res, err := tr.Accumulate(ctx, seqs, loss)
		require.NoError(t, err)
		require.Equal(t, 5, res.Tokens)
		_, err = opt.Step()
		require.NoError(t, err)
		explicit := c.N
		explicit.HostArgs = 0
		assert.Equal(t, kerneltest.Transfers{Uploads: 2, Downloads: 2, Scalars: 1, UploadElems: 46, DownloadElems: 45}, explicit,
			"training step %d's explicit crossings (Accumulate, AdamW.Step)", step)
		assert.Equal(t, 0, c.N.HostArgs, "training step %d's host Buffer arguments (first: %v)", step, c.Foreign)
	}
	require.NoError(t, c.Err())
}

// smallTraining prepares a LoRA step over m's adapters on be: the
// Trainable, AdamW, two sequences of 5 and 3 tokens scoring 3 and 2, and
// the clipped loss over them.
func smallTraining(t *testing.T, m *model.Model, be kernels.Backend) (*model.Trainable, *model.AdamW, []model.TrainSeq, model.Loss) {
	tr, err := model.NewTrainable(m, model.TrainOptions{})
	require.NoError(t, err)
	t.Cleanup(tr.Release)
	opt, err := model.NewAdamW(be, tr.Params(), model.DefaultAdamWConfig(1e-2))
	require.NoError(t, err)
	t.Cleanup(opt.Release)
	seqs := []model.TrainSeq{{IDs: []int32{1, 2, 3, 4, 5}, Start: 2}, {IDs: []int32{6, 7, 8}, Start: 1}}
	loss := model.Loss{LossParams: kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.2},
		SeqAdv: []float32{1, -1}, Weight: [][]float32{{0.2, 0.2, 0.2}, {0.2, 0.2}}, OldLogP: [][]float32{{-6, -5.5, -6}, {-5.8, -6}}}
	return tr, opt, seqs, loss
}
