package grpo

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

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
	start := func(name string, gen bool, delay time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			l.lock(gen)
			record(name)
			time.Sleep(20 * time.Millisecond)
			l.unlock()
		}()
	}
	// The learner holds the lock; a second learner call and then a
	// generation call queue: the generation call goes first.
	l.lock(false)
	start("learner", false, 0)
	start("generation", true, 30*time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	l.unlock()
	wg.Wait()
	assert.Equal(t, []string{"generation", "learner"}, order)

	// Announced: the learner waits for the generation call that comes late.
	order = nil
	l.announce()
	start("learner", false, 0)
	start("generation", true, 50*time.Millisecond)
	wg.Wait()
	assert.Equal(t, []string{"generation", "learner"}, order)

	// An announced call that never comes is cleared.
	order = nil
	l.announce()
	start("learner", false, 0)
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	assert.Empty(t, order, "the learner waits for the announced call")
	mu.Unlock()
	l.clearAnnounced()
	wg.Wait()
	assert.Equal(t, []string{"learner"}, order)
}
