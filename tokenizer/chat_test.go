package tokenizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
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

// TestJinja2Chat checks random conversations rendered by Jinja2 with Qwen3's
// template (testdata/gen/gen_chat.py): string and arguments tool calls,
// reasoning in both places, tool runs, mid-conversation system messages.
func TestJinja2Chat(t *testing.T) {
	f, err := os.Open("testdata/jinja2_chat.jsonl")
	require.NoError(t, err)
	defer f.Close()
	chat := tinyChat(t)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	n := 0
	for sc.Scan() {
		var v vector
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v))
		opts := RenderOptions{Tools: v.Tools, AddGenerationPrompt: v.AddGenerationPrompt}
		if v.Kwargs.EnableThinking != nil {
			opts.EnableThinking = ThinkingOff
			if *v.Kwargs.EnableThinking {
				opts.EnableThinking = ThinkingOn
			}
		}
		got, err := chat.Render(v.Messages, opts)
		require.NoError(t, err, v.ID)
		assert.Equal(t, v.Rendered, got, v.ID)
		n++
	}
	require.NoError(t, sc.Err())
	require.Greater(t, n, 100)
}

func tinyChat(t testing.TB) *Chat {
	t.Helper()
	c, err := NewChat(Tiny())
	require.NoError(t, err)
	return c
}

var guessTool = json.RawMessage(`{"type": "function", "function": {"name": "guess", "description": "Submit a guess.", "parameters": {"type": "object", "properties": {"guess": {"type": "string"}}, "required": ["guess"]}}}`)

func TestRenderErrors(t *testing.T) {
	chat := tinyChat(t)
	user := Message{Role: "user", Content: "hi"}
	for _, tc := range []struct {
		name string
		msgs []Message
		opts RenderOptions
		want string
	}{
		{"no messages", nil, RenderOptions{}, "no messages"},
		{"unknown role", []Message{user, {Role: "robot"}}, RenderOptions{}, `message 1: unknown role "robot"`},
		{"bad tool JSON", []Message{user}, RenderOptions{Tools: []json.RawMessage{json.RawMessage(`{"a":`)}}, "tool 0"},
		{"bad arguments", []Message{user, {Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: json.RawMessage(`{x}`)}}}}, RenderOptions{}, "tool call 0 (f)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chat.Render(tc.msgs, tc.opts)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestKeepAllReasoning(t *testing.T) {
	chat := tinyChat(t)
	msgs := []Message{
		{Role: "user", Content: "first"},
		{Role: "assistant", ReasoningContent: "old thought", Content: "one"},
		{Role: "user", Content: "second"},
		{Role: "assistant", ReasoningContent: "new thought", Content: "two"},
	}
	for _, tc := range []struct {
		keep bool
		want string
	}{
		{false, "<|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\none<|im_end|>\n<|im_start|>user\nsecond<|im_end|>\n<|im_start|>assistant\n<think>\nnew thought\n</think>\n\ntwo<|im_end|>\n"},
		{true, "<|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\n<think>\nold thought\n</think>\n\none<|im_end|>\n<|im_start|>user\nsecond<|im_end|>\n<|im_start|>assistant\n<think>\nnew thought\n</think>\n\ntwo<|im_end|>\n"},
	} {
		got, err := chat.Render(msgs, RenderOptions{KeepAllReasoning: tc.keep})
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "keep=%v", tc.keep)
	}
}

func TestToolSuffixIDs(t *testing.T) {
	tok := qwen3(t)
	chat, err := NewChat(tok)
	require.NoError(t, err)
	tools := []Message{{Role: "tool", Name: "guess", Content: "c1"}, {Role: "tool", Name: "guess", Content: "c2"}}
	const want = "\n<|im_start|>user\n<tool_response>\nc1\n</tool_response>\n<tool_response>\nc2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	for _, tc := range []struct {
		thinking Thinking
		want     string
	}{
		{ThinkingUnset, want},
		{ThinkingOn, want},
		{ThinkingOff, want + "<think>\n\n</think>\n\n"},
	} {
		got, err := chat.ToolSuffixIDs(tools, RenderOptions{EnableThinking: tc.thinking})
		require.NoError(t, err)
		assert.Equal(t, tok.Encode(tc.want), got)
		assert.Equal(t, tc.want, tok.Decode(got, false))
	}
	_, err = chat.ToolSuffixIDs(nil, RenderOptions{})
	assert.ErrorContains(t, err, "no tool messages")
	_, err = chat.ToolSuffixIDs([]Message{{Role: "user"}}, RenderOptions{})
	assert.ErrorContains(t, err, `role "user"`)
}

