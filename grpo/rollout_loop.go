package grpo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/x/env"
	"github.com/x/env/openenv"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// rolloutConfig is what the multi-turn loop needs from Config.
type rolloutConfig struct {
	maxCompletion   int // token budget of the whole completion, model and tool tokens
	maxIters        int // tool rounds per rollout; < 0 unlimited, 0 never run tools
	thinking        tokenizer.Thinking
	attempts        int           // env attempts per rollout (≥ 1); tries that find the env unavailable do not count
	budget          time.Duration // how long after its first env failure a rollout may start a retry; 0 no limit
	toolTimeout     time.Duration // deadline of one reset or tool call; 0 none
	toolConcurrency int           // env operations (resets, tool rounds) in flight at once
	maxPrompt       int           // longest rendered prompt, tokens; 0 no cap
}

// rolloutConfig is the multi-turn loop's part of c.
func (c Config) rolloutConfig() rolloutConfig {
	return rolloutConfig{
		maxCompletion:   c.MaxCompletionLength,
		maxIters:        c.MaxToolCallingIterations,
		thinking:        c.EnableThinking,
		attempts:        c.RolloutAttempts,
		budget:          c.RolloutRetryBudget,
		toolTimeout:     c.ToolTimeout,
		toolConcurrency: c.ToolConcurrency,
		maxPrompt:       c.MaxPromptLength,
	}
}

// envSource starts an episode on a pooled environment (env.Pool, env.Router).
type envSource interface {
	Start(ctx context.Context, row env.Row) (*env.Instance, string, error)
}

// engine plays rollouts: the loop of spec §1.5 with continuous batching,
// concurrent tool rounds and env-failure replay.
type engine struct {
	pol  *policy
	chat *tokenizer.Chat
	envs envSource // nil: no environment, prompts come from the rows
	cfg  rolloutConfig
	stop []int32
	log  *slog.Logger
	// decoder makes the turn decoder of a batch (the policy's by default).
	decoder func(s sampling, stop []int32) turnDecoder
}

// rolloutTiming is where a batch of rollouts spent its wall time.
type rolloutTiming struct {
	generation time.Duration // decoding and prefill
	tools      time.Duration // waiting on resets and tool rounds with nothing to decode
}

// live is one rollout being played.
type live struct {
	r      *Rollout
	idx    int
	inst   *env.Instance
	sq     seq
	hasSeq bool
	opts   tokenizer.RenderOptions
	iters  int
	// firstFail is when its env first failed (zero: never); the retry
	// budget runs from it. tries counts the retries started since.
	firstFail time.Time
	tries     int
	// unreachable counts the tries that found the env unavailable.
	unreachable int
	lastErr     error
	done        bool
}

// event is the result of an env operation run off the decoding goroutine.
type event struct {
	idx      int
	reset    bool
	inst     *env.Instance
	obs      string
	msgs     []tokenizer.Message // tool responses of a round
	failures int
	err      error // an env failure: the rollout is replayed
	// abandoned: the call ignored its deadline and was left running; the
	// env it holds is discarded by that call's goroutine when it returns,
	// so the rollout forgets it without discarding it.
	abandoned bool
}

// play runs len(rows) rollouts (rows already repeated per generation):
// rollout i uses rows[i] and group groups[i]. smp is the sampling; seed
// makes the batch's draws reproducible. The returned instances (aligned
// with the rollouts, nil for failed ones) belong to the caller, who must
// release them after scoring.
func (e *engine) play(ctx context.Context, rows []env.Row, groups []int, smp sampling, seed uint64) ([]*Rollout, []*env.Instance, rolloutTiming, error) {
	p := newRolloutLoop(ctx, e, rows, groups, smp, seed)
	defer p.close()
	if err := p.run(); err != nil {
		p.cleanup()
		return nil, nil, p.tm, err
	}
	rs, insts := p.results()
	return rs, insts, p.tm, nil
}

