package grpo

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// waitFor yields until cond, read under l's mutex, holds: the test's
// goroutines have reached the state it names (no sleeps, so the order
// asserted does not depend on the machine's load).
func waitFor(l *modelLock, cond func() bool) {
	for {
		l.mu.Lock()
		ok := cond()
		l.mu.Unlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}

// TestModelLockGenerationFirst: a learner call waits while a generation
// call holds or waits for the lock, and while a generation call is
// announced; generation calls then go in before it.
func TestModelLockGenerationFirst(t *testing.T) {
	l := newModelLock()
	var mu sync.Mutex
	var order []string
	record := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := func(name string, gen bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.lock(gen)
			record(name)
			l.unlock(gen)
		}()
	}
	// The learner holds the lock; a second learner call and then a
	// generation call queue: the generation call goes first.
	l.lock(false)
	start("learner", false)
	waitFor(l, func() bool { return l.waiting == 1 })
	start("generation", true)
	waitFor(l, func() bool { return l.genReq == 1 })
	l.unlock(false)
	wg.Wait()
	assert.Equal(t, []string{"generation", "learner"}, order)

	// Announced: the learner waits for the generation call that comes late.
	order = nil
	l.announce()
	start("learner", false)
	waitFor(l, func() bool { return l.waiting == 1 })
	start("generation", true)
	wg.Wait()
	assert.Equal(t, []string{"generation", "learner"}, order)

	// An announced call that never comes is cleared.
	order = nil
	l.announce()
	start("learner", false)
	waitFor(l, func() bool { return l.waiting == 1 })
	mu.Lock()
	assert.Empty(t, order, "the learner waits for the announced call")
	mu.Unlock()
	l.clearAnnounced()
	wg.Wait()
	assert.Equal(t, []string{"learner"}, order)
}
