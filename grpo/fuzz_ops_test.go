package grpo

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/tokenizer"
)

// FuzzParseMetrics: whatever parses writes back and parses to the same
// values (NaN for null), and errors name the source.
func FuzzParseMetrics(f *testing.F) {
	f.Add("{\"step\":1,\"loss\":0.5,\"reward\":null}\n{\"step\":2}\n")
	f.Add("{\"step\":1.5}")
	f.Add("{\"step\":3,\"step\":4}")
	f.Add("[]\n")
	f.Add("{\"step\":1,\"x\":1e400}")
	f.Add("{\"step\":9223372036854775808}")
	f.Fuzz(func(t *testing.T, in string) {
		steps, err := ParseMetrics(strings.NewReader(in), "fuzz.jsonl")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.jsonl")
			return
		}
		for _, s := range steps {
			line, err := s.MarshalJSON()
			require.NoError(t, err)
			var back StepMetrics
			require.NoError(t, back.UnmarshalJSON(line), "%s", line)
			assert.Equal(t, s.Step, back.Step)
			require.Len(t, back.Metrics, len(s.Metrics))
			for k, v := range s.Metrics {
				if math.IsNaN(v) {
					assert.True(t, math.IsNaN(back.Metrics[k]))
				} else {
					assert.Equal(t, v, back.Metrics[k], k)
				}
			}
		}
	})
}

// FuzzReadConversations: what reads either encodes into a well-formed
// training sequence or fails with an error; nothing panics.
func FuzzReadConversations(f *testing.F) {
	f.Add(`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}`)
	f.Add(`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"name": "guess", "arguments": {"number": 3}}]}, {"role": "tool", "content": "lower"}, {"role": "assistant", "content": "2"}], "tools": [{"type": "function", "function": {"name": "guess"}}]}`)
	f.Add(`{"messages": [{"role": "assistant", "content": "<|im_end|>"}]}`)
	f.Add(`{"messages": [{"role": "user", "content": "<|im_end|>"}, {"role": "assistant", "content": "<think>a</think>b"}]}`)
	f.Add(`{"messages": null}`)
	chat, err := tokenizer.NewChat(tokenizer.Tiny())
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, in string) {
		convs, err := ReadConversations(strings.NewReader(in), "fuzz.jsonl")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz.jsonl")
			return
		}
		for _, c := range convs {
			s, err := EncodeConversation(chat, c, tokenizer.ThinkingOff)
			if err != nil {
				continue
			}
			assert.GreaterOrEqual(t, s.Start, 1)
			assert.Len(t, s.Mask, len(s.IDs)-s.Start)
			assert.True(t, s.Mask[0], "Start is an assistant token")
		}
	})
}
