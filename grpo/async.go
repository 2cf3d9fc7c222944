package grpo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/x/env"
	"github.com/x/model"
)

// Asynchronous GRPO (Config.MaxStaleness = s > 0): Train runs a producer
// goroutine that plays and scores generations ahead of the learner, which
// trains on them in order. Generation k is learnt from starting at
// optimizer step g_k = g_0 + (k − k_0)·S (S = Layout.OptimizerSteps, g_0
// and k_0 the step and generation Train started at) and is sampled with
// the policy of step v_k = max(0, g_k − s): exactly, not "the newest
// available", so that a run is reproducible and its staleness never
// exceeds s. When v_k = g_k (s = 0, or early in a run) the producer waits
// for the learner to finish generation k−1 and samples with the live
// adapters, which cannot move until generation k is learnt; otherwise the
// learner, on reaching step v_k, captures the adapters into a snapshot
// (model.AdapterSnapshot: the adapters only, the base weights are shared)
// and the producer samples with it (model.UseAdapters, a pointer swap
// held only while the producer has the model). A snapshot lives until the
// last generation it sampled is learnt, so a checkpoint can save it.
//
// Old log-probs: with s > 0 the producer scores each generation with the
// snapshot that sampled it (a teacher-forced pass in rollout order), so
// the ratio is between the policy that sampled and the one that trains,
// and the numbers do not depend on which rollouts shared a decode step
// (the decoder's log-probs do, at the rounding level, and that depends on
// when tool calls finished). With s = 0 every generation is learnt on
// policy at the step it was sampled, exactly as Step learns, and the run
// equals the synchronous one bit for bit.
//
// Ownership and locking: the model and its backend serve one goroutine at
// a time; policy's lock serialises the producer's generation and scoring
// calls with the learner's passes and optimizer steps. On the CPU the
// overlap is therefore between the producer's tool calls, environment
// resets and reward functions and the learner's training (and, the other
// way round, the learner's waiting and the producer's decoding). Reward
// functions and environments run on the producer's goroutines while the
// learner trains: they must not use the model.
//
// Resume: a checkpoint holds, besides the weights, the snapshots of
// versions below its step that generations not yet learnt were or will be
// sampled with (policy_version_<v>.safetensors). Generations in flight
// when it was written are not saved: the resumed run plays them again
// with the same adapters and seeds, and with deterministic environments
// gets the same tokens, rewards and old log-probs, so it ends bit for bit
// where the uninterrupted run does.

// asyncRun is the state the producer and the learner share.
type asyncRun struct {
	t      *Trainer
	s, spg int // the staleness bound; optimizer steps per generation
	g0, k0 int // GlobalStep and Generation when Train started
	total  int // the run's optimizer steps

	mu   sync.Mutex
	cond *sync.Cond
	// old are the versions below g0 whose snapshots a resumed checkpoint
	// brought (set before the producer starts, read-only after).
	old   map[int]bool
	step  int                            // the learner's GlobalStep, as published
	snaps map[int]*model.AdapterSnapshot // adapter versions generations sample with
	refs  map[int]int                    // generations not yet learnt per snapshot
	ready []*scoredGen                   // played and scored, in generation order
	perr  error                          // the producer's error
	pdone bool                           // the producer has played every generation
	stop  bool                           // the learner is done: the producer must stop
	capK  int                            // first generation whose version may still need a snapshot
	// waiting is the version the producer waits for, -1 when it waits
	// for none.
	waiting int
}

// genStart is the optimizer step at which generation k is first learnt.
func (a *asyncRun) genStart(k int) int { return a.g0 + (k-a.k0)*a.spg }

// version is the optimizer step of the policy that samples generation k.
func (a *asyncRun) version(k int) int {
	v := max(0, a.genStart(k)-a.s)
	if v < a.g0 && !a.old[v] {
		// Before this run and not saved. The run that wrote the checkpoint
		// had no policy that old either (it started later: from a
		// synchronous checkpoint, or after Steps) and sampled with the
		// oldest it had, its start, which the checkpoint saved as the
		// oldest snapshot above v; with none saved, this run's start is the
		// oldest policy at hand.
		u := a.g0
		for o := range a.old {
			if o > v && o < u {
				u = o
			}
		}
		v = u
	}
	return v
}