// rolloutLoop is one batch of rollouts being played: the loop of spec §1.5
// with its state. Ownership: env operations (resets, tool rounds) run on
// goroutines started by startOp, bounded by sem, and hand their outcome
// back as an event on events; they touch nothing else of the loop.
// Everything else — the rollouts' state (ls), the decoder, byID, pending,
// tm — belongs to the goroutine that calls run and is touched by no other,
// so it needs no lock.
type rolloutLoop struct {
	e      *engine
	ctx    context.Context // cancelled by cleanup and close: env operations stop
	cancel context.CancelFunc
	seed   uint64
	ls     []*live // the rollouts, by index
	dec    turnDecoder
	byID   map[int]*live // decoder request id -> its rollout
	// pending counts rollouts not finished (successful or failed).
	pending int
	tm      rolloutTiming
	wg      sync.WaitGroup // env operations in flight
	events  chan event     // one op in flight per rollout: sends never block
	sem     chan struct{}  // env operations in flight at once
}

// newRolloutLoop prepares the rollouts of rows; run plays them.
func newRolloutLoop(ctx context.Context, e *engine, rows []env.Row, groups []int, smp sampling, seed uint64) *rolloutLoop {
	n := len(rows)
	p := &rolloutLoop{
		e:       e,
		seed:    seed,
		ls:      make([]*live, n),
		byID:    map[int]*live{},
		pending: n,
		events:  make(chan event, n),
		sem:     make(chan struct{}, max(e.cfg.toolConcurrency, 1)),
	}
	for i := range p.ls {
		p.ls[i] = &live{r: &Rollout{Row: rows[i], Group: groups[i]}, idx: i}
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.dec = e.decoder(smp, e.stop)
	return p
}

// close gives the decoder back and stops what is still running.
func (p *rolloutLoop) close() {
	p.dec.close()
	p.cancel()
}

// run plays every rollout to its end. An error is fatal to the batch: the
// caller calls cleanup.
func (p *rolloutLoop) run() error {
	if err := p.firstAttempts(); err != nil {
		return err
	}
	for p.pending > 0 {
		if err := p.takeEvents(); err != nil {
			return err
		}
		if p.dec.len() == 0 {
			continue
		}
		if err := p.decode(); err != nil {
			return err
		}
	}
	p.wg.Wait()
	return nil
}

// results are the played rollouts and the instances they hold, by index.
func (p *rolloutLoop) results() ([]*Rollout, []*env.Instance) {
	out := make([]*Rollout, len(p.ls))
	insts := make([]*env.Instance, len(p.ls))
	for i, l := range p.ls {
		out[i] = l.r
		insts[i] = l.inst
		if l.inst != nil {
			l.r.Env = l.inst.Env
			l.r.EnvName = l.inst.Name
		}
	}
	return out, insts
}

// startOp runs the env operation f of l off the decoding goroutine; its
// event comes back on p.events.
func (p *rolloutLoop) startOp(l *live, f func(ctx context.Context) event) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case p.sem <- struct{}{}:
		case <-p.ctx.Done():
			p.events <- event{idx: l.idx, err: p.ctx.Err()}
			return
		}
		defer func() { <-p.sem }()
		p.events <- f(p.ctx)
	}()
}

// cleanup stops the env operations in flight and discards every
// environment and sequence the batch holds (after a fatal error).
func (p *rolloutLoop) cleanup() {
	p.cancel()
	p.wg.Wait()
	close(p.events)
	for ev := range p.events {
		if ev.abandoned {
			p.ls[ev.idx].inst = nil // its call's goroutine discards it
		}
		if ev.inst != nil {
			_ = ev.inst.Discard()
		}
	}
	for _, l := range p.ls {
		if l.hasSeq {
			l.sq.release()
		}
		if l.inst != nil {
			_ = l.inst.Discard()
			l.inst = nil
		}
	}
}

// finish ends l, successful or failed.
func (p *rolloutLoop) finish(l *live) {
	l.done = true
	p.pending--
	if l.hasSeq {
		l.sq.release()
		l.hasSeq = false
	}
}

