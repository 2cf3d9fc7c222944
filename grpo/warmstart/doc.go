// Package warmstart gets a model that can call tools: the step before
// GRPO. A model with random weights cannot form a tool call, so every
// rollout of it fails alike and GRPO has nothing to learn; a model
// fine-tuned too long plays every rollout alike and GRPO has nothing to
// learn either. The calls, in order:
//
//	p, err := warmstart.Load(warmstart.Options{}, nil) // the embedded small Qwen3 and tokenizer, no download
//	convs, err := warmstart.Conversations(ctx, factory, rows, expert, grpo.PlayOptions{Config: &cfg})
//	_, err = warmstart.SFT(ctx, p, convs, sftCfg) // supervised fine-tuning on them
//	tr, err := grpo.NewTrainer(p.Model, p.Tokenizer, cfg, ...)
//	rep, err := warmstart.Check(ctx, tr, rows[:4], warmstart.CheckOptions{})
//	// errors.Is(err, warmstart.ErrNoSignal): rep says what to change
//
// Conversations plays a scripted policy (a grpo.Script: your expert, a
// few lines that read the env and return the next call) against the very
// environment GRPO trains on, through grpo.PlayScript: the conversations
// are exactly the rollouts GRPO would produce had the model played like
// the script, prompt, tool schemas and tool responses included.
//
// How long to warm start: long enough that the model makes well-formed
// calls, short enough that its sampled rollouts still differ. Check
// measures both on a few rows, sampled as GRPO's first step samples them,
// and fails with ErrNoSignal when no rollout made a tool call that worked
// (warm start longer) or when every prompt's rollouts all scored the same
// (GRPO's advantages would all be 0: warm start shorter if they all win,
// longer if they all lose, or sample at a higher temperature).
package warmstart
