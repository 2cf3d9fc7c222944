package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

func TestParseAssistant(t *testing.T) {
	chat := tinyChat(t)
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, tc := range []struct {
		name string
		text string
		want Message
		ok   bool
	}{
		{"plain", "Hello there.<|im_end|>", Message{Content: "Hello there."}, true},
		{"no EOS", "Hello", Message{Content: "Hello"}, true},
		{"think and content", "<think>\nhmm\n</think>\n\nAnswer.<|im_end|>", Message{ReasoningContent: "hmm", Content: "Answer."}, true},
		{"closing tag only", "hmm\n</think>\n\nAnswer.", Message{ReasoningContent: "hmm", Content: "Answer."}, true},
		{"truncated thinking", "<think>\nstill going", Message{ReasoningContent: "still going"}, true},
		{"call", "<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"kiwi\"}}\n</tool_call><|im_end|>",
			Message{ToolCalls: []ToolCall{call("guess", `{"guess": "kiwi"}`)}}, true},
		{"content, think, two calls", "<think>\nx\n</think>\n\nTwo tries.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"raw\"}\n</tool_call>",
			Message{ReasoningContent: "x", Content: "Two tries.", ToolCalls: []ToolCall{call("a", `{}`), call("b", `"raw"`)}}, true},
		{"missing arguments", "<tool_call>{\"name\": \"f\"}</tool_call>", Message{ToolCalls: []ToolCall{call("f", `{}`)}}, true},
		{"null arguments", "<tool_call>{\"name\": \"f\", \"arguments\": null}</tool_call>", Message{ToolCalls: []ToolCall{call("f", `{}`)}}, true},
		{"bad JSON", "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n</tool_call><|im_end|>",
			Message{Content: "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}\n</tool_call>"}, false},
		{"no name", "<tool_call>{\"arguments\": {}}</tool_call>", Message{Content: "<tool_call>{\"arguments\": {}}</tool_call>"}, false},
		{"name not a string", "<tool_call>{\"name\": 3}</tool_call>", Message{Content: "<tool_call>{\"name\": 3}</tool_call>"}, false},
		{"not an object", "<tool_call>[1]</tool_call>", Message{Content: "<tool_call>[1]</tool_call>"}, false},
		{"trailing brace", "<tool_call>{\"name\": \"f\"}}</tool_call>", Message{Content: "<tool_call>{\"name\": \"f\"}}</tool_call>"}, false},
		{"unclosed", "<tool_call>\n{\"name\": \"f\"}", Message{Content: "<tool_call>\n{\"name\": \"f\"}"}, false},
		{"text after call", "<tool_call>{\"name\": \"f\"}</tool_call> and more", Message{Content: "<tool_call>{\"name\": \"f\"}</tool_call> and more"}, false},
		{"fallback drops special tokens", "<|im_start|><tool_call>{</tool_call>", Message{Content: "<tool_call>{</tool_call>"}, false},
		{"stops at EOS", "Done.<|im_end|><tool_call>{</tool_call>", Message{Content: "Done."}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Role = "assistant"
			got, ok := chat.ParseAssistantText(tc.text)
			assert.Equal(t, tc.ok, ok, "text ok")
			assert.Equal(t, tc.want, got, "text")
			got, ok = chat.ParseAssistant(chat.Tokenizer().Encode(tc.text))
			assert.Equal(t, tc.ok, ok, "ids ok")
			assert.Equal(t, tc.want, got, "ids")
		})
	}
}

// TestParseTruncations cuts a two-call response at every token and every
// byte: each prefix parses without panicking into either complete tool calls
// or plain content.
func TestParseTruncations(t *testing.T) {
	chat := tinyChat(t)
	const full = "<think>\nTwo guesses.\n</think>\n\nTrying.\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"apple\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"guess\": \"pear\"}}\n</tool_call><|im_end|>"
	firstEnd := strings.Index(full, "</tool_call>") + len("</tool_call>")
	check := func(t *testing.T, prefix string, msg Message, ok bool) {
		t.Helper()
		if !ok {
			assert.Empty(t, msg.ToolCalls, "%q", prefix)
			assert.NotEmpty(t, msg.Content, "%q: fallback keeps the text", prefix)
			return
		}
		if len(msg.ToolCalls) == 0 {
			assert.False(t, strings.Contains(prefix, "</tool_call>"), "%q lost a complete call", prefix)
			return
		}
		assert.True(t, len(prefix) >= firstEnd, "%q", prefix)
		for _, c := range msg.ToolCalls {
			assert.Equal(t, "guess", c.Name)
			assert.True(t, json.Valid(c.Arguments))
		}
	}
	for i := 0; i <= len(full); i++ {
		msg, ok := chat.ParseAssistantText(full[:i])
		check(t, full[:i], msg, ok)
	}
	ids := chat.Tokenizer().Encode(full)
	for i := 0; i <= len(ids); i++ {
		msg, ok := chat.ParseAssistant(ids[:i])
		check(t, chat.Tokenizer().Decode(ids[:i], false), msg, ok)
	}
	msg, ok := chat.ParseAssistantText(full)
	require.True(t, ok)
	assert.Len(t, msg.ToolCalls, 2)
	msg, ok = chat.ParseAssistantText(full[:firstEnd])
	require.True(t, ok)
	assert.Len(t, msg.ToolCalls, 1)
	msg, ok = chat.ParseAssistantText(full[:firstEnd+20])
	assert.False(t, ok)
	assert.Empty(t, msg.ToolCalls)
}

// FuzzParseAssistant: any text parses without panicking; a successful parse
// renders back; a failed one carries no tool calls.
func FuzzParseAssistant(f *testing.F) {
	for _, s := range []string{
		"<think>\nx\n</think>\n\nhi<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": [1, 2.5]}}\n</tool_call><|im_end|>",
		"<tool_call>{\"name\": \"f\", \"arguments\": \"s\"}</tool_call>",
		"</think><tool_call>", "<think>", "<tool_call>{\"name\":", "plain",
	} {
		f.Add(s)
	}
	chat := tinyChat(f)
	f.Fuzz(func(t *testing.T, text string) {
		msg, ok := chat.ParseAssistantText(text)
		if !ok {
			assert.Empty(t, msg.ToolCalls)
			return
		}
		_, err := chat.Render([]Message{{Role: "user", Content: "q"}, msg}, RenderOptions{})
		assert.NoError(t, err)
		msg2, ok2 := chat.ParseAssistant(chat.Tokenizer().Encode(text))
		if strings.ToValidUTF8(text, "") == text && norm.NFC.IsNormalString(text) {
			assert.Equal(t, ok, ok2)
			assert.Equal(t, msg, msg2)
		}
	})
}
