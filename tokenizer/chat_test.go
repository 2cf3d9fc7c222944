package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQwen3ChatVectors(t *testing.T) {
	tok := qwen3(t)
	chat, err := NewChat(tok)
	require.NoError(t, err)
	n := 0
	for _, v := range loadVectors(t) {
		if v.Kind != "chat" {
			continue
		}
		n++
		t.Run(v.ID, func(t *testing.T) {
			opts := RenderOptions{Tools: v.Tools, AddGenerationPrompt: v.AddGenerationPrompt}
			if v.Kwargs.EnableThinking != nil {
				opts.EnableThinking = ThinkingOff
				if *v.Kwargs.EnableThinking {
					opts.EnableThinking = ThinkingOn
				}
			}
			got, err := chat.Render(v.Messages, opts)
			require.NoError(t, err)
			assert.Equal(t, v.Rendered, got)
			ids, err := chat.RenderIDs(v.Messages, opts)
			require.NoError(t, err)
			assert.Equal(t, v.IDs, ids)
		})
	}
	require.Greater(t, n, 10)
}
