package model_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/model"
	"github.com/x/tokenizer"
)

// TestNamedConfigSpecialIDs: a named shape's end-of-sequence id is
// <|im_end|> of the tokenizer it is sized for, so stopping on
// Config.EOSTokenIDs (as Generate's doc says) stops at the end of a turn.
// The tiny shape is checked against the embedded tiny tokenizer; the Qwen3
// shapes against Qwen3's added-token order, whose first id is 151643
// (<|endoftext|>) in Qwen3's tokenizer.json.
func TestNamedConfigSpecialIDs(t *testing.T) {
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	assert.Equal(t, tok.VocabSize(), cfg.VocabSize, "tiny is sized for the tiny tokenizer")
	imEnd, ok := tok.TokenID("<|im_end|>")
	require.True(t, ok)
	assert.Equal(t, []int32{imEnd}, cfg.EOSTokenIDs)
	assert.Equal(t, tok.EOS(), cfg.EOSTokenIDs[0])
	think, _ := tok.TokenID("</think>")
	assert.NotContains(t, cfg.EOSTokenIDs, think, "the old EOS, </think>, ends a thought, not a turn")

	added := tokenizer.Qwen3AddedTokens()
	at := slices.IndexFunc(added, func(a tokenizer.AddedToken) bool { return a.Content == "<|im_end|>" })
	require.GreaterOrEqual(t, at, 0)
	for _, name := range []string{"qwen3-0.6b", "qwen3-1.7b"} {
		cfg, err := model.NamedConfig(name)
		require.NoError(t, err)
		assert.Equal(t, []int32{int32(151643 + at)}, cfg.EOSTokenIDs, name)
	}
}
