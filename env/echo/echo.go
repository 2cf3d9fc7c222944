// Package echo is OpenEnv's classic echo environment: the agent sends a
// message and gets it back, rewarded 0.1 per character (Unicode code
// point). It comes as a tool-style env.Env for in-process training ([Env]),
// as an openenv.Environment with the exact wire format of the Python
// server ([NewEnvironmentFactory]), and as a typed client of such a server
// with a tool-style env over it ([Dial], [NewRemoteFactory]).
package echo

import "unicode/utf8"

// ReadyMessage is the echoed_message of every reset.
const ReadyMessage = "Echo environment ready!"

// Action is the echo action: {"message": "..."}, at least one character.
type Action struct {
	Message string `json:"message"`
}

// Observation is the echo observation, fields in the wire order.
type Observation struct {
	EchoedMessage string `json:"echoed_message"`
	MessageLength int    `json:"message_length"`
}

// State is the echo state.
type State struct {
	EpisodeID *string `json:"episode_id"`
	StepCount int     `json:"step_count"`
}

// Reward is the reward for echoing message: 0.1 per code point, computed
// as the Python server does (len(message) * 0.1 in float64).
func Reward(message string) float64 {
	return float64(utf8.RuneCountInString(message)) * 0.1
}

// echoOf is the observation for message.
func echoOf(message string) Observation {
	return Observation{EchoedMessage: message, MessageLength: utf8.RuneCountInString(message)}
}
