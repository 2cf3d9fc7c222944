package envtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/x/env"
)

// Slow is an environment whose one tool, Work, takes Delay before it
// answers — a stand-in for a slow tool (a build, a web search, a remote
// sandbox) — and whose reward is the number of Work calls of its episode.
// A Gauge, if set (shared by every Slow of a factory), counts the calls in
// flight, so a test can see what else ran while tools were working. Like
// any env.Env it is used by one rollout at a time.
type Slow struct {
	Delay time.Duration
	Gauge *Gauge
	calls int
}

// WorkArgs are the arguments of the Work tool.
type WorkArgs struct {
	Job string `json:"job" desc:"what to work on"`
}

// ToolDescriptions describes the Work tool.
func (s *Slow) ToolDescriptions() map[string]string {
	return map[string]string{"Work": "Works on a job for a while and says how many jobs are done."}
}

// Reset starts an episode.
func (s *Slow) Reset(ctx context.Context, row env.Row) (string, error) {
	s.calls = 0
	return "Work on it.", nil
}

// Work waits Delay (or until ctx ends, an error) and counts the call.
func (s *Slow) Work(ctx context.Context, a WorkArgs) (string, error) {
	if s.Gauge != nil {
		s.Gauge.enter()
		defer s.Gauge.leave()
	}
	t := time.NewTimer(s.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	s.calls++
	return fmt.Sprintf("%d jobs done", s.calls), nil
}

// Reward is the number of Work calls of the episode.
func (s *Slow) Reward(ctx context.Context) (float64, error) { return float64(s.calls), nil }

// SlowFactory makes Slow environments of the given delay sharing gauge
// (nil: none).
func SlowFactory(delay time.Duration, gauge *Gauge) env.Factory {
	return env.FactoryFunc(func(context.Context) (env.Env, error) { return &Slow{Delay: delay, Gauge: gauge}, nil })
}

// Gauge counts tool calls in flight. It is safe for concurrent use.
type Gauge struct {
	mu        sync.Mutex
	now, peak int
	calls     int
	busy      time.Duration // time with at least one call in flight
	busySince time.Time
}

func (g *Gauge) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now == 0 {
		g.busySince = time.Now()
	}
	g.now++
	g.calls++
	g.peak = max(g.peak, g.now)
}

func (g *Gauge) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now--
	if g.now == 0 {
		g.busy += time.Since(g.busySince)
	}
}

// InFlight is the number of calls running now.
func (g *Gauge) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now
}

// Peak is the most calls that ran at once.
func (g *Gauge) Peak() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// Calls is the number of calls started.
func (g *Gauge) Calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// Busy is the time during which at least one call was in flight.
func (g *Gauge) Busy() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.busy
	if g.now > 0 {
		b += time.Since(g.busySince)
	}
	return b
}
