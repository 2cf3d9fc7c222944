package learning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/grpo"
	"github.com/x/grpo/warmstart"
	"github.com/x/tokenizer"
)

// TestKVCopiesAreTheSameTokens renders the kv expert's games as SFT and
// rollouts see them (the tiny tokenizer, tools in the system prompt, every
// think block kept) and checks that every mention of a key or a value (in
// the prompt, the expert's text, the calls' arguments and lookup's answer)
// is the same token ids: the copies the task needs are copies of ids, not
// a mapping of one tokenization onto another (" green" is one token,
// "green" after a quote three), which the tiny model does not learn.
func TestKVCopiesAreTheSameTokens(t *testing.T) {
	for _, o := range []KVOptions{
		{Values: len(kvValues)},
		{Values: len(kvValues), Echo: true},
		{Values: len(kvSplitValues), Split: true},
		{Values: len(kvSplitValues), Split: true, Echo: true, Guessing: true},
	} {
		t.Run(KVTask(o).Name, func(t *testing.T) { kvCopiesAreTheSameTokens(t, o) })
	}
}

func kvCopiesAreTheSameTokens(t *testing.T, o KVOptions) {
	ctx := context.Background()
	tok := tokenizer.Tiny()
	chat, err := tokenizer.NewChat(tok)
	require.NoError(t, err)
	task := KVTask(o)
	values := kvValues
	if o.Split {
		values = kvSplitValues
	}
	cfg := grpoConfig(task, Settings{G: 1, Prompts: 1})
	// Every key asked, every value looked up.
	var rows []env.Row
	for i := range 96 {
		rows = append(rows, env.Row{"seed": int64(i), "key": kvKeys[i%len(kvKeys)]})
	}
	convs, err := warmstart.Conversations(ctx, task.Factory, rows, task.Expert, grpo.PlayOptions{Tokenizer: tok, Config: &cfg})
	require.NoError(t, err)

	mentions := map[string][][]int32{} // word -> the ids of each mention
	var split []string                 // mentions that share a token with their neighbours
	for i, c := range convs {
		ids, err := chat.RenderIDs(c.Messages, tokenizer.RenderOptions{Tools: c.Tools, EnableThinking: tokenizer.ThinkingOff, KeepAllReasoning: true})
		require.NoError(t, err)
		// Each token's bytes, and where each starts in the text.
		var text strings.Builder
		starts := make(map[int]int, len(ids)+1) // byte offset -> token index
		for j, id := range ids {
			starts[text.Len()] = j
			text.WriteString(tok.Decode([]int32{id}, false))
		}
		starts[text.Len()] = len(ids)
		s := text.String()
		// The words after the system prompt (its tool schemas name none).
		from := strings.Index(s, "<|im_start|>user")
		require.GreaterOrEqual(t, from, 0)
		for _, w := range append(slices.Clone(kvKeys), values...) {
			for at := from; ; {
				k := strings.Index(s[at:], w)
				if k < 0 {
					break
				}
				b, e := at+k, at+k+len(w)
				at = e
				if b > 0 && isLetter(s[b-1]) || e < len(s) && isLetter(s[e]) {
					continue // inside a longer word
				}
				first, ok1 := starts[b]
				last, ok2 := starts[e]
				if !ok1 || !ok2 {
					split = append(split, fmt.Sprintf("game %d: %q in %q", i, w, s[max(b-12, 0):min(e+12, len(s))]))
					continue
				}
				mentions[w] = append(mentions[w], ids[first:last])
			}
		}
	}
	require.Empty(t, split[:min(len(split), 5)], "%d mentions share a token with their neighbours (the first 5 shown)", len(split))
	for _, w := range append(slices.Clone(kvKeys), values...) {
		m := mentions[w]
		// A key is in the prompt twice, the expert's text and the lookup's
		// call and answer; a value in the answer, the text, the submit
		// and the last turn.
		require.GreaterOrEqual(t, len(m), 4, "%q is mentioned %d times in %d games: want every key asked and every value looked up", w, len(m), len(convs))
		for _, ids := range m[1:] {
			assert.Equal(t, m[0], ids, "the mentions of %q are different tokens", w)
		}
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// TestKVValuePieces pins the tokenizations the warm start depends on
// (results.md, "kv, fourth session"): after a quote, as every mention
// writes it, a fruit is one token, and a split value two, whose first
// pieces all differ, so that each value's first piece predicts its own
// second piece and the values' embeddings come apart.
func TestKVValuePieces(t *testing.T) {
	tok := tokenizer.Tiny()
	for _, c := range []struct {
		name   string
		values []string
		pieces int
	}{
		{"fruits", kvValues, 1},
		{"split", kvSplitValues, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			firsts := map[int32]string{}
			for _, v := range c.values {
				ids := tok.Encode(`": "` + v + `"`)
				prefix := tok.Encode(`": "`)
				require.Greater(t, len(ids), len(prefix), "%q", v)
				require.Equal(t, prefix, ids[:len(prefix)], "%q: the quote before it merged with it", v)
				word := ids[len(prefix) : len(ids)-1]
				require.Equal(t, tok.Encode(`"`), ids[len(ids)-1:], "%q: the closing quote merged with it", v)
				assert.Len(t, word, c.pieces, "%q is %d tokens", v, len(word))
				if other, ok := firsts[word[0]]; ok {
					t.Errorf("%q and %q begin with the same token", v, other)
				}
				firsts[word[0]] = v
			}
		})
	}
}
