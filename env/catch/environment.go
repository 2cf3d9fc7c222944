package catch

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

// Options configure the environments a factory makes.
type Options struct {
	// Seed seeds the ball's columns and the episode ids.
	Seed uint64
}

// EnvironmentFactory makes catch Environments for an openenv server. It is
// safe for concurrent use.
type EnvironmentFactory struct {
	opts Options
	n    atomic.Uint64
}

// NewEnvironmentFactory returns a factory for serving catch over OpenEnv.
func NewEnvironmentFactory(opts Options) *EnvironmentFactory {
	return &EnvironmentFactory{opts: opts}
}

// NewEnvironment makes one session's environment.
func (f *EnvironmentFactory) NewEnvironment(ctx context.Context) (openenv.Environment, error) {
	return NewEnvironment(pyjson.Seeds(f.opts.Seed, f.n.Add(1)-1)), nil
}

// Metadata is what the Python server reports.
func (f *EnvironmentFactory) Metadata() openenv.Metadata {
	return openenv.Metadata{Name: "OpenSpielEnvironment", Description: "OpenSpielEnvironment environment", Version: "1.0.0"}
}

// ActionSchema is the schema of OpenSpielAction.
func (f *EnvironmentFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"description":"Action for OpenSpiel environments.","properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"action_id":{"description":"Action ID to apply","title":"Action Id","type":"integer"},"game_name":{"default":"catch","description":"Name of the OpenSpiel game","title":"Game Name","type":"string"},"game_params":{"additionalProperties":true,"description":"Optional game-specific parameters","title":"Game Params","type":"object"}},"required":["action_id"],"title":"OpenSpielAction","type":"object"}`)
}

