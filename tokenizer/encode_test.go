package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQwen3EncodeVectors(t *testing.T) {
	tok := qwen3(t)
	n := 0
	for _, v := range loadVectors(t) {
		if v.Kind != "encode" {
			continue
		}
		n++
		t.Run(v.ID, func(t *testing.T) {
			got := tok.Encode(v.Input)
			assert.Equal(t, v.IDs, got, "ids")
			var toks []string
			for _, id := range got {
				s, ok := tok.Token(id)
				assert.True(t, ok)
				toks = append(toks, s)
			}
			if len(v.Tokens) > 0 {
				assert.Equal(t, v.Tokens, toks, "tokens")
			}
			assert.Equal(t, v.Decoded, tok.Decode(v.IDs, false), "decoded")
			assert.Equal(t, v.DecodedSkipSpecial, tok.Decode(v.IDs, true), "decoded skipping special")
		})
	}
	require.Greater(t, n, 40)
}
