package grpo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// TestPolicyCloseFreesBackendMemory checks that closing a policy gives its
// backend memory back: the optimizer's two moments per parameter and the
// Trainable's pass buffers (so strictly more than the moments), and that a
// second close frees nothing more: nothing live, and nothing twice (imports
// copy, as on a device, so Counting records a double free in BadFrees).
func TestPolicyCloseFreesBackendMemory(t *testing.T) {
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	cfg.VocabSize = tok.VocabSize()
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.F32, 3, model.RandomOptions{}))
	inner := cpu.New(2)
	c := &kerneltest.Counting{Backend: inner, CopyImports: true}
	m, err := model.Load(dir, c)
	require.NoError(t, err)
	t.Cleanup(func() {
		m.Close()
		inner.Close()
	})

	pol, err := newPolicy(m, &model.LoRAConfig{R: 2, Alpha: 4}, 1, 1, DefaultConfig().AdamW(10), false, 0)
	require.NoError(t, err)
	ids := tok.Encode("Guess a number between one and eight please")
	_, _, err = pol.scores(context.Background(), []trainSeq{{ids: ids, start: 3, mask: make([]bool, len(ids)-3)}})
	require.NoError(t, err)

	live := c.Live()
	pol.close()
	freed := live - c.Live()
	assert.Greater(t, freed, 2*len(pol.params()), "close frees the moments and the pass buffers")
	live = c.Live()
	pol.close()
	assert.Equal(t, live, c.Live(), "a second close frees nothing more")
	assert.Empty(t, c.BadFrees, "nothing is freed twice")
}
