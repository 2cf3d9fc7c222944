package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// TestMergeMatchesAdapter: W + scaling·B·A gives the logits of base +
// adapter (float32: 1e-5 absolute; bf16 storage rounds the merged weight,
// 5e-2), and the saved HF checkpoint reloads to bit-identical logits in the
// original dtype.
func TestMergeMatchesAdapter(t *testing.T) {
	for _, tc := range []struct {
		dtype kernels.DType
		tol   float64
	}{{kernels.F32, 1e-5}, {kernels.BF16, 5e-2}} {
		t.Run(tc.dtype.String(), func(t *testing.T) {
			m := trRandomModel(t, trMicroConfig(false), tc.dtype, ref.Backend{}, 11)
			require.NoError(t, AttachLoRA(m, LoRAConfig{R: 3, Alpha: 3, RSLoRA: true}, 4))
			trRandomizeB(m, rand.New(rand.NewPCG(3, 3)))
			ids := []int32{3, 1, 4, 1, 5, 9, 2, 6}
			want, err := m.Logits(ids, Options{})
			require.NoError(t, err)
			require.Error(t, SaveCheckpoint(t.TempDir(), m), "adapters must be merged first")
			require.NoError(t, MergeLoRA(m))
			assert.Nil(t, m.Layers[0].Attn.Q.LoRA)
			assert.Equal(t, tc.dtype, m.Layers[0].Attn.Q.W.DType)
			merged, err := m.Logits(ids, Options{})
			require.NoError(t, err)
			worst := 0.0
			for i := range want {
				worst = max(worst, math.Abs(float64(merged[i]-want[i])))
			}
			assert.Less(t, worst, tc.tol)
			t.Logf("merged vs adapter: max |Δlogit| %.1e", worst)

			dir := t.TempDir()
			require.NoError(t, SaveCheckpoint(dir, m))
			m2, err := Load(dir, ref.Backend{})
			require.NoError(t, err)
			defer m2.Close()
			assert.Equal(t, tc.dtype, m2.Layers[1].MLP.Down.W.DType)
			again, err := m2.Logits(ids, Options{})
			require.NoError(t, err)
			assert.Equal(t, merged, again)
		})
	}
}
