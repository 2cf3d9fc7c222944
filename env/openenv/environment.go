package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Result is one reset or step reply: the observation object as the env
// writes it (without reward, done and metadata, which OpenEnv lifts out or
// drops), plus reward and done.
type Result struct {
	Observation json.RawMessage // a JSON object; the env's field order is kept
	Reward      *float64        // nil is JSON null (e.g. OpenSpiel at reset)
	Done        bool
}

// Environment is the server side of one OpenEnv session, in OpenEnv's
// classic shape: reset, step with a typed action, state. The server calls
// it from one goroutine at a time.
type Environment interface {
	// Reset starts an episode. opts is the reset frame's data object ({}
	// when absent): seed, episode_id and env-specific keys.
	Reset(ctx context.Context, opts json.RawMessage) (Result, error)
	// Step applies one action, the step frame's data object. An action that
	// fails validation returns a *ValidationError; any other error is an
	// EXECUTION_ERROR. The session survives both.
	Step(ctx context.Context, action json.RawMessage) (Result, error)
	// State returns the state object: {"episode_id":…,"step_count":…}
	// plus env-specific fields.
	State(ctx context.Context) (json.RawMessage, error)
}

// EnvironmentFactory makes one Environment per session. It must be safe for
// concurrent use. An Environment that also implements io.Closer is closed
// when its session ends.
type EnvironmentFactory interface {
	NewEnvironment(ctx context.Context) (Environment, error)
}

// EnvironmentFactoryFunc adapts a function to EnvironmentFactory.
type EnvironmentFactoryFunc func(ctx context.Context) (Environment, error)

// NewEnvironment calls f.
func (f EnvironmentFactoryFunc) NewEnvironment(ctx context.Context) (Environment, error) {
	return f(ctx)
}

// Metadata is what GET /metadata reports for an environment.
type Metadata struct {
	Name             string  `json:"name"`
	Description      string  `json:"description"`
	ReadmeContent    *string `json:"readme_content"`
	Version          string  `json:"version"`
	Author           *string `json:"author"`
	DocumentationURL *string `json:"documentation_url"`
}

// Describer is an optional EnvironmentFactory capability: metadata and the
// JSON schemas of its action and observation, served by /metadata and
// /schema.
type Describer interface {
	Metadata() Metadata
	ActionSchema() json.RawMessage
	ObservationSchema() json.RawMessage
}

// FieldError is one entry of a VALIDATION_ERROR frame's errors list, in
// pydantic's format.
type FieldError struct {
	Type  string         `json:"type"`
	Loc   []any          `json:"loc"`
	Msg   string         `json:"msg"`
	Input any            `json:"input"`
	Ctx   map[string]any `json:"ctx,omitempty"`
	URL   string         `json:"url,omitempty"`
}

// ValidationError is returned by Environment.Step for an action that does
// not fit the env's action model; the server answers VALIDATION_ERROR.
type ValidationError struct {
	Errors []FieldError
}

// Error lists the failing fields.
func (e *ValidationError) Error() string {
	parts := make([]string, 0, len(e.Errors))
	for _, fe := range e.Errors {
		parts = append(parts, fmt.Sprintf("%v: %s", fe.Loc, fe.Msg))
	}
	return "invalid action: " + strings.Join(parts, "; ")
}
