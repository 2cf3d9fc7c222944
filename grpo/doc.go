// Package grpo trains language-model agents with GRPO (Group Relative
// Policy Optimization) against environments, following Hugging Face TRL's
// GRPOTrainer with environment_factory where it is right and doing better
// where its users hit problems.
//
// # Start here
//
// A run is five calls (the README's quick start is a complete program):
//
//	cfg := grpo.DefaultConfig() // TRL's GRPOConfig names; cfg.Validate() reports every problem
//	cfg.NumGenerations, cfg.MaxSteps = 8, 200
//	tr, err := grpo.NewTrainer(m, tok, cfg,
//		grpo.WithEnv(factory),                // your env: Reset(ctx, row) + tool methods (package env)
//		grpo.WithReward("solved", 1, solved), // func(ctx, *grpo.Rollout) (float64, error)
//		grpo.WithLoRA(model.LoRAConfig{R: 16, Alpha: 32}),
//		grpo.WithProgress(os.Stdout))
//	defer tr.Close()
//	err = tr.Train(ctx, grpo.NewDataset(rows)) // metrics.jsonl and plot.png in cfg.OutputDir
//	rep, err := tr.Evaluate(ctx, rows, grpo.EvalOptions{NumGenerations: 1, Greedy: true})
//
// Around them:
//
//   - The model and a warm start that teaches it to call your tools come
//     first: package grpo/warmstart (Load: the embedded small Qwen3 and
//     tokenizer in one call; Conversations and SFT: fine-tuning on a
//     scripted expert's episodes; Check: whether GRPO then has something to
//     learn).
//   - A reward function reads a Rollout: its conversation (Completion), its
//     counts (ToolCalls, ToolFailures), its row, its env in its final state.
//     Reading the conversation and the counts works wherever the env runs;
//     type-asserting Env works only in process. ErrNoScore leaves a
//     rollout unscored.
//   - To test a reward function, PlayScript plays an episode through the
//     trainer's own rollout loop with a Script (Turns of CallTurn and
//     TextTurn) in place of the model and returns the Rollout the function
//     sees in training.
//   - To read a run: ReadMetrics and the Metric* names (the README's
//     "Metrics and how to read them"), WritePlot, the Progress line.
//   - To resume: Config.SaveSteps, LatestCheckpoint and Trainer.Resume.
//
// The other exported names are what these are made of, for users who run
// their own loop (Trainer.Step, RolloutFunc, Sampler) or check the
// numbers: the advantage, loss and statistics math as pure functions
// with table tests against TRL (ComputeAdvantages, PolicyLoss, TokenLoss,
// LossWeights, RewardTable, WindowMetrics, ...). A first program needs
// none of them.
//
// # One generation batch
//
// Step (Train calls it for each batch of prompts) plays NumGenerations
// rollouts per prompt. Each rollout takes an environment from a pool
// ("construct once, reset often"), resets it with the dataset row (every
// column; the observation it returns is appended to the prompt), renders
// the prompt with the environment's tool schemas and Qwen3's chat template
// (Config.RenderOptions), and generates. The loop of TRL's _tool_call_loop
// follows, with three differences that matter:
//
//   - Continuous batching: all rollouts decode in one batch; a rollout
//     whose turn ends with tool calls leaves the batch, its calls run on
//     their own goroutine (at most Config.ToolConcurrency at once, each
//     with Config.ToolTimeout), and it rejoins as soon as they answer. A
//     slow environment delays only its own rollout. The G rollouts of one
//     prompt share its prefill (the prompt is fed once and its cache forked).
//   - Token ids are the currency: the tool responses are rendered as the
//     template's tool turn plus the next generation prompt
//     (tokenizer.Chat.ToolSuffixIDs) and appended to the token sequence;
//     what the model generated is never decoded and re-encoded. Each
//     rollout carries one explicit mask: true on sampled tokens (they get
//     loss), false on tool and template tokens (attended to, no loss).
//   - Failures: a malformed call, an unknown tool, bad arguments or a tool
//     error go back to the model as the tool's response ({"error": ...})
//     and are counted (tools/failure_frequency). An environment failure (a
//     lost OpenEnv session, a Reset that fails or panics, a reset or tool
//     past its deadline, an error wrapping ErrEnvFailed) replays the
//     rollout from the start on a fresh environment, up to
//     Config.RolloutAttempts (rollouts/replayed); tries that cannot reach
//     the environment (env.ErrUnavailable: its server down or restarting)
//     are not attempts and go on, with an exponential backoff and jitter,
//     until Config.RolloutRetryBudget after the first failure, so a server
//     restart of 30 s costs waiting, not rollouts. A reset or tool call
//     that ignores its context is abandoned at its deadline (ErrAbandoned,
//     rollouts/abandoned): its goroutine is left to finish on its own and
//     discard its environment, which is never pooled again, and the batch
//     goes on; cancelling returns at once. A rollout failing every attempt,
//     whose prompt does not fit (MaxPromptLength, the model's context), or
//     whose reward panics or passes Config.RewardTimeout is left out of
//     the loss and of its group's baseline, counted in rollouts/failed and
//     logged with its cause. An environment that fails while giving its
//     own reward (after the episode, when no replay is possible) fails its
//     rollout alike. A step whose rollouts all failed is an error.
//   - Generation is batch-invariant (Config.BatchInvariantRollouts): a
//     sequence's log-probs do not depend on which rollouts share its
//     decoding steps, so identical runs log identical metrics, however
//     their tool calls are timed; and where the backend's attention is
//     batch-invariant too (the GPU, a CPU without AVX-512) the training
//     passes compute as the decode steps did
//     (model.Trainable.SetBatchInvariant), so
//     sampling/sampling_logp_difference/max is exactly 0.
//
// A rollout ends when its last turn calls no tool, when
// Config.MaxToolCallingIterations rounds ran, or when the shared token
// budget Config.MaxCompletionLength (model and tool tokens together) is
// spent: a turn is generated with at most the remaining budget, and tool
// responses that would leave no room are dropped (the tools did run).
//
// Rewards (WithReward, and env.Rewarder environments, named by their type)
// see each Rollout with its environment in its final state; advantages
// and the metrics are pure functions of the scored batch (advantage.go,
// stats.go). The batch is then shuffled and cut into StepsPerGeneration
// micro-batches, trained on NumIterations times, with an optimizer step
// every GradientAccumulationSteps micro-batches (TRL's layout). The loss
// of every TRL loss type, at either importance-sampling level, runs on the
// model's backend (model.Loss); its one spec is kernels/ref, and loss.go
// maps the Config onto it (Config.LossParams, LossWeights).
// When the policy moves within a generation, old log-probs are those the
// sampler recorded: the full tempered distribution's (before any
// top-k/top-p/min-p filter), computed by the training kernels, so they are
// what a scoring pass would give; after a RolloutFunc, or rollouts
// generated at a reduced matmul precision (Config.RolloutMatMulPrecision
// "bf16": prefills and decode steps with activations rounded to bf16, the
// training passes exact, as verl and TRL split a bf16 vLLM sampler from
// an fp32 trainer), a scoring pass computes them and Config.ISCorrection
// corrects for the generator's differing numbers. sampling/* logs how far
// the recorded log-probs are from the training forward's before the policy
// moves: the scoring pass's when there is one (as TRL compares vLLM's with
// its forward right after generation), else the loss forwards of the
// micro-batches that run before the generation's first optimizer step,
// reduced in rollout order whatever order they ran in.
//
// # Producing rollouts apart from learning (asynchronous GRPO)
//
// Step is produce (rollouts and their environments, rewards, advantages)
// and consume (micro-batches, optimizer steps); the two meet only in a
// scored generation. With Config.MaxStaleness = s > 0 (TRL's
// AsyncGRPOTrainer max_staleness), Train runs produce on a producer
// goroutine ahead of the learner: generation k, learnt from optimizer step
// g_k on, is sampled with the policy of exactly max(0, g_k − s) steps, so
// a batch is never more than s optimizer steps behind the policy that
// starts learning from it (async/staleness/mean and /max; each Rollout's
// PolicyVersion, the completions log's policy_version), and a run is
// reproducible. The older policy is a snapshot of the LoRA adapters
// (model.AdapterSnapshot) the learner takes at that step; the producer's
// forwards read it through model.UseAdapters, a pointer swap, while the
// learner trains the live adapters; the base weights are never copied.
// The producer then scores each generation with the adapters that sampled
// it, so old log-probs are always the sampling policy's, the ratio is
// between the policy that sampled and the one that trains, and they do
// not depend on how decoding happened to be batched. Staleness 0 through
// the producer is the synchronous trainer, bit for bit. The model serves
// one goroutine at a time (a generation-first lock, modelLock): on the CPU
// the overlap is between the producer's tool calls, environment resets and
// reward functions and the learner's passes (BENCHMARKS.md: 1.37× at a
// tool-bound setting). A checkpoint keeps the snapshots of versions below
// its step that generations in flight need; a resumed run plays those
// generations again and ends where the uninterrupted one does, bit for bit
// (deterministic environments assumed, as for any resume). Asynchronous
// training needs LoRA and the trainer's own rollouts (no RolloutFunc).
//
// # Memory
//
// A step holds the rollouts' KV cache while generating and activations
// while learning, never both: between the two the trainer gives the KV
// pool's memory back (model.TrimKV) and collects, so the step's peak is the
// larger phase, not their sum. Config.KVCacheDType = KVBFloat16 halves the
// cache (at Qwen3-0.6B 64 rollouts × 1,024 tokens take 7 GiB instead of
// 14), and training runs checkpointed (GradientCheckpointing) in groups of
// at most Config.MicroBatchTokens tokens, so its activations do not grow
// with the completions' number or length. BENCHMARKS.md sizes a 0.6B step
// from these phases. In asynchronous training the producer's cache is live
// while the learner's activations are: the budget is then the sum.
//
// A RolloutFunc replaces the whole rollout side for users who own
// generation; the trainer scores and learns from what it returns.
//
// # Cancellation and state
//
// Cancelling Train's or Step's context stops at a generation boundary:
// before a generation's first optimizer step it is dropped (gradients of
// the unfinished step too, the environments go back to their pools, State
// unchanged); after it, the generation's remaining optimizer steps
// (NumIterations × StepsPerGeneration / GradientAccumulationSteps in all)
// run first. State therefore always matches the weights and the data
// position, so a checkpoint written then resumes bit for bit. Every random draw is
// derived from Config.Seed and the state's counters, so a run resumed from
// a checkpoint draws what the uninterrupted run drew.
package grpo