// snapshotted reports whether generation k samples with a snapshot (its
// version is behind its start) rather than the live adapters.
func (a *asyncRun) snapshotted(k int) bool { return a.version(k) < a.genStart(k) }

// trainAsync is Train's loop with a producer (see the comment above);
// next gives a generation's rows, the data position after them and the
// fractional epoch; after is called with each learnt generation's report,
// its data position and the step before it.
func (t *Trainer) trainAsync(ctx context.Context, next func() ([]env.Row, Position, float64), total int, after func(*StepReport, Position, int) error) (err error) {
	if t.pol.lora == nil && t.cfg.MaxStaleness > 0 {
		return &ConfigError{Field: "MaxStaleness", TRLName: "max_staleness", Problem: "asynchronous training needs LoRA adapters (WithLoRA): the policy that samples is a snapshot of them, and full fine-tuning would copy the whole model"}
	}
	a := &asyncRun{t: t, s: t.cfg.MaxStaleness, spg: t.layout.OptimizerSteps(), g0: t.state.GlobalStep, k0: t.state.Generation,
		total: total, step: t.state.GlobalStep, snaps: map[int]*model.AdapterSnapshot{}, refs: map[int]int{}, waiting: -1}
	a.cond = sync.NewCond(&a.mu)
	a.capK, a.old = a.k0, map[int]bool{}
	// Snapshots a resumed checkpoint held: keep those a generation needs.
	for v, s := range t.resumed {
		a.snaps[v], a.old[v] = s, v < a.g0
	}
	t.resumed = nil
	for k := a.k0; a.genStart(k) < total; k++ {
		v := a.version(k)
		if v >= a.g0 {
			break
		}
		a.refs[v]++
	}
	for v, s := range a.snaps {
		if a.refs[v] == 0 {
			t.pol.releaseSnapshot(s)
			delete(a.snaps, v)
			delete(a.old, v)
		}
	}
	t.async = a
	defer func() { t.async = nil }()
	if err := a.publish(); err != nil {
		a.release()
		return err
	}
	t.stepped = a.publish
	defer func() { t.stepped = nil }()

	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.produce(pctx, next)
	}()
	stopWake := context.AfterFunc(ctx, a.wake)
	defer func() {
		stopWake()
		a.mu.Lock()
		a.stop = true
		a.cond.Broadcast()
		a.mu.Unlock()
		cancel()
		wg.Wait()
		a.release()
	}()

	begin := time.Now()
	for t.state.GlobalStep < total {
		if err := ctx.Err(); err != nil {
			return err
		}
		sg, err := a.take(ctx)
		if err != nil {
			return err
		}
		before := t.state.GlobalStep
		if t.run != nil {
			t.run.epoch = sg.epochs
		}
		rep, err := t.consume(ctx, sg, begin)
		a.learnt(sg)
		if err != nil {
			return err
		}
		if err := after(rep, sg.pos, before); err != nil {
			return err
		}
		begin = time.Now()
	}
	return nil
}

// wake wakes every waiter (the context was cancelled).
func (a *asyncRun) wake() {
	a.mu.Lock()
	a.cond.Broadcast()
	a.mu.Unlock()
}

