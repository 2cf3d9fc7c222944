package env

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrUnavailable is wrapped by the error of an environment that could not
// be reached: its server is down or restarting, refused the connection or
// is at capacity. Trying again later may succeed, unlike an episode that
// failed while it was played. The trainer retries a rollout whose env was
// unavailable with backoff, within its retry budget, without counting the
// try as one of its attempts.
var ErrUnavailable = errors.New("env: unavailable")

// PanicError is a panic of an environment's own code (its factory's New,
// Reset, Reward, a DynamicTools env's ToolSet) that the pool recovered and
// returned as an error, so that one broken environment fails its episode,
// not the process. Tools' panics are recovered by tools.Set.Call.
type PanicError struct {
	Env   string // the environment: its Router name, or its Go type
	Op    string // "new", "reset", "reward", "tools"
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack, for logs
}

// Error names the environment, the operation and the panic value.
func (e *PanicError) Error() string {
	return fmt.Sprintf("env %s: %s panicked: %v", e.Env, e.Op, e.Value)
}

// recoverInto turns a panic of the deferring function into *err, a
// *PanicError naming env and op. Use as defer recoverInto(&err, label, op).
func recoverInto(err *error, env, op string) {
	if p := recover(); p != nil {
		*err = &PanicError{Env: env, Op: op, Value: p, Stack: debug.Stack()}
	}
}