// enqueue asks for l's next turn within the remaining budget.
func (p *rolloutLoop) enqueue(l *live) error {
	id, err := p.dec.add(genRequest{seq: l.sq, maxTokens: p.e.cfg.maxCompletion - len(l.r.CompletionIDs), r: l.r})
	if err != nil {
		return fmt.Errorf("grpo: queue generation of rollout %d: %w", l.idx, err)
	}
	p.byID[id] = l
	return nil
}

// startReset launches attempt l.r.Attempts+1 of l's episode.
func (p *rolloutLoop) startReset(l *live, backoff time.Duration) {
	l.r.Attempts++
	row := l.r.Row
	e := p.e
	if e.envs == nil {
		p.events <- event{idx: l.idx, reset: true}
		return
	}
	p.startOp(l, func(ctx context.Context) event {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return event{idx: l.idx, reset: true, err: ctx.Err()}
			}
		}
		octx, ocancel := e.opContext(ctx)
		defer ocancel()
		type started struct {
			inst *env.Instance
			obs  string
		}
		st, err := guarded(octx, fmt.Sprintf("reset of rollout %d (row %v)", l.idx, row), func(c context.Context) (started, error) {
			inst, obs, err := e.envs.Start(c, row)
			return started{inst, obs}, err
		}, func(st started, _ error) {
			if st.inst != nil {
				_ = st.inst.Discard()
			}
		})
		if errors.Is(err, ErrAbandoned) {
			e.abandoned(l, err)
			return event{idx: l.idx, reset: true, err: err, abandoned: true}
		}
		if err != nil && octx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("reset: %w (deadline %v)", err, context.DeadlineExceeded)
		}
		return event{idx: l.idx, reset: true, inst: st.inst, obs: st.obs, err: err}
	})
}

// abandoned logs a call of l's that was left running past its deadline.
func (e *engine) abandoned(l *live, err error) {
	if e.log != nil {
		e.log.Warn("grpo: env call abandoned past its deadline; its env will be discarded when it returns", "rollout", l.idx, "group", l.r.Group, "cause", err)
	}
}

// envFailed handles the env failure ev of l: an abandoned call's env is
// forgotten (its goroutine discards it) and counted; then replay or give
// up.
func (p *rolloutLoop) envFailed(l *live, ev event) {
	if ev.abandoned {
		l.inst = nil
		l.r.Abandoned++
	}
	p.failAttempt(l, ev.err)
}

// failAttempt handles an env failure of l: replay or give up. A try that
// found the env unavailable (env.ErrUnavailable: its server down or
// restarting) is not an attempt: it is retried until the retry budget
// runs out; any other failure uses up one of the rollout's attempts.
// Retries wait retryBackoff, growing with each. With one attempt
// (RolloutAttempts 1, PlayScript) nothing is tried again.
func (p *rolloutLoop) failAttempt(l *live, err error) {
	if l.inst != nil {
		_ = l.inst.Discard()
		l.inst = nil
	}
	if l.hasSeq {
		l.sq.release()
		l.hasSeq = false
	}
	l.lastErr = err
	r := l.r
	r.Env, r.EnvName = nil, ""
	r.Prompt, r.Completion, r.PromptIDs = nil, nil, nil
	r.CompletionIDs, r.Mask, r.LogProbs = nil, nil, nil
	r.ToolCalls, r.ToolFailures, r.Truncated = 0, 0, false
	l.iters = 0
	unavailable := errors.Is(err, env.ErrUnavailable)
	if unavailable {
		r.Attempts-- // the env was not reached: no attempt was played
		l.unreachable++
	}
	now := time.Now()
	if l.firstFail.IsZero() {
		l.firstFail = now
	}
	l.tries++
	backoff := retryBackoff(l.tries, rand.Float64())
	budget := p.e.cfg.budget
	inBudget := budget <= 0 || now.Add(backoff).Sub(l.firstFail) <= budget
	retries := p.e.cfg.attempts > 1 // RolloutAttempts 1: nothing is tried again
	if inBudget && retries && (unavailable || r.Attempts < p.e.cfg.attempts) {
		p.startReset(l, backoff)
		return
	}
	switch {
	case unavailable && !retries:
		r.Err = fmt.Errorf("rollout %d (group %d, row %v) failed: its env could not be reached, and RolloutAttempts 1 tries nothing again: %w", l.idx, r.Group, r.Row, err)
	case !inBudget && l.unreachable > 0:
		r.Err = fmt.Errorf("rollout %d (group %d, row %v) failed: no attempt within RolloutRetryBudget %v of its first env failure (%d attempt(s) played, %d tries found the env unavailable): %w",
			l.idx, r.Group, r.Row, budget, r.Attempts, l.unreachable, err)
	default:
		r.Err = fmt.Errorf("rollout %d (group %d, row %v) failed after %d attempt(s): %w", l.idx, r.Group, r.Row, r.Attempts, err)
	}
	if p.e.log != nil {
		p.e.log.Warn("grpo: rollout left out", "rollout", l.idx, "group", r.Group, "attempts", r.Attempts, "unreachable", l.unreachable, "cause", err)
	}
	p.finish(l)
}

