package tokenizer

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ParseAssistant parses one assistant turn the model generated (token ids,
// possibly ending with <|im_end|>) into a message: the <think> block becomes
// ReasoningContent, the text before the first <tool_call> Content, and each
// <tool_call>{"name": ..., "arguments": ...}</tool_call> a ToolCall.
//
// ok is false when a tool call is malformed or truncated (bad JSON, no
// string name, no closing tag, stray text between calls). The message is then
// TRL's fallback: all the text with special tokens removed as Content and no
// tool calls, so the rollout simply stops. It never panics.
func (c *Chat) ParseAssistant(ids []int32) (msg Message, ok bool) {
	if i := indexID(ids, c.tok.EOS()); i >= 0 {
		ids = ids[:i]
	}
	msg, ok = parseAssistantText(c.tok.Decode(ids, false))
	if !ok {
		msg = Message{Role: "assistant", Content: c.tok.Decode(ids, true)}
	}
	return msg, ok
}

// ParseAssistantText is ParseAssistant for text. On failure the fallback
// content is text with the special tokens' strings removed.
func (c *Chat) ParseAssistantText(text string) (msg Message, ok bool) {
	if i := strings.Index(text, "<|im_end|>"); i >= 0 {
		text = text[:i]
	}
	msg, ok = parseAssistantText(text)
	if !ok {
		for _, a := range c.tok.added {
			if a.special {
				text = strings.ReplaceAll(text, a.content, "")
			}
		}
		msg = Message{Role: "assistant", Content: text}
	}
	return msg, ok
}

func indexID(ids []int32, id int32) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// parseAssistantText parses text that ends before the turn's <|im_end|>.
func parseAssistantText(text string) (Message, bool) {
	msg := Message{Role: "assistant"}
	text = strings.TrimSuffix(text, "<|endoftext|>")
	// Reasoning: "<think>\n...\n</think>\n\n". A turn generated after a
	// prompt that already opened <think> has only the closing tag.
	trimmed := strings.TrimLeft(text, " \t\r\n")
	if strings.HasPrefix(trimmed, "<think>") {
		body := trimmed[len("<think>"):]
		r, rest, closed := strings.Cut(body, "</think>")
		if !closed {
			// Truncated while thinking: all of it is reasoning.
			msg.ReasoningContent = strings.Trim(body, "\n")
			return msg, true
		}
		msg.ReasoningContent = strings.Trim(r, "\n")
		text = strings.TrimLeft(rest, " \t\r\n")
	} else if r, rest, ok := strings.Cut(text, "</think>"); ok && !strings.Contains(r, "<tool_call>") {
		msg.ReasoningContent = strings.Trim(r, "\n")
		text = strings.TrimLeft(rest, " \t\r\n")
	}
	content, calls, hasCalls := strings.Cut(text, "<tool_call>")
	if !hasCalls {
		msg.Content = text
		return msg, true
	}
	msg.Content = strings.TrimSuffix(content, "\n")
	calls = "<tool_call>" + calls
	for {
		calls = strings.TrimLeft(calls, " \t\r\n")
		if calls == "" {
			return msg, true
		}
		body, ok := strings.CutPrefix(calls, "<tool_call>")
		if !ok {
			return Message{}, false // stray text after a call
		}
		js, rest, closed := strings.Cut(body, "</tool_call>")
		if !closed {
			return Message{}, false // truncated call
		}
		call, ok := parseToolCallJSON(js)
		if !ok {
			return Message{}, false
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
		calls = rest
	}
}

// parseToolCallJSON parses {"name": "...", "arguments": {...}}. Missing or
// null arguments become {} (a valid call without arguments).
func parseToolCallJSON(js string) (ToolCall, bool) {
	var w struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(js))
	if err := dec.Decode(&w); err != nil || w.Name == nil || strings.TrimSpace(js[dec.InputOffset():]) != "" {
		return ToolCall{}, false
	}
	args := bytes.TrimSpace(w.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	return ToolCall{Name: *w.Name, Arguments: json.RawMessage(args)}, true
}
