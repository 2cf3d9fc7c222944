package grpo

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// ErrAbandoned is wrapped by the error of a call into an environment (a
// reset, a tool) or a reward function that had not returned when its
// deadline passed or the run was cancelled: it ignored its context. The
// trainer stops waiting for it and carries on; the call's goroutine is
// left to finish on its own, and the environment it was using is
// discarded when it does (never pooled again). The rollout is played
// again, or left out.
var ErrAbandoned = errors.New("grpo: call abandoned: it did not return by its deadline")

// guarded runs f(ctx) on a goroutine of its own and returns its results;
// a panic of f comes back as an error naming what ("env X reset of row
// …", "reward \"win\" on rollout 3"). When ctx ends before f returns,
// guarded returns at once an error wrapping ErrAbandoned and ctx's error.
// f's goroutine then finishes on its own and hands f's results to late
// (nil: dropped), which disposes of what the call made or holds.
//
// Nothing waits for an abandoned goroutine: that is the point (waiting for
// a call that ignores its context is what hung training), and the one
// exception to "every goroutine has an owner that waits for it". late is
// its owner's last word: it runs on that goroutine, so it must only do
// what is safe from any goroutine (env.Instance.Discard is).
func guarded[T any](ctx context.Context, what string, f func(context.Context) (T, error), late func(T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	var claimed atomic.Bool // whichever side sets it first owns the result
	go func() {
		v, err := recovered(ctx, what, f)
		if claimed.CompareAndSwap(false, true) {
			done <- result{v, err}
			return
		}
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		if claimed.CompareAndSwap(false, true) {
			var zero T
			return zero, fmt.Errorf("%s: %w (%w)", what, ErrAbandoned, context.Cause(ctx))
		}
		r := <-done // it returned just as ctx ended: its result stands
		return r.v, r.err
	}
}

// recovered calls f, returning its panic as a *panicError naming what.
func recovered[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{what: what, value: p, stack: debug.Stack()}
		}
	}()
	return f(ctx)
}

// panicError is a panic of user code (a reward function) that guarded
// recovered.
type panicError struct {
	what  string
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.what, e.value) }