// failRollout ends l with err without a replay: what failed is the
// rollout itself (its prompt does not fit, its turn could not be
// generated), which another attempt would not change.
func (p *rolloutLoop) failRollout(l *live, err error) {
	l.r.Err = err
	if p.e.log != nil {
		p.e.log.Warn("grpo: rollout left out", "rollout", l.idx, "group", l.r.Group, "cause", err)
	}
	p.finish(l)
}

// Retry backoff: exponential from retryBackoffBase, doubling per try up
// to retryBackoffMax; the default RolloutRetryBudget (60 s) rides out an
// env server restart of 30 s (tries at about 0.25, 0.75, 1.75, 3.75, 7.75,
// 15.75, 23.75, 31.75 s after the failure).
const (
	retryBackoffBase = 250 * time.Millisecond
	retryBackoffMax  = 8 * time.Second
)

// retryBackoff is the wait before retry k (k ≥ 1) of a rollout's env:
// retryBackoffBase·2^(k−1), at most retryBackoffMax, jittered over its
// upper half by u ∈ [0, 1) so that rollouts that failed together (a dead
// server fails them all at once) do not all retry at once.
func retryBackoff(k int, u float64) time.Duration {
	d := retryBackoffMax
	if k < 8 {
		d = min(retryBackoffBase<<(k-1), retryBackoffMax)
	}
	return d/2 + time.Duration(u*float64(d/2))
}

// firstAttempts resets every env, then shares each group's prefill and
// queues the first turns. Resets are handled in rollout order, whatever
// order the envs answered in, so the batch does not depend on env timing.
func (p *rolloutLoop) firstAttempts() error {
	for _, l := range p.ls {
		p.startReset(l, 0)
	}
	resets := make([]event, 0, len(p.ls))
	for range len(p.ls) {
		ev, err := p.wait()
		if err != nil {
			discardStarted(resets)
			return err
		}
		resets = append(resets, ev)
	}
	slices.SortFunc(resets, func(a, b event) int { return a.idx - b.idx })
	var fresh []*live
	for i, ev := range resets {
		l := p.ls[ev.idx]
		if p.ctx.Err() != nil {
			discardStarted(resets[i:])
			return p.ctx.Err()
		}
		if ev.err != nil {
			p.envFailed(l, ev)
			continue
		}
		if err := p.begin(l, ev); err != nil {
			discardStarted(resets[i+1:])
			return err
		}
		if !l.done {
			fresh = append(fresh, l)
		}
	}
	t0 := time.Now()
	err := p.e.sharePrefill(p.ctx, fresh, p.seed)
	p.tm.generation += time.Since(t0)
	if err != nil {
		return err
	}
	for _, l := range fresh {
		if err := p.enqueue(l); err != nil {
			return err
		}
	}
	return nil
}

