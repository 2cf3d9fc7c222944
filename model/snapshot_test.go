package model

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// TestAdapterSnapshot: a snapshot taken before an optimizer step makes
// generation and scoring give, bit for bit, what they gave before the step
// while the live adapters have moved on; nil goes back to the live ones; a
// snapshot saved and loaded again is the same policy; the snapshot holds
// the adapters only. On the CPU backend and on one whose imports are
// copies, as a device's are.
func TestAdapterSnapshot(t *testing.T) {
	for _, copyImports := range []bool{false, true} {
		t.Run(map[bool]string{false: "cpu", true: "copied_imports"}[copyImports], func(t *testing.T) {
			fast := cpu.New(2)
			defer fast.Close()
			var be kernels.Backend = fast
			if copyImports {
				be = &kerneltest.Counting{Backend: fast, CopyImports: true}
			}
			m := trRandomModel(t, trMicroConfig(false), kernels.F32, be, 3)
			require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 1))
			rng := rand.New(rand.NewPCG(4, 5))
			trRandomizeB(m, rng)
			tr, err := NewTrainable(m, TrainOptions{})
			require.NoError(t, err)
			defer tr.Close()
			seqs := trRandomSeqs(rng, m.Config.VocabSize, 9, 6)
			gen := func() Completion {
				out, err := m.Generate(t.Context(), []Request{{Seq: NewSequence(7, 1, 2, 3), MaxNewTokens: 8,
					Sampling: kernels.SamplingParams{Temperature: 1}}}, BatchOptions{})
				require.NoError(t, err)
				return out[0]
			}
			score := func() [][]float32 {
				lp, _, err := tr.LogProbs(t.Context(), seqs, true)
				require.NoError(t, err)
				return cloneF32Rows(lp)
			}
			g0, l0 := gen(), score()

			snap, err := m.NewAdapterSnapshot()
			require.NoError(t, err)
			defer snap.Release()
			require.NoError(t, snap.Capture())
			n := 0
			for _, mt := range snap.mats {
				n += mt.buf.Len()
			}
			params := 0
			for _, p := range tr.Params() {
				params += p.Data.Len()
			}
			assert.Equal(t, params, n, "the snapshot copies the adapters, not the base weights")

			// An optimizer step moves the live adapters.
			opt, err := NewAdamW(m.Backend, tr.Params(), DefaultAdamWConfig(0.05))
			require.NoError(t, err)
			defer opt.Release()
			_, err = tr.Accumulate(t.Context(), seqs, SFTLoss(seqs))
			require.NoError(t, err)
			_, err = opt.Step()
			require.NoError(t, err)
			g1, l1 := gen(), score()
			assert.NotEqual(t, l0, l1, "the live policy moved")

			m.UseAdapters(snap)
			g2, l2 := gen(), score()
			m.UseAdapters(nil)
			assert.Equal(t, g0.Tokens, g2.Tokens, "the snapshot samples as the policy did before the step")
			assert.Equal(t, g0.LogProbs, g2.LogProbs)
			assert.Equal(t, l0, l2, "and scores as it did, bit for bit")
			g3, l3 := gen(), score()
			assert.Equal(t, g1.LogProbs, g3.LogProbs, "nil: the live adapters again")
			assert.Equal(t, l1, l3)

			path := filepath.Join(t.TempDir(), "snapshot.safetensors")
			require.NoError(t, snap.Save(path))
			back, err := m.NewAdapterSnapshot()
			require.NoError(t, err)
			defer back.Release()
			require.NoError(t, back.Load(path))
			m.UseAdapters(back)
			l4 := score()
			m.UseAdapters(nil)
			assert.Equal(t, l0, l4, "saved and loaded: the same policy")

			// Release while in use puts the live adapters back.
			m.UseAdapters(back)
			back.Release()
			assert.Equal(t, l1, score())
		})
	}
}

// TestAdapterSnapshotErrors: a model without adapters has nothing to
// snapshot; a file of other adapters does not load.
func TestAdapterSnapshotErrors(t *testing.T) {
	m := trRandomModel(t, trMicroConfig(true), kernels.F32, cpu.New(1), 3)
	_, err := m.NewAdapterSnapshot()
	assert.ErrorContains(t, err, "no adapters")

	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4, Targets: []string{"q_proj"}}, 1))
	small, err := m.NewAdapterSnapshot()
	require.NoError(t, err)
	require.NoError(t, small.Capture())
	path := filepath.Join(t.TempDir(), "q.safetensors")
	require.NoError(t, small.Save(path))
	small.Release()
	require.NoError(t, AttachLoRA(m, LoRAConfig{R: 2, Alpha: 4}, 1))
	all, err := m.NewAdapterSnapshot()
	require.NoError(t, err)
	defer all.Release()
	assert.ErrorContains(t, all.Load(path), "tensors")
}

func cloneF32Rows(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i, r := range x {
		out[i] = append([]float32(nil), r...)
	}
	return out
}
