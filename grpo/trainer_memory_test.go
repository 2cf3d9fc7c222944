package grpo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/model"
)

// TestStepGivesKVBack: KVCacheDType sets the pool's storage (keeping the
// model's block size and limit, or leaving the pool alone when ""), and a
// step ends with the KV pool's memory given back, so the rollouts' cache
// does not last into learning.
func TestStepGivesKVBack(t *testing.T) {
	tests := []struct {
		name  string
		dtype string
		want  kernels.DType
	}{
		{"model's own setting", "", kernels.F32},
		{"float32", KVFloat32, kernels.F32},
		{"bfloat16", KVBFloat16, kernels.BF16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, tok := tinyModel(t, 1)
			require.NoError(t, m.SetKVOptions(model.KVOptions{BlockSize: 8, MaxBytes: 1 << 30}))
			cfg := testConfig(2, 2)
			cfg.MaxCompletionLength = 12
			cfg.MaxSteps = 1
			cfg.MicroBatchTokens = 16
			cfg.KVCacheDType = tc.dtype
			tr, err := NewTrainer(m, tok, cfg, WithReward("len", 1, func(_ context.Context, r *Rollout) (float64, error) {
				return float64(r.ModelTokens() % 3), nil
			}), WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}))
			require.NoError(t, err)
			defer tr.Close()
			st := m.KVStats()
			assert.Equal(t, tc.want, st.DType)
			assert.Equal(t, 8, st.BlockSize, "the model's block size stays")
			assert.Equal(t, int64(1<<30), st.MaxBytes, "the model's limit stays")

			rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Count: "}, {"prompt": "Go: "}})
			require.NoError(t, err)
			n := 0
			for _, r := range rep.Rollouts {
				n += len(r.CompletionIDs)
			}
			require.Positive(t, n, "the rollouts were generated with the KV cache")
			st = m.KVStats()
			assert.Zero(t, st.InUse, "every rollout cache is released")
			assert.Zero(t, st.Bytes, "the pool's memory is given back before learning")
			assert.Equal(t, tc.want, st.DType)
		})
	}
}
