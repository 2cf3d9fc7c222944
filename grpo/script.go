package grpo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/x/env"
	"github.com/x/tokenizer"
)

// Script plays the model's part of an episode without a model: given the
// rollout so far (its Row, its Prompt, its Completion with the tool
// responses, its Env in its current state), it returns the next assistant
// turn. A turn that calls no tool ends the episode, as it does in
// training. A Script drives PlayScript (testing reward functions) and the
// SFT conversations of a warm start (package grpo/warmstart). It may read
// the Rollout but must not change it.
type Script func(ctx context.Context, r *Rollout) (tokenizer.Message, error)

// Turns is a Script of fixed turns, returned in order. An episode that
// asks for more turns than it has fails: end the script with a turn that
// calls no tool.
func Turns(turns ...tokenizer.Message) Script {
	return func(ctx context.Context, r *Rollout) (tokenizer.Message, error) {
		n := assistantTurns(r.Completion)
		if n >= len(turns) {
			return tokenizer.Message{}, fmt.Errorf("grpo: Turns: the episode asks for turn %d of a script of %d (end the script with a turn that calls no tool)", n+1, len(turns))
		}
		return turns[n], nil
	}
}

// CallTurn is an assistant turn that calls tool with args, a JSON object
// written as text (`{"word": "crane"}`). Arguments that are valid JSON but
// wrong for the tool are a failed call, as from a model.
func CallTurn(tool, args string) tokenizer.Message {
	return tokenizer.Message{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Name: tool, Arguments: json.RawMessage(args)}}}
}

// TextTurn is an assistant turn of plain text, which ends the episode.
// Text that contains <tool_call> but does not parse as a call
// ("<tool_call>{oops</tool_call>") is a malformed call: the trainer
// answers it with an error, counts it, and the episode goes on.
func TextTurn(text string) tokenizer.Message {
	return tokenizer.Message{Role: "assistant", Content: text}
}

// PlayOptions configure PlayScript.
type PlayOptions struct {
	// Tokenizer renders and parses the turns; nil means the embedded
	// tokenizer.Tiny(). Only the token-id fields of the Rollout depend on it.
	Tokenizer *tokenizer.Tokenizer
	// Config is the training configuration whose rollout settings apply
	// (MaxCompletionLength, MaxToolCallingIterations, EnableThinking,
	// MaxPromptLength, ToolTimeout); nil means DefaultConfig().
	Config *Config
}

// PlayScript plays one episode on e exactly as the trainer plays a rollout,
// with script in place of the model, and returns the Rollout a reward
// function sees in training: e reset with row, the prompt rendered with
// e's tools, each turn parsed and its tool calls run through e's tools,
// failures (malformed calls, unknown tools, bad arguments, tool errors)
// answered and counted in ToolCalls and ToolFailures, the token budget and
// the tool-round cap applied. It runs the trainer's own rollout loop (the
// one implementation), so a reward function under test sees exactly what
// it sees in training. The rollout's LogProbs are 0 (a script is
// certain). e is left in its final state for the reward function, and is
// played once: an environment failure (ErrEnvFailed, a lost session) is
// returned, not replayed. e must not be in use elsewhere meanwhile.
func PlayScript(ctx context.Context, e env.Env, row env.Row, script Script, o PlayOptions) (*Rollout, error) {
	if e == nil || script == nil {
		return nil, errors.New("grpo: PlayScript: nil env or script")
	}
	tok := o.Tokenizer
	if tok == nil {
		tok = tokenizer.Tiny()
	}
	cfg := DefaultConfig()
	if o.Config != nil {
		cfg = *o.Config
	}
	chat, err := tokenizer.NewChat(tok)
	if err != nil {
		return nil, fmt.Errorf("grpo: PlayScript: chat template: %w", err)
	}
	given := false
	pool, err := env.NewPool(ctx, env.FactoryFunc(func(context.Context) (env.Env, error) {
		if given {
			return nil, errors.New("the env was discarded after a failure")
		}
		given = true
		return e, nil
	}))
	if err != nil {
		return nil, fmt.Errorf("grpo: PlayScript: %w", err)
	}
	rc := cfg.rolloutConfig()
	rc.attempts, rc.budget = 1, 0
	dec := &playDecoder{chat: chat, thinking: cfg.EnableThinking, script: script}
	eng := &engine{chat: chat, envs: pool, cfg: rc, stop: []int32{tok.EOS()},
		decoder: func(sampling, []int32) turnDecoder { return dec.reset() }}
	rs, insts, _, err := eng.play(ctx, []env.Row{row}, []int{0}, sampling{}, 0)
	if err != nil {
		return nil, fmt.Errorf("grpo: PlayScript: %w", err)
	}
	if insts[0] != nil {
		insts[0].Release()
	}
	r := rs[0]
	switch {
	case dec.err != nil:
		return r, fmt.Errorf("grpo: PlayScript: %w", dec.err)
	case r.Err != nil:
		return r, fmt.Errorf("grpo: PlayScript: %w", r.Err)
	}
	return r, nil
}

