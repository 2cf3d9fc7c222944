package grpo

import (
	"context"
	"errors"

	"github.com/x/env"
	"github.com/x/tokenizer"
)

// Rollout is one episode: a prompt, everything generated after it over all
// turns (the model's tokens and the tool responses between them), the
// per-token loss mask and the sampling log-probs, the conversation as
// messages, and the environment it was played against.
//
// A Rollout is read by reward functions during Step; its Env belongs to the
// trainer and goes back to its pool when Step returns, so a RewardFunc must
// not keep it.
type Rollout struct {
	Row     env.Row // the dataset row, every column ("environment" included)
	Group   int     // index of its prompt in the generation batch; the G rollouts of a prompt share it
	EnvName string  // the environment's name in WithEnvs ("" otherwise)
	Env     env.Env // the environment in its final state (nil with WithRolloutFunc)

	Prompt     []tokenizer.Message // the prompt after the reset observation joined it
	Completion []tokenizer.Message // assistant, tool, ..., assistant

	PromptIDs     []int32
	CompletionIDs []int32 // every token after the prompt: model turns and tool responses
	Mask          []bool  // [len(CompletionIDs)] true for the tokens the model sampled (they get loss)
	// LogProbs are the model tokens' log-probs under the policy that sampled
	// them, at the sampling temperature without top-k/top-p/min-p filters
	// (what the training forward gives at that policy, or its bf16-rounded
	// version under Config.RolloutMatMulPrecision "bf16"); 0 on tool
	// tokens. From a RolloutFunc they are whatever it returned.
	LogProbs []float32 // [len(CompletionIDs)]

	ToolCalls    int  // tool calls made (malformed ones included)
	ToolFailures int  // calls that failed: malformed, unknown tool, bad arguments, tool error
	Truncated    bool // the last model turn ran out of budget before its end token

	// PolicyVersion is the optimizer steps the policy that sampled the
	// rollout had taken (TrainerState.GlobalStep then): the step it is
	// learnt at in synchronous training, up to Config.MaxStaleness fewer in
	// asynchronous training.
	PolicyVersion int

	// Attempts is how many times the episode was played (1 when nothing
	// was replayed); tries that found the environment unavailable
	// (env.ErrUnavailable) are not attempts.
	Attempts int
	// Abandoned counts its calls (resets, tools, rewards) left running past
	// their deadline (ErrAbandoned).
	Abandoned int
	Err       error // non-nil when the rollout failed: left out of the loss and of its group's baseline
	// Extra holds the extra fields a RolloutFunc returned.
	Extra map[string]any
}

// ModelTokens is the number of tokens the model sampled (Σ Mask).
func (r *Rollout) ModelTokens() int {
	n := 0
	for _, m := range r.Mask {
		if m {
			n++
		}
	}
	return n
}

// RolloutFunc generates the rollouts of one batch for users who own the
// generation loop (an external agent, a custom sampler). rows holds every
// prompt row NumGenerations times, consecutively; the function returns one
// Generated per row, in order. It runs between optimizer steps, never
// concurrently with training, so it may use the policy model.
type RolloutFunc func(ctx context.Context, rows []env.Row) ([]Generated, error)

// Generated is one rollout produced by a RolloutFunc.
type Generated struct {
	PromptIDs     []int32
	CompletionIDs []int32
	LogProbs      []float32 // [len(CompletionIDs)] sampling log-probs of the model's tokens
	// Mask, if not nil, is false on tokens the model did not sample (tool or
	// env output); nil means every completion token was sampled.
	Mask []bool
	// Extra fields reach reward functions through Rollout.Extra.
	Extra map[string]any
}

// ErrEnvFailed marks an environment failure that loses the episode (for
// example a tool whose backing process died): a tool returning an error
// that wraps it makes the rollout play again from the start on a fresh
// environment instead of showing the error to the model. Lost OpenEnv
// sessions and tool-call deadlines count as such failures too.
var ErrEnvFailed = errors.New("grpo: environment failed")
