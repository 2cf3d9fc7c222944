//go:build cudahost

package cuda_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
)

// plainBackend hides a backend's optional interfaces (kernels.MatMulManyer
// among them), so the model takes its unfused path on it.
type plainBackend struct{ kernels.Backend }

// TestModelHostMatMulMany: the model's layers multiply Q/K/V and gate/up
// through the Device's MatMulMany (one launch each, then the adapters'
// updates), and its logits are bit for bit those of the unfused path (one
// MatMul per projection) on the same kernels, with LoRA adapters on every
// projection; the fused model makes fewer launches.
func TestModelHostMatMulMany(t *testing.T) {
	dir := e2eCheckpoint(t)
	fused, plain := cuda.NewHost(2), cuda.NewHost(2)
	t.Cleanup(func() { _ = fused.Close(); _ = plain.Close() })
	mf, mp := loadOn(t, dir, fused), loadOn(t, dir, plainBackend{plain})
	for _, m := range []*model.Model{mf, mp} {
		require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 4, Alpha: 8}, 3))
		rng := rand.New(rand.NewPCG(4, 5)) // B is zero at attach: give the updates a value
		for li := range m.Layers {
			for _, l := range m.Layers[li].Linears() {
				for i := range l.Linear.LoRA.B {
					l.Linear.LoRA.B[i] = float32(rng.NormFloat64()) * 0.05
				}
			}
		}
	}
	ids := tokens(rand.New(rand.NewPCG(1, 2)), 37, e2eShape().VocabSize)
	for _, n := range []int{1, len(ids)} { // a decode-sized forward (the skinny kernels) and a prefill
		f0, p0 := fused.Counters().Launches, plain.Counters().Launches
		got, err := mf.Logits(ids[:n], model.Options{})
		require.NoError(t, err)
		want, err := mp.Logits(ids[:n], model.Options{})
		require.NoError(t, err)
		kerneltest.CheckExact(t, "logits through MatMulMany vs one MatMul per projection", got, want)
		assert.Less(t, fused.Counters().Launches-f0, plain.Counters().Launches-p0, "the fused forward launches less")
	}
}
