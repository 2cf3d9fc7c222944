package grpo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// tinyModel writes a random tiny Qwen3 sized to the embedded tiny
// tokenizer into a temp dir and loads it on a 2-thread CPU backend.
func tinyModel(t testing.TB, seed uint64) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	return tinyModelOn(t, seed, false)
}

// tinyModelOn is tinyModel; with copyImports the backend's Import returns
// a separate copy, as a device's does (kerneltest.Counting.CopyImports).
func tinyModelOn(t testing.TB, seed uint64, copyImports bool) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	cfg.VocabSize = tok.VocabSize()
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.F32, seed, model.RandomOptions{}))
	be := cpu.New(2)
	var mb kernels.Backend = be
	if copyImports {
		mb = &kerneltest.Counting{Backend: be, CopyImports: true}
	}
	m, err := model.Load(dir, mb)
	require.NoError(t, err)
	t.Cleanup(func() {
		m.Close()
		be.Close()
	})
	return m, tok
}

// testConfig is a small valid Config: G rollouts of `prompts` prompts per
// generation, one micro-batch, one optimizer step.
func testConfig(g, prompts int) Config {
	c := DefaultConfig()
	c.NumGenerations = g
	c.PerDeviceTrainBatchSize = g * prompts
	c.MaxCompletionLength = 96
	c.MaxSteps = 4
	c.LearningRate = 1e-3
	c.ToolConcurrency = 4
	c.EnableThinking = tokenizer.ThinkingOff
	c.LoggingSteps = 1
	return c
}

// scriptDecoder is a turnDecoder whose turns come from a script instead of
// the model: script(rollout, turn) is the text of a rollout's turn, where
// rollouts are numbered in the order their sequences are first seen (the
// batch's rollout order for first attempts). The turn ends with <|im_end|>
// unless the text ends with "…" (a turn cut off: the budget runs out).
type scriptDecoder struct {
	mu     sync.Mutex
	tok    *tokenizer.Tokenizer
	script func(rollout, turn int) string
	seen   map[*model.Sequence]int
	turns  map[*model.Sequence]int
	queue  map[int]genRequest
	nextID int
	steps  []int  // requests finished per step
	onStep func() // called at the start of every step, if set
}

// scripted returns a decoder factory over script that shares one record
// of what it saw.
func scripted(tok *tokenizer.Tokenizer, script func(rollout, turn int) string) (*scriptDecoder, func(sampling, []int32) turnDecoder) {
	d := &scriptDecoder{tok: tok, script: script, seen: map[*model.Sequence]int{}, turns: map[*model.Sequence]int{}}
	return d, func(sampling, []int32) turnDecoder {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.queue = map[int]genRequest{}
		return d
	}
}

func (d *scriptDecoder) add(r genRequest) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[r.seq.s]; !ok {
		d.seen[r.seq.s] = len(d.seen)
	}
	id := d.nextID
	d.nextID++
	d.queue[id] = r
	return id, nil
}

func (d *scriptDecoder) close() {}

func (d *scriptDecoder) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue)
}

func (d *scriptDecoder) step(ctx context.Context) (map[int]turn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.onStep != nil {
		d.onStep()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[int]turn{}
	for id, r := range d.queue {
		s := r.seq.s
		text := d.script(d.seen[s], d.turns[s])
		d.turns[s]++
		if text == "!err" {
			out[id] = turn{err: errors.New("model: context length exceeded")}
			continue
		}
		cut := len(text) >= len("…") && text[len(text)-len("…"):] == "…"
		ids := d.tok.Encode(text)
		if !cut {
			ids = append(ids, d.tok.EOS())
		}
		stopped := !cut
		if len(ids) > r.maxTokens {
			ids, stopped = ids[:r.maxTokens], false
		}
		lp := make([]float32, len(ids))
		for i := range lp {
			lp[i] = -0.5
		}
		s.Append(ids...)
		out[id] = turn{ids: ids, logprobs: lp, stopped: stopped}
	}
	d.steps = append(d.steps, len(d.queue))
	d.queue = map[int]genRequest{}
	return out, nil
}

// call renders a tool call as the model would write it.
func call(name, args string) string {
	return fmt.Sprintf("<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", name, args)
}

// counterEnv is a tool env with a counter: increment adds to it.
type counterEnv struct {
	n      int
	resets []env.Row
}

type incrementArgs struct {
	Step int `json:"step" desc:"how much to add"`
}

func (c *counterEnv) Reset(_ context.Context, row env.Row) (string, error) {
	c.n = 0
	c.resets = append(c.resets, row)
	return "Count up.", nil
}

func (c *counterEnv) Increment(_ context.Context, a incrementArgs) (string, error) {
	c.n += a.Step
	return strconv.Itoa(c.n), nil
}

func (c *counterEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Increment": "Adds step to the counter and returns it."}
}

// scoredCounter is a counterEnv that owns its reward: the counter.
type scoredCounter struct{ counterEnv }

func (c *scoredCounter) Increment(ctx context.Context, a incrementArgs) (string, error) {
	return c.counterEnv.Increment(ctx, a)
}

func (c *scoredCounter) Reward(context.Context) (float64, error) { return float64(c.n), nil }

// echoEnv is a second tool env: shout upper-cases its text.
type echoEnv struct{ resets []env.Row }

type shoutArgs struct {
	Text string `json:"text" desc:"what to shout"`
}

func (e *echoEnv) Reset(_ context.Context, row env.Row) (string, error) {
	e.resets = append(e.resets, row)
	return "Shout.", nil
}

func (e *echoEnv) Shout(_ context.Context, a shoutArgs) (string, error) {
	return a.Text + "!", nil
}

func (e *echoEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Shout": "Shouts the text."}
}

// constant is a reward function returning v.
func constant(v float64) RewardFunc {
	return func(context.Context, *Rollout) (float64, error) { return v, nil }
}