// playDecoder is the turnDecoder of PlayScript: each turn is the
// script's message rendered as the model would have written it.
type playDecoder struct {
	chat     *tokenizer.Chat
	thinking tokenizer.Thinking
	script   Script

	mu    sync.Mutex
	queue map[int]genRequest
	next  int
	err   error // the script's first error
}

func (d *playDecoder) reset() turnDecoder {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queue = map[int]genRequest{}
	return d
}

func (d *playDecoder) add(r genRequest) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := d.next
	d.next++
	d.queue[id] = r
	return id, nil
}

func (d *playDecoder) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue)
}

func (d *playDecoder) close() {}

// step answers every queued request with its script's next turn, cut to
// the request's budget as generation would be.
func (d *playDecoder) step(ctx context.Context) (map[int]turn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int]turn, len(d.queue))
	for id, req := range d.queue {
		ids, err := d.turnIDs(ctx, req.r)
		if err != nil {
			if d.err == nil {
				d.err = err
			}
			out[id] = turn{err: err}
			continue
		}
		stopped := true
		if len(ids) > req.maxTokens {
			ids, stopped = ids[:max(req.maxTokens, 0)], false
		}
		req.seq.s.Append(ids...)
		out[id] = turn{ids: ids, logprobs: make([]float32, len(ids)), stopped: stopped}
	}
	d.queue = map[int]genRequest{}
	return out, nil
}

// turnIDs asks the script for r's next turn and returns its tokens.
func (d *playDecoder) turnIDs(ctx context.Context, r *Rollout) ([]int32, error) {
	msg, err := d.script(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("script, turn %d: %w", assistantTurns(r.Completion)+1, err)
	}
	text, err := turnText(d.chat, msg, d.thinking)
	if err != nil {
		return nil, fmt.Errorf("script, turn %d: %w", assistantTurns(r.Completion)+1, err)
	}
	return d.chat.Tokenizer().Encode(text), nil
}

func assistantTurns(msgs []tokenizer.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// turnText is the text a model writes for the assistant message m after
// the generation prompt (Config.RenderOptions with thinking), ending with
// <|im_end|>: what the chat template renders for m in the training
// variant, after the generation prompt's own opening. Reasoning needs
// thinking on (with thinking off the generation prompt already closes an
// empty think block).
func turnText(chat *tokenizer.Chat, m tokenizer.Message, thinking tokenizer.Thinking) (string, error) {
	m.Role = "assistant"
	user := tokenizer.Message{Role: "user"}
	prefix, err := chat.Render([]tokenizer.Message{user}, tokenizer.RenderOptions{AddGenerationPrompt: true, EnableThinking: thinking, KeepAllReasoning: true})
	if err != nil {
		return "", err
	}
	full, err := chat.Render([]tokenizer.Message{user, m}, tokenizer.RenderOptions{EnableThinking: thinking, KeepAllReasoning: true})
	if err != nil {
		return "", err
	}
	text, ok := strings.CutPrefix(full, prefix)
	if !ok {
		return "", errors.New("the turn has reasoning but thinking is off (Config.EnableThinking): the generation prompt already closed an empty think block")
	}
	return strings.TrimSuffix(text, "\n"), nil
}