// ObservationSchema is the schema of OpenSpielObservation.
func (f *EnvironmentFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"description":"Observation from OpenSpiel environment.","properties":{"done":{"default":false,"title":"Done","type":"boolean"},"reward":{"anyOf":[{"type":"boolean"},{"type":"integer"},{"type":"number"},{"type":"null"}],"default":null,"title":"Reward"},"metadata":{"additionalProperties":true,"title":"Metadata","type":"object"},"info_state":{"items":{"type":"number"},"title":"Info State","type":"array"},"legal_actions":{"items":{"type":"integer"},"title":"Legal Actions","type":"array"},"game_phase":{"default":"playing","title":"Game Phase","type":"string"},"current_player_id":{"default":0,"title":"Current Player Id","type":"integer"},"opponent_last_action":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"Opponent Last Action"}},"required":["info_state","legal_actions"],"title":"OpenSpielObservation","type":"object"}`)
}

// Action is OpenSpielAction: action_id, with game_name and game_params
// accepted and ignored (the server plays catch).
type Action struct {
	ActionID   int            `json:"action_id"`
	GameName   string         `json:"game_name"`
	GameParams map[string]any `json:"game_params"`
}

// Observation is OpenSpielObservation on the wire, fields in order.
type Observation struct {
	InfoState          []float64 `json:"info_state"`
	LegalActions       []int     `json:"legal_actions"`
	GamePhase          Phase     `json:"game_phase"`
	CurrentPlayerID    int       `json:"current_player_id"`
	OpponentLastAction *int      `json:"opponent_last_action"`
}

// wireObservation writes the info state as Python floats.
type wireObservation struct {
	InfoState          []pyjson.Float `json:"info_state"`
	LegalActions       []int          `json:"legal_actions"`
	GamePhase          Phase          `json:"game_phase"`
	CurrentPlayerID    int            `json:"current_player_id"`
	OpponentLastAction *int           `json:"opponent_last_action"`
}

// State is the session state.
type State struct {
	EpisodeID      *string        `json:"episode_id"`
	StepCount      int            `json:"step_count"`
	GameName       string         `json:"game_name"`
	AgentPlayer    int            `json:"agent_player"`
	OpponentPolicy string         `json:"opponent_policy"`
	GameParams     map[string]any `json:"game_params"`
	NumPlayers     int            `json:"num_players"`
}

// TerminalPlayer is OpenSpiel's kTerminalPlayerId.
const TerminalPlayer = -4

// Environment is one OpenEnv catch session, used from one goroutine at a
// time.
type Environment struct {
	rng       *rand.Rand
	game      Game
	episodeID string
	steps     int
}

// NewEnvironment returns a session drawing ball columns from rng. It is
// ready to step before any reset, like the Python env.
func NewEnvironment(rng *rand.Rand) *Environment {
	e := &Environment{rng: rng, episodeID: pyjson.UUID4(rng)}
	e.game.ResetRandom(rng)
	return e
}

// resetOptions are the reset keys catch understands. seed reseeds the
// ball's column; ball_column (our extension) fixes it.
type resetOptions struct {
	Seed       *int64  `json:"seed"`
	EpisodeID  *string `json:"episode_id"`
	BallColumn *int    `json:"ball_column"`
}

// Reset starts a game: reward null, phase initial.
func (e *Environment) Reset(ctx context.Context, opts json.RawMessage) (openenv.Result, error) {
	var o resetOptions
	if len(opts) > 0 {
		if err := json.Unmarshal(opts, &o); err != nil {
			return openenv.Result{}, fmt.Errorf("catch: reset options: %w", err)
		}
	}
	if o.Seed != nil {
		e.rng = pyjson.Seeds(uint64(*o.Seed), 0)
	}
	e.episodeID, e.steps = pyjson.UUID4(e.rng), 0
	if o.EpisodeID != nil {
		e.episodeID = *o.EpisodeID
	}
	if o.BallColumn != nil {
		if *o.BallColumn < 0 || *o.BallColumn >= Columns {
			return openenv.Result{}, fmt.Errorf("catch: ball_column %d is outside 0..%d", *o.BallColumn, Columns-1)
		}
		e.game.Reset(*o.BallColumn)
	} else {
		e.game.ResetRandom(e.rng)
	}
	return e.result(nil, false)
}

// Step moves the paddle. A step after the end starts a new game, as
// OpenSpiel's rl_environment does (reward null, phase initial).
func (e *Environment) Step(ctx context.Context, action json.RawMessage) (openenv.Result, error) {
	a, err := ParseAction(action)
	if err != nil {
		return openenv.Result{}, err
	}
	e.steps++
	if e.game.Done() {
		e.game.ResetRandom(e.rng)
		return e.result(nil, false)
	}
	r, err := e.game.Apply(a.ActionID)
	if err != nil {
		e.steps--
		return openenv.Result{}, err
	}
	return e.result(&r, e.game.Done())
}

// State returns the session state.
func (e *Environment) State(ctx context.Context) (json.RawMessage, error) {
	return pyjson.Marshal(State{EpisodeID: &e.episodeID, StepCount: e.steps, GameName: "catch",
		OpponentPolicy: "random", GameParams: map[string]any{}, NumPlayers: 1})
}

func (e *Environment) result(reward *float64, done bool) (openenv.Result, error) {
	obs := wireObservation{LegalActions: e.game.LegalActions(), GamePhase: e.game.Phase()}
	for _, v := range e.game.InfoState() {
		obs.InfoState = append(obs.InfoState, pyjson.Float(v))
	}
	if done {
		obs.CurrentPlayerID = TerminalPlayer
	}
	b, err := pyjson.Marshal(obs)
	if err != nil {
		return openenv.Result{}, err
	}
	return openenv.Result{Observation: b, Reward: reward, Done: done}, nil
}

// ParseAction validates an OpenSpielAction as pydantic does (lax ints).
func ParseAction(data json.RawMessage) (Action, error) {
	v, err := pyjson.Action(data, "OpenSpielAction", "action_id", "game_name", "game_params")
	if err != nil {
		return Action{}, err
	}
	a := Action{GameName: "catch", GameParams: map[string]any{}}
	if x, ok := v.Require("action_id"); ok {
		id, fe := pyjson.Int("action_id", x)
		v.Add(fe...)
		a.ActionID = int(id)
		if len(fe) == 0 && int64(a.ActionID) != id {
			return Action{}, fmt.Errorf("catch: action_id %d out of range", id)
		}
	}
	if x, ok := v.Vals["game_name"]; ok {
		s, fe := pyjson.String("game_name", x, 0)
		v.Add(fe...)
		a.GameName = s
	}
	if x, ok := v.Vals["game_params"]; ok {
		fe := pyjson.Dict("game_params", x)
		v.Add(fe...)
		if m, ok := x.(map[string]any); ok {
			a.GameParams = m
		}
	}
	return a, v.Err()
}
