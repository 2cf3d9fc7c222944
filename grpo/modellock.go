package grpo

import "sync"

// modelLock is the policy's lock on the model and its backend, which serve
// one goroutine at a time. It serves generation first: a learner call
// (a loss pass, a scoring pass for the loss, an optimizer step) waits
// while a generation call (a decode step, a prefill, the producer's
// scoring pass) holds the lock or waits for it, and while the producer
// has been handed the policy version it waits for (expect) and has not
// yet taken the lock. A generation call is short and is followed by tool
// calls that need no model, so the learner's long passes then run while
// tools work; the other way round, a learner pass that holds the lock
// delays the producer's next decode step until it ends. The announcement
// has a cost: the learner's next pass waits for the producer's first
// model call of the next generation, which comes after that generation's
// environment resets, so slow resets (a remote sandbox) delay learning by
// their duration instead of overlapping it. In synchronous training one
// goroutine makes every call and the lock is never contended.
type modelLock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	held    bool
	genReq  int // generation calls waiting for the lock
	expect  int // generation calls announced (expect) and not yet arrived
	waiting int // learner calls waiting for the lock
	// learnerHeld, if set (tests), is called as a learner call takes the
	// lock and again as it gives it back, on the learner's goroutine.
	learnerHeld func()
}

func newModelLock() *modelLock {
	l := &modelLock{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// lock takes the lock for a generation call (gen) or a learner call.
func (l *modelLock) lock(gen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen {
		l.genReq++
		for l.held {
			l.cond.Wait()
		}
		l.genReq--
		l.expect = max(l.expect-1, 0)
	} else {
		l.waiting++
		for l.held || l.genReq > 0 || l.expect > 0 {
			l.cond.Wait()
		}
		l.waiting--
		if l.learnerHeld != nil {
			l.learnerHeld()
		}
	}
	l.held = true
}

// unlock releases the lock (taken for a generation call if gen).
func (l *modelLock) unlock(gen bool) {
	l.mu.Lock()
	if !gen && l.learnerHeld != nil {
		l.learnerHeld()
	}
	l.held = false
	l.cond.Broadcast()
	l.mu.Unlock()
}

// announce says a generation call is on its way: learner calls wait for
// it (the producer was just handed what it waited for).
func (l *modelLock) announce() {
	l.mu.Lock()
	l.expect++
	l.mu.Unlock()
}

// clearAnnounced drops announced calls that will not come (the producer
// stopped).
func (l *modelLock) clearAnnounced() {
	l.mu.Lock()
	l.expect = 0
	l.cond.Broadcast()
	l.mu.Unlock()
}
