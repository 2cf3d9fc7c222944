package echo

import (
	"context"
	"errors"

	"github.com/x/env"
)

// Env is the in-process, tool-style echo environment: one tool, echo,
// rewarded like the server (0.1 per character of the last message). Use it
// with env.FactoryFunc(echo.NewEnv).
type Env struct {
	// Echoed holds the messages echoed this episode, for reward functions
	// to read.
	Echoed []string
}

// NewEnv returns an echo Env; it has the signature of an env.FactoryFunc.
func NewEnv(ctx context.Context) (env.Env, error) { return &Env{}, nil }

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Message string `json:"message" desc:"the message to echo back"`
}

// ToolDescriptions describes the echo tool.
func (e *Env) ToolDescriptions() map[string]string {
	return map[string]string{"Echo": "Send a message to the environment, which echoes it back."}
}

// Reset starts an episode; there is no observation to add to the prompt.
func (e *Env) Reset(ctx context.Context, row env.Row) (string, error) {
	e.Echoed = e.Echoed[:0]
	return "", nil
}

// Echo is the tool: it returns the message.
func (e *Env) Echo(ctx context.Context, a EchoArgs) (string, error) {
	if a.Message == "" {
		return "", errors.New("message must have at least 1 character")
	}
	e.Echoed = append(e.Echoed, a.Message)
	return echoOf(a.Message).EchoedMessage, nil
}

// Reward is the server's reward for the episode's last message (0 when
// nothing was echoed).
func (e *Env) Reward(ctx context.Context) (float64, error) {
	if len(e.Echoed) == 0 {
		return 0, nil
	}
	return Reward(e.Echoed[len(e.Echoed)-1]), nil
}
