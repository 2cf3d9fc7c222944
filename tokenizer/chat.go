package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Message is one chat message. Role is "system", "user", "assistant" or
// "tool". An empty ReasoningContent means "not given": the template then
// looks for a <think> block inside Content.
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	Name             string     `json:"name,omitempty"`         // tool messages: the tool's name (not rendered)
	ToolCallID       string     `json:"tool_call_id,omitempty"` // tool messages: the call answered (not rendered)
}

// UnmarshalJSON accepts OpenAI/Hugging Face message objects, where content
// may be null.
func (m *Message) UnmarshalJSON(data []byte) error {
	var w struct {
		Role             string     `json:"role"`
		Content          *string    `json:"content"`
		ReasoningContent *string    `json:"reasoning_content"`
		ToolCalls        []ToolCall `json:"tool_calls"`
		Name             string     `json:"name"`
		ToolCallID       string     `json:"tool_call_id"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = Message{Role: w.Role, ToolCalls: w.ToolCalls, Name: w.Name, ToolCallID: w.ToolCallID}
	if w.Content != nil {
		m.Content = *w.Content
	}
	if w.ReasoningContent != nil {
		m.ReasoningContent = *w.ReasoningContent
	}
	return nil
}

// ToolCall is a call of a named tool. Arguments is a JSON object (key order
// is kept when rendered) or a JSON string, which is rendered verbatim as the
// template does for string arguments. Empty Arguments render as {}.
type ToolCall struct {
	Name      string
	Arguments json.RawMessage
}

type toolCallFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// MarshalJSON writes the OpenAI shape {"type": "function", "function": {...}}.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Type     string           `json:"type"`
		Function toolCallFunction `json:"function"`
	}{"function", toolCallFunction(c)})
}

// UnmarshalJSON accepts both the OpenAI shape and a bare {"name", "arguments"}.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var w struct {
		Function *toolCallFunction `json:"function"`
		toolCallFunction
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	f := w.toolCallFunction
	if w.Function != nil {
		f = *w.Function
	}
	if bytes.Equal(bytes.TrimSpace(f.Arguments), []byte("null")) {
		f.Arguments = nil
	}
	*c = ToolCall(f)
	return nil
}

// Thinking is the template's enable_thinking variable, which has three
// states: not passed, true and false.
type Thinking int8

const (
	// ThinkingUnset does not pass enable_thinking (the template's default).
	ThinkingUnset Thinking = iota
	// ThinkingOn passes enable_thinking=true (renders like ThinkingUnset).
	ThinkingOn
	// ThinkingOff passes enable_thinking=false: the generation prompt gets an
	// empty <think></think> block so the model answers without reasoning.
	ThinkingOff
)

// RenderOptions are the chat template's inputs besides the messages.
type RenderOptions struct {
	// Tools are the tool schemas, each a JSON object rendered with its key
	// order kept ({"type": "function", "function": {...}}).
	Tools []json.RawMessage
	// AddGenerationPrompt ends the rendering with an open assistant turn.
	AddGenerationPrompt bool
	// EnableThinking is the enable_thinking template variable.
	EnableThinking Thinking
	// KeepAllReasoning selects the training variant of the template: every
	// assistant turn keeps its <think> block, so the rendering of a
	// conversation is a prefix of the rendering of any continuation of it.
	// Qwen3's own template drops the reasoning of turns before the last user
	// query, which breaks that (TRL swaps in a training template likewise).
	KeepAllReasoning bool
}

// Chat renders conversations with Qwen3's chat template and parses model
// output, on top of a Tokenizer. It holds no mutable state and is safe for
// concurrent use.
type Chat struct {
	tok *Tokenizer
}

// NewChat returns the Qwen3 chat template over tok, whose vocabulary must
// have the ChatML and tool tokens (<|im_start|>, <|im_end|>, <think>,
// </think>, <tool_call>, </tool_call>, <tool_response>, </tool_response>).
func NewChat(tok *Tokenizer) (*Chat, error) {
	for _, s := range []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>",
		"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"} {
		if _, ok := tok.TokenID(s); !ok {
			return nil, fmt.Errorf("chat template: tokenizer has no %s token", s)
		}
	}
	return &Chat{tok: tok}, nil
}

// Tokenizer returns the tokenizer the template encodes with.
func (c *Chat) Tokenizer() *Tokenizer { return c.tok }

// Render renders messages exactly as Qwen3's chat template
// (tokenizer_config.json) does with apply_chat_template(tokenize=False).
// It fails on an empty conversation, an unknown role, or tool schemas or
// arguments that are not valid JSON.
func (c *Chat) Render(messages []Message, opts RenderOptions) (string, error) {
	b, err := appendRender(nil, messages, opts)
	return string(b), err
}

// RenderIDs is Render followed by Encode.
func (c *Chat) RenderIDs(messages []Message, opts RenderOptions) ([]int32, error) {
	s, err := c.Render(messages, opts)
	if err != nil {
		return nil, err
	}
	return c.tok.Encode(s), nil
}

func appendRender(b []byte, messages []Message, opts RenderOptions) ([]byte, error) {
	if len(messages) == 0 {
		return nil, errors.New("render chat: no messages")
	}
	var err error
	if len(opts.Tools) > 0 {
		b = append(b, "<|im_start|>system\n"...)
		if messages[0].Role == "system" {
			b = append(b, messages[0].Content...)
			b = append(b, "\n\n"...)
		}
		b = append(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"...)
		for i, tool := range opts.Tools {
			b = append(b, '\n')
			if b, err = appendPyJSON(b, tool); err != nil {
				return nil, fmt.Errorf("render chat: tool %d: %w", i, err)
			}
		}
		b = append(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"...)
	} else if messages[0].Role == "system" {
		b = append(b, "<|im_start|>system\n"...)
		b = append(b, messages[0].Content...)
		b = append(b, "<|im_end|>\n"...)
	}
	lastQuery := lastQueryIndex(messages)
	for i, m := range messages {
		switch m.Role {
		case "system":
			if i == 0 {
				continue
			}
			b = appendTurn(b, m.Role, m.Content)
		case "user":
			b = appendTurn(b, m.Role, m.Content)
		case "assistant":
			keep := opts.KeepAllReasoning || i > lastQuery
			if b, err = appendAssistant(b, m, keep, i == len(messages)-1, opts.KeepAllReasoning); err != nil {
				return nil, fmt.Errorf("render chat: message %d: %w", i, err)
			}
		case "tool":
			if i == 0 || messages[i-1].Role != "tool" {
				b = append(b, "<|im_start|>user"...)
			}
			b = append(b, "\n<tool_response>\n"...)
			b = append(b, m.Content...)
			b = append(b, "\n</tool_response>"...)
			if i == len(messages)-1 || messages[i+1].Role != "tool" {
				b = append(b, "<|im_end|>\n"...)
			}
		default:
			return nil, fmt.Errorf("render chat: message %d: unknown role %q", i, m.Role)
		}
	}
	if opts.AddGenerationPrompt {
		b = append(b, "<|im_start|>assistant\n"...)
		if opts.EnableThinking == ThinkingOff {
			b = append(b, "<think>\n\n</think>\n\n"...)
		}
	}
	return b, nil
}

func appendTurn(b []byte, role, content string) []byte {
	b = append(b, "<|im_start|>"...)
	b = append(b, role...)
	b = append(b, '\n')
	b = append(b, content...)
	return append(b, "<|im_end|>\n"...)
}

// lastQueryIndex is the template's ns.last_query_index: the last user
// message that is not a wrapped tool response, else the last message.
func lastQueryIndex(messages []Message) int {
	for i := len(messages) - 1; i >= 0; i-- {
		m := messages[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			return i
		}
	}
	return len(messages) - 1
}

// splitReasoning is the template's fallback when reasoning_content is not
// given: a "...</think>" prefix of content is the reasoning.
func splitReasoning(m Message) (reasoning, content string) {
	content = m.Content
	if m.ReasoningContent != "" {
		return m.ReasoningContent, content
	}
	if !strings.Contains(content, "</think>") {
		return "", content
	}
	before, _, _ := strings.Cut(content, "</think>")
	before = strings.TrimRight(before, "\n")
	if i := strings.LastIndex(before, "<think>"); i >= 0 {
		before = before[i+len("<think>"):]
	}
	reasoning = strings.TrimLeft(before, "\n")
	content = strings.TrimLeft(content[strings.LastIndex(content, "</think>")+len("</think>"):], "\n")
	return reasoning, content
}

func appendAssistant(b []byte, m Message, afterLastQuery, last, always bool) ([]byte, error) {
	reasoning, content := splitReasoning(m)
	b = append(b, "<|im_start|>assistant\n"...)
	if always || afterLastQuery && (last || reasoning != "") {
		b = append(b, "<think>\n"...)
		b = append(b, strings.Trim(reasoning, "\n")...)
		b = append(b, "\n</think>\n\n"...)
		b = append(b, strings.TrimLeft(content, "\n")...)
	} else {
		b = append(b, content...)
	}
	for i, call := range m.ToolCalls {
		if i > 0 || content != "" {
			b = append(b, '\n')
		}
		b = append(b, "<tool_call>\n{\"name\": \""...)
		b = append(b, call.Name...)
		b = append(b, "\", \"arguments\": "...)
		var err error
		if b, err = appendArguments(b, call.Arguments); err != nil {
			return nil, fmt.Errorf("tool call %d (%s): %w", i, call.Name, err)
		}
		b = append(b, "}\n</tool_call>"...)
	}
	return append(b, "<|im_end|>\n"...), nil
}

// appendArguments renders arguments: a JSON string verbatim, anything else
// through Python's json.dumps, nothing as {}.
func appendArguments(b []byte, args json.RawMessage) ([]byte, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return append(b, "{}"...), nil
	}
	if args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		return append(b, s...), nil
	}
	return appendPyJSON(b, args)
}

// ToolSuffixIDs returns the tokens to append after an assistant turn that
// ended with <|im_end|> and whose tool calls produced tools (consecutive
// "tool" messages): the tool-response user turn and the next generation
// prompt (with the empty think block when opts.EnableThinking is
// ThinkingOff). Nothing the model produced is re-tokenized, so
// prompt + completion + suffix + next completion ... equals the tokens of the
// whole conversation rendered with KeepAllReasoning (TRL's
// _get_tool_suffix_ids). opts.Tools and AddGenerationPrompt are ignored.
func (c *Chat) ToolSuffixIDs(tools []Message, opts RenderOptions) ([]int32, error) {
	if len(tools) == 0 {
		return nil, errors.New("tool suffix: no tool messages")
	}
	for i, m := range tools {
		if m.Role != "tool" {
			return nil, fmt.Errorf("tool suffix: message %d has role %q, want tool", i, m.Role)
		}
	}
	// Render a dummy conversation with and without the tool turn and keep
	// the difference, so the suffix is whatever the template emits.
	base := []Message{
		{Role: "user", Content: "dummy"},
		{Role: "assistant", ToolCalls: []ToolCall{{Name: tools[0].Name, Arguments: json.RawMessage("{}")}}},
	}
	// The training variant, because Qwen3's own template drops the dummy
	// turn's empty think block once tool messages follow it.
	opts.Tools, opts.AddGenerationPrompt, opts.KeepAllReasoning = nil, false, true
	prefix, err := appendRender(nil, base, opts)
	if err != nil {
		return nil, fmt.Errorf("tool suffix: %w", err)
	}
	end := bytes.LastIndex(prefix, []byte("<|im_end|>"))
	prefix = prefix[:end+len("<|im_end|>")]
	opts.AddGenerationPrompt = true
	full, err := appendRender(nil, append(base, tools...), opts)
	if err != nil {
		return nil, fmt.Errorf("tool suffix: %w", err)
	}
	if !bytes.HasPrefix(full, prefix) {
		return nil, errors.New("tool suffix: template is not prefix-preserving for tool turns")
	}
	return c.tok.Encode(string(full[len(prefix):])), nil
}