// TestMultiTurnConcatenation plays a two-round tool conversation the way the
// trainer does (prompt ids, sampled ids, suffix ids, sampled ids) and checks
// that the training rendering of the finished conversation is exactly that
// concatenation, so no model token is ever re-tokenized.
func TestMultiTurnConcatenation(t *testing.T) {
	const (
		call1 = "<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"apple\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"pear\"}}\n</tool_call><|im_end|>"
		call2 = "<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"banana\", \"n\": 3}}\n</tool_call><|im_end|>"
	)
	for _, tc := range []struct {
		name     string
		tok      *Tokenizer
		thinking Thinking
		turns    []string // what the model generates each round
	}{
		{"qwen3 thinking", qwen3(t), ThinkingUnset, []string{
			"<think>\nA fruit. Try two.\n</think>\n\n" + call1,
			"<think>\nYellow: banana.\n</think>\n\nOne more.\n" + call2,
			"<think>\nDone.\n</think>\n\nThe word is banana.<|im_end|>"}},
		{"qwen3 no thinking", qwen3(t), ThinkingOff, []string{
			"Trying two fruits.\n" + call1, call2, "The word is banana.<|im_end|>"}},
		{"tiny thinking", Tiny(), ThinkingOn, []string{
			"<think>\nA fruit.\n</think>\n\n" + call1, "<think>\nhmm\n</think>\n\n" + call2, "<think>\nok\n</think>\n\nbanana<|im_end|>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, err := NewChat(tc.tok)
			require.NoError(t, err)
			opts := RenderOptions{Tools: []json.RawMessage{guessTool}, AddGenerationPrompt: true, EnableThinking: tc.thinking}
			msgs := []Message{{Role: "system", Content: "Play the game."}, {Role: "user", Content: "Guess the fruit."}}
			ids, err := chat.RenderIDs(msgs, opts)
			require.NoError(t, err)
			for round, text := range tc.turns {
				gen := tc.tok.Encode(text) // stands in for sampled tokens
				ids = append(ids, gen...)
				msg, ok := chat.ParseAssistant(gen)
				require.True(t, ok, "round %d", round)
				msgs = append(msgs, msg)
				if len(msg.ToolCalls) == 0 {
					break
				}
				var results []Message
				for i, c := range msg.ToolCalls {
					results = append(results, Message{Role: "tool", Name: c.Name, Content: fmt.Sprintf(`{"correct": false, "try": %d}`, i)})
				}
				msgs = append(msgs, results...)
				suffix, err := chat.ToolSuffixIDs(results, opts)
				require.NoError(t, err)
				ids = append(ids, suffix...)
			}
			require.Len(t, msgs, 2+3+2+1, "two calls, one call, final answer")
			full, err := chat.RenderIDs(msgs, RenderOptions{Tools: opts.Tools, EnableThinking: tc.thinking, KeepAllReasoning: true})
			require.NoError(t, err)
			// The template ends the last turn with "<|im_end|>\n"; the model stops at <|im_end|>.
			assert.Equal(t, append(ids, tc.tok.Encode("\n")...), full)
		})
	}
}

func ExampleChat_Render() {
	chat, err := NewChat(Tiny())
	if err != nil {
		log.Fatal(err)
	}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "guess", "parameters": {"type": "object", "properties": {"guess": {"type": "string"}}}}}`)}
	msgs := []Message{
		{Role: "user", Content: "Guess the fruit."},
		{Role: "assistant", ReasoningContent: "Start with a common one.", ToolCalls: []ToolCall{{Name: "guess", Arguments: json.RawMessage(`{"guess":"apple"}`)}}},
		{Role: "tool", Name: "guess", Content: "wrong"},
	}
	text, err := chat.Render(msgs, RenderOptions{Tools: tools, AddGenerationPrompt: true, EnableThinking: ThinkingOff})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text)
	// Output:
	// <|im_start|>system
	// # Tools
	//
	// You may call one or more functions to assist with the user query.
	//
	// You are provided with function signatures within <tools></tools> XML tags:
	// <tools>
	// {"type": "function", "function": {"name": "guess", "parameters": {"type": "object", "properties": {"guess": {"type": "string"}}}}}
	// </tools>
	//
	// For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
	// <tool_call>
	// {"name": <function-name>, "arguments": <args-json-object>}
	// </tool_call><|im_end|>
	// <|im_start|>user
	// Guess the fruit.<|im_end|>
	// <|im_start|>assistant
	// <think>
	// Start with a common one.
	// </think>
	//
	// <tool_call>
	// {"name": "guess", "arguments": {"guess": "apple"}}
	// </tool_call><|im_end|>
	// <|im_start|>user
	// <tool_response>
	// wrong
	// </tool_response><|im_end|>
	// <|im_start|>assistant
	// <think>
	//
	// </think>
}

func ExampleChat_ParseAssistant() {
	chat, err := NewChat(Tiny())
	if err != nil {
		log.Fatal(err)
	}
	generated := chat.Tokenizer().Encode("<think>\nTry apple.\n</think>\n\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"apple\"}}\n</tool_call><|im_end|>")
	msg, ok := chat.ParseAssistant(generated)
	fmt.Println(ok, msg.ReasoningContent, msg.ToolCalls[0].Name, string(msg.ToolCalls[0].Arguments))
	// Output: true Try apple. guess {"guess": "apple"}
}