// discardStarted discards the envs of resets taken off the events channel
// but not given to their rollouts (the batch is ending).
func discardStarted(evs []event) {
	for _, ev := range evs {
		if ev.inst != nil {
			_ = ev.inst.Discard()
		}
	}
}

// begin starts l's episode from its reset (engine.begin). A prompt that
// does not fit fails only l.
func (p *rolloutLoop) begin(l *live, ev event) error {
	err := p.e.begin(l, ev, p.seed)
	var tooLong *promptTooLongError
	if errors.As(err, &tooLong) {
		p.failRollout(l, err)
		return nil
	}
	return err
}

// takeEvents handles what the env side has finished, blocking only when
// there is nothing to decode.
func (p *rolloutLoop) takeEvents() error {
	for p.pending > 0 {
		var ev event
		if p.dec.len() == 0 {
			var err error
			if ev, err = p.wait(); err != nil {
				return err
			}
		} else {
			select {
			case ev = <-p.events:
			default:
				return nil
			}
		}
		if err := p.handle(ev); err != nil {
			return err
		}
	}
	return nil
}

// handle applies one env event to its rollout.
func (p *rolloutLoop) handle(ev event) error {
	l := p.ls[ev.idx]
	switch {
	case ev.err != nil && p.ctx.Err() != nil:
		if ev.abandoned {
			l.inst = nil // its call's goroutine discards it
		}
		return p.ctx.Err()
	case ev.err != nil:
		p.envFailed(l, ev)
		return nil
	case ev.reset:
		if err := p.begin(l, ev); err != nil {
			return err
		}
		if l.done {
			return nil
		}
		return p.enqueue(l)
	default:
		return p.toolsDone(l, ev)
	}
}

// toolsDone appends a tool round's responses to l and queues its next
// turn, or ends it when the responses do not fit.
func (p *rolloutLoop) toolsDone(l *live, ev event) error {
	cont, err := p.e.afterTools(l, ev)
	switch {
	case err != nil:
		return err
	case cont:
		return p.enqueue(l)
	default:
		p.finish(l)
		return nil
	}
}

// decode runs one decoder step and dispatches the turns it finished, in
// request order.
func (p *rolloutLoop) decode() error {
	t0 := time.Now()
	fin, err := p.dec.step(p.ctx)
	p.tm.generation += time.Since(t0)
	if err != nil {
		return fmt.Errorf("grpo: generate: %w", err)
	}
	ids := make([]int, 0, len(fin))
	for id := range fin {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		l := p.byID[id]
		delete(p.byID, id)
		if err := p.turnDone(l, fin[id]); err != nil {
			return err
		}
	}
	return nil
}

// turnDone records l's generated turn and starts what follows it.
func (p *rolloutLoop) turnDone(l *live, tu turn) error {
	if tu.err != nil {
		// The model could not generate this rollout's turn (its context
		// length, a full KV pool): the rollout fails, the others go on.
		p.failRollout(l, fmt.Errorf("rollout %d (group %d): generate: %w", l.idx, l.r.Group, tu.err))
		return nil
	}
	round, cont := p.e.afterTurn(l, tu)
	switch {
	case !cont:
		p.finish(l)
		return nil
	case round != nil:
		p.startOp(l, round)
		return nil
	default: // a malformed call answered in place
		return p.toolsDone(l, p.e.malformed())
	}
}

// wait blocks for the next env event, counting the time as tool time.
func (p *rolloutLoop) wait() (event, error) {
	t0 := time.Now()
	defer func() { p.tm.tools += time.Since(t0) }()
	select {
	case ev := <-p.events:
		return ev, nil
	case <-p.ctx.Done():
		return event{}, p.ctx.Err()
	}
}

// opContext bounds one env operation (a reset, a tool call) by the tool
// deadline.
func (e *engine) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.cfg.toolTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.cfg.toolTimeout)
}