// publish runs on the learner at the run's start and after every
// optimizer step: it records the learner's step and captures the adapters
// when a generation will sample with this version while the learner has
// moved on.
func (a *asyncRun) publish() error {
	g := a.t.state.GlobalStep
	var snap *model.AdapterSnapshot
	n := 0
	for k := a.capK; a.genStart(k) < a.total && a.version(k) <= g; k++ {
		if a.version(k) == g && a.snapshotted(k) {
			n++
		}
		a.capK = k + 1
	}
	if n > 0 {
		var err error
		if snap, err = a.t.pol.newSnapshot(); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.step = g
	if snap != nil {
		a.snaps[g] = snap
		a.refs[g] += n
		if a.waiting == g {
			// The producer starts on it now: let its first model calls
			// (prefill, first decode steps) go before the learner's next
			// pass, so that its tool calls overlap that pass.
			a.t.pol.lk.announce()
		}
	}
	a.cond.Broadcast()
	return nil
}

// produce is the producer: generation after generation, wait for its
// policy version, play and score it, queue it.
func (a *asyncRun) produce(ctx context.Context, next func() ([]env.Row, Position, float64)) {
	fail := func(err error) {
		a.mu.Lock()
		a.perr = err
		a.cond.Broadcast()
		a.mu.Unlock()
	}
	defer a.t.pol.lk.clearAnnounced()
	for k := a.k0; a.genStart(k) < a.total; k++ {
		rows, pos, epochs := next()
		v, start := a.version(k), a.genStart(k)
		var snap *model.AdapterSnapshot
		a.mu.Lock()
		a.waiting = v
		for {
			if a.stop || ctx.Err() != nil {
				a.waiting = -1
				a.mu.Unlock()
				return
			}
			if v == start && a.step >= start {
				break // the learner waits for k: the live adapters are v's
			}
			if s, ok := a.snaps[v]; ok && v < start {
				snap = s
				break
			}
			a.cond.Wait()
		}
		a.waiting = -1
		a.mu.Unlock()
		sg, err := a.t.produce(ctx, rows, k, v, snap, a.s > 0)
		if err != nil {
			if ctx.Err() == nil {
				fail(err)
			}
			return
		}
		sg.pos, sg.epochs = pos, epochs
		a.mu.Lock()
		if nk := k + 1; a.genStart(nk) < a.total {
			if nv := a.version(nk); nv < a.genStart(nk) && a.snaps[nv] != nil {
				// The next generation can start at once: its first model
				// calls go before the pass the learner starts on this one.
				a.t.pol.lk.announce()
			}
		}
		a.ready = append(a.ready, sg)
		a.cond.Broadcast()
		a.mu.Unlock()
	}
	a.mu.Lock()
	a.pdone = true
	a.cond.Broadcast()
	a.mu.Unlock()
}

// take is the learner's wait for the next generation.
func (a *asyncRun) take(ctx context.Context) (*scoredGen, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.ready) == 0 {
		switch {
		case a.perr != nil:
			return nil, a.perr
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case a.pdone:
			return nil, errors.New("grpo: asynchronous training: the producer ended before the run's last step")
		}
		a.cond.Wait()
	}
	sg := a.ready[0]
	a.ready = a.ready[1:]
	return sg, nil
}

// learnt drops the learnt generation's hold on its snapshot.
func (a *asyncRun) learnt(sg *scoredGen) {
	a.mu.Lock()
	s, ok := a.snaps[sg.version]
	drop := false
	if ok && sg.version < a.genStart(sg.index) {
		a.refs[sg.version]--
		if a.refs[sg.version] <= 0 {
			delete(a.snaps, sg.version)
			delete(a.refs, sg.version)
			drop = true
		}
	}
	a.mu.Unlock()
	if drop {
		a.t.pol.releaseSnapshot(s)
	}
}

// saved are the snapshots a checkpoint at the learner's current step must
// hold: those of versions below it that generations not yet learnt need.
func (a *asyncRun) saved() map[int]*model.AdapterSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int]*model.AdapterSnapshot{}
	for v, s := range a.snaps {
		if v < a.t.state.GlobalStep && a.refs[v] > 0 {
			out[v] = s
		}
	}
	return out
}

// release gives every snapshot back (the run is over).
func (a *asyncRun) release() {
	a.mu.Lock()
	snaps := a.snaps
	a.snaps, a.refs = map[int]*model.AdapterSnapshot{}, map[int]int{}
	a.mu.Unlock()
	for _, s := range snaps {
		a.t.pol.releaseSnapshot(s)
	}
}

// errAsyncRolloutFunc is NewTrainer's refusal of a RolloutFunc with
// MaxStaleness.
var errAsyncRolloutFunc = fmt.Errorf("grpo: config MaxStaleness (max_staleness): asynchronous training samples with the trainer's own engine, which holds the adapter snapshot each generation is sampled with; a RolloutFunc's generator is not under its control: set MaxStaleness to 0")
