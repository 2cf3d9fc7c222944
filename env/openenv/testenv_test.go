package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// echoEnv mirrors upstream's classic echo_env: reset says it is ready,
// step echoes {"message": str (min length 1)} with reward len*0.1, state
// counts steps. Validation errors match pydantic's frames byte for byte.
type echoEnv struct {
	episode  int
	steps    int
	delay    time.Duration // each step sleeps this long (ctx-aware)
	obsBytes int           // pad the replies to "flood" to this size (slow-reader test)
	closed   *atomic.Int64 // counts Close calls when set
}

type echoAction struct {
	Message string `json:"message"`
}

func (e *echoEnv) Reset(ctx context.Context, opts json.RawMessage) (Result, error) {
	var o struct {
		Fail bool `json:"fail"`
	}
	_ = json.Unmarshal(opts, &o)
	if o.Fail {
		return Result{}, errors.New("reset asked to fail")
	}
	e.episode++
	e.steps = 0
	zero := 0.0
	return Result{Observation: json.RawMessage(`{"echoed_message":"Echo environment ready!","message_length":0}`), Reward: &zero}, nil
}

func (e *echoEnv) Step(ctx context.Context, action json.RawMessage) (Result, error) {
	ms, err := parseObject(action)
	if err != nil {
		return Result{}, fmt.Errorf("decode action: %w", err)
	}
	var fes []FieldError
	msg, has := "", false
	for _, m := range ms {
		switch m.Key {
		case "message":
			has = true
			if err := json.Unmarshal(m.Value, &msg); err != nil {
				fes = append(fes, fieldError("string_type", "Input should be a valid string", rawInput(m.Value), "message"))
			} else if msg == "" {
				fe := fieldError("string_too_short", "String should have at least 1 character", "", "message")
				fe.Ctx = map[string]any{"min_length": 1}
				fes = append(fes, fe)
			}
		case "metadata":
		default:
			fes = append(fes, fieldError("extra_forbidden", "Extra inputs are not permitted", rawInput(m.Value), m.Key))
		}
	}
	if !has {
		fes = append([]FieldError{fieldError("missing", "Field required", rawInput(action), "message")}, fes...)
	}
	if fes != nil {
		return Result{}, &ValidationError{Errors: fes}
	}
	switch msg {
	case "boom":
		return Result{}, errors.New("the env exploded")
	case "panic":
		panic("env panic")
	}
	if e.delay > 0 {
		t := time.NewTimer(e.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	e.steps++
	n := utf8.RuneCountInString(msg)
	reward := float64(n) * 0.1
	obs := struct {
		Echoed string `json:"echoed_message"`
		Length int    `json:"message_length"`
		Pad    string `json:"pad,omitempty"`
	}{msg, n, ""}
	if e.obsBytes > 0 && msg == "flood" {
		b := make([]byte, e.obsBytes)
		for i := range b {
			b[i] = 'x'
		}
		obs.Pad = string(b)
	}
	b, err := marshalCompact(obs)
	if err != nil {
		return Result{}, err
	}
	return Result{Observation: b, Reward: &reward}, nil
}

func (e *echoEnv) State(ctx context.Context) (json.RawMessage, error) {
	return json.RawMessage(fmt.Sprintf(`{"episode_id":"ep-%d","step_count":%d}`, e.episode, e.steps)), nil
}

func (e *echoEnv) Close() error {
	if e.closed != nil {
		e.closed.Add(1)
	}
	return nil
}

// echoFactory makes echoEnvs and counts them.
type echoFactory struct {
	mu       sync.Mutex
	made     int
	closed   atomic.Int64
	delay    time.Duration
	obsBytes int
	fail     bool
}

func (f *echoFactory) NewEnvironment(ctx context.Context) (Environment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("no more envs")
	}
	f.made++
	return &echoEnv{delay: f.delay, obsBytes: f.obsBytes, closed: &f.closed}, nil
}

func (f *echoFactory) Metadata() Metadata {
	return Metadata{Name: "EchoEnvironment", Description: "EchoEnvironment environment", Version: "1.0.0"}
}

func (f *echoFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","minLength":1}},"required":["message"]}`)
}

func (f *echoFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object"}`)
}