// begin builds l's prompt from its reset and starts its token sequence.
func (e *engine) begin(l *live, ev event, seed uint64) error {
	l.inst = ev.inst
	if l.inst != nil {
		// A Script (PlayScript) reads the env while the episode runs.
		l.r.Env, l.r.EnvName = l.inst.Env, l.inst.Name
	}
	msgs, err := promptMessages(l.r.Row, ev.obs)
	if err != nil {
		return fmt.Errorf("grpo: rollout %d: %w", l.idx, err)
	}
	l.opts = tokenizer.RenderOptions{AddGenerationPrompt: true, EnableThinking: e.cfg.thinking, KeepAllReasoning: true}
	if l.inst != nil && l.inst.Tools != nil && l.inst.Tools.Len() > 0 {
		l.opts.Tools = l.inst.Tools.Schemas()
	}
	ids, err := e.chat.RenderIDs(msgs, l.opts)
	if err != nil {
		return fmt.Errorf("grpo: render the prompt of rollout %d: %w", l.idx, err)
	}
	if e.cfg.maxPrompt > 0 && len(ids) > e.cfg.maxPrompt {
		return &promptTooLongError{fmt.Errorf("grpo: rollout %d: the prompt of row %v (with its reset observation) renders to %d tokens, over MaxPromptLength %d: filter the dataset or raise the cap", l.idx, l.r.Row, len(ids), e.cfg.maxPrompt)}
	}
	if e.pol != nil { // nil when a Script plays (PlayScript)
		if mp := e.pol.m.Config.MaxPositions; mp > 0 && len(ids) >= mp {
			return &promptTooLongError{fmt.Errorf("grpo: rollout %d: the prompt of row %v (with its reset observation) renders to %d tokens, leaving no room in the model's context of %d (max_position_embeddings): %w", l.idx, l.r.Row, len(ids), mp, model.ErrContextLength)}
		}
		if err := e.pol.m.CheckTokens(ids); err != nil {
			return fmt.Errorf("grpo: prompt of rollout %d: %w", l.idx, err)
		}
	}
	l.r.Prompt, l.r.PromptIDs = msgs, ids
	l.sq, l.hasSeq = newSeq(mix(seed, uint64(l.idx), uint64(l.r.Attempts)), ids), true
	return nil
}

// promptTooLongError is a prompt that does not fit (MaxPromptLength, the
// model's context): it fails its rollout, not the batch.
type promptTooLongError struct{ err error }

func (e *promptTooLongError) Error() string { return e.err.Error() }
func (e *promptTooLongError) Unwrap() error { return e.err }

