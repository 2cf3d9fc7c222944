package grpo

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
)

// TestNewTrainerErrorGivesBackendMemoryBack: when NewTrainer fails after
// it prepared the policy (an environment that cannot be made, through
// WithEnv or WithEnvs), it gives the policy's backend memory back (the
// gradients and the optimizer's moments), so that after Model.Close no
// allocation of the (copying, so device-like) backend is live.
func TestNewTrainerErrorGivesBackendMemoryBack(t *testing.T) {
	broken := env.FactoryFunc(func(context.Context) (env.Env, error) {
		return nil, errors.New("no environment today")
	})
	tests := []struct {
		name string
		opt  Option
	}{
		{"WithEnv", WithEnv(broken)},
		{"WithEnvs", WithEnvs(map[string]env.Factory{"broken": broken})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, tok := tinyModelOn(t, 3, true)
			c, ok := m.Backend.(*kerneltest.Counting)
			require.True(t, ok, "the model runs on the counting backend")
			_, err := NewTrainer(m, tok, testConfig(2, 2), tc.opt, WithLoRA(model.LoRAConfig{R: 2, Alpha: 4}))
			require.ErrorContains(t, err, "no environment today")
			require.NoError(t, m.Close())
			assert.Equal(t, 0, c.Live(), "allocations live after the failed NewTrainer and Model.Close")
			assert.Empty(t, c.BadFrees, "memory freed twice")
		})
	}
}