// sharePrefill makes rollouts with the same prompt share one prefill: the
// prompt is fed once and the others fork its cache.
func (e *engine) sharePrefill(ctx context.Context, ls []*live, seed uint64) error {
	byPrompt := map[string][]*live{}
	var keys []string
	for _, l := range ls {
		k := idsKey(l.r.PromptIDs)
		if _, ok := byPrompt[k]; !ok {
			keys = append(keys, k)
		}
		byPrompt[k] = append(byPrompt[k], l)
	}
	var roots []seq
	for _, k := range keys {
		if g := byPrompt[k]; len(g) > 1 {
			roots = append(roots, g[0].sq)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	if err := e.pol.prefill(ctx, roots); err != nil {
		return fmt.Errorf("grpo: prefill prompts: %w", err)
	}
	for _, k := range keys {
		g := byPrompt[k]
		for _, l := range g[1:] {
			l.sq.release()
			l.sq = g[0].sq.fork(mix(seed, uint64(l.idx), uint64(l.r.Attempts)))
		}
	}
	return nil
}

// afterTurn records a generated turn and decides what follows: the end of
// the rollout (cont false), a tool round to run off the decoding goroutine
// (round), or a malformed call to answer in place (cont true, round nil).
func (e *engine) afterTurn(l *live, tu turn) (round func(context.Context) event, cont bool) {
	r := l.r
	r.CompletionIDs = append(r.CompletionIDs, tu.ids...)
	r.LogProbs = append(r.LogProbs, tu.logprobs...)
	for range tu.ids {
		r.Mask = append(r.Mask, true)
	}
	msg, ok := e.chat.ParseAssistant(tu.ids)
	msg.Role = "assistant"
	r.Completion = append(r.Completion, msg)
	if !tu.stopped {
		r.Truncated = true
		return nil, false
	}
	if ok && len(msg.ToolCalls) == 0 {
		return nil, false
	}
	if e.cfg.maxIters >= 0 && l.iters >= e.cfg.maxIters {
		return nil, false // the cap leaves this turn's calls unexecuted
	}
	if !ok {
		if e.envs == nil || !hasToolCallTag(e.chat, tu.ids) {
			return nil, false
		}
		return nil, true
	}
	if l.inst == nil || l.inst.Tools == nil {
		return nil, false
	}
	calls := msg.ToolCalls
	inst := l.inst
	return func(ctx context.Context) event {
		ev := event{idx: l.idx}
		for _, c := range calls {
			octx, cancel := e.opContext(ctx)
			resp, err := guarded(octx, fmt.Sprintf("tool %s of rollout %d", c.Name, l.idx), func(c2 context.Context) (string, error) {
				return inst.Tools.Call(c2, c.Name, c.Arguments)
			}, func(string, error) { _ = inst.Discard() })
			expired := octx.Err() != nil
			cancel()
			if errors.Is(err, ErrAbandoned) {
				e.abandoned(l, err)
				return event{idx: l.idx, err: err, abandoned: true}
			}
			if err != nil {
				if ctx.Err() != nil {
					return event{idx: l.idx, err: ctx.Err()}
				}
				if envFailure(err) || expired {
					return event{idx: l.idx, err: fmt.Errorf("tool %s: %w", c.Name, err)}
				}
				ev.failures++
			}
			ev.msgs = append(ev.msgs, tokenizer.Message{Role: "tool", Name: c.Name, Content: resp})
		}
		return ev
	}, true
}

// malformed is the tool round of a turn whose call did not parse.
func (e *engine) malformed() event {
	return event{failures: 1, msgs: []tokenizer.Message{{Role: "tool", Content: `{"error": "malformed tool call: expected <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>"}`}}}
}

// afterTools appends a tool round's responses and reports whether the
// rollout generates again (false when the responses do not fit the
// budget: they are dropped, as TRL does, though the tools ran).
func (e *engine) afterTools(l *live, ev event) (bool, error) {
	r := l.r
	r.ToolCalls += len(ev.msgs)
	r.ToolFailures += ev.failures
	l.iters++
	suffix, err := e.chat.ToolSuffixIDs(ev.msgs, l.opts)
	if err != nil {
		return false, fmt.Errorf("grpo: render the tool responses of rollout %d: %w", l.idx, err)
	}
	if len(r.CompletionIDs)+len(suffix) >= e.cfg.maxCompletion {
		return false, nil
	}
	r.Completion = append(r.Completion, ev.msgs...)
	r.CompletionIDs = append(r.CompletionIDs, suffix...)
	r.Mask = append(r.Mask, make([]bool, len(suffix))...)
	r.LogProbs = append(r.LogProbs, make([]float32, len(suffix))...)
	l.sq.appendTokens(suffix)
	return true, nil
}

// envFailure reports whether a tool error means the episode is lost.
func envFailure(err error) bool {
	return errors.Is(err, ErrEnvFailed) || errors.Is(err, openenv.ErrSessionLost)
}

// hasToolCallTag reports whether ids contain <tool_call>: a turn that
// does but does not parse is a malformed call, not plain text.
func hasToolCallTag(chat *tokenizer.Chat, ids []int32) bool {
	id, ok := chat.Tokenizer().TokenID("<tool_call>")
	return ok && slices.Contains(ids, id)
}

func idsKey(ids []int32) string {
	b := make([]byte, 4*len(ids))
	for i, v := range ids {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return string(b)
}

// mix derives a seed from several values (splitmix64 finalizer).
func mix(vals ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vals {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}
