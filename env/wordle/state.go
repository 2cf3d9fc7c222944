package wordle

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/x/env/internal/pyjson"
)

// State is TextArenaState as the server sends it (the secret word is in
// raw_state.game_state, as upstream).
type State struct {
	EpisodeID  *string         `json:"episode_id"`
	StepCount  int             `json:"step_count"`
	EnvID      string          `json:"env_id"`
	NumPlayers int             `json:"num_players"`
	MaxTurns   *int            `json:"max_turns"`
	Turn       int             `json:"turn"`
	LastReward pyjson.Float    `json:"last_reward"`
	LastInfo   Info            `json:"last_info"`
	RawState   json.RawMessage `json:"raw_state"`
}

type rawState struct {
	Turn          int                 `json:"turn"`
	GameState     gameState           `json:"game_state"`
	Logs          [][2]any            `json:"logs"`
	Rewards       map[string]any      `json:"rewards"`
	Done          bool                `json:"done"`
	RoleMapping   roleMapping         `json:"role_mapping"`
	GameInfo      map[string]gameInfo `json:"game_info"`
	StepInfo      struct{}            `json:"step_info"`
	RewardSignals *Signals            `json:"reward_signals,omitempty"`
}

type gameState struct {
	SecretWord    string   `json:"secret_word"`
	GuessHistory  [][2]any `json:"guess_history"`
	WordLength    int      `json:"word_length"`
	NumGuesses    int      `json:"num_guesses"`
	RenderedBoard *string  `json:"rendered_board,omitempty"`
	PlayerView    *string  `json:"player_view,omitempty"`
}

type roleMapping struct {
	Player string `json:"0"`
	Game   string `json:"-1"`
}

type gameInfo struct {
	Role        string `json:"role"`
	InvalidMove bool   `json:"invalid_move"`
	TurnCount   int    `json:"turn_count"`
	Reason      string `json:"reason,omitempty"`
}

// State returns the session state in TextArena's shape.
func (e *Environment) State(ctx context.Context) (json.RawMessage, error) {
	g := &e.game
	rs := rawState{
		Turn: g.turn,
		GameState: gameState{SecretWord: g.secret, GuessHistory: [][2]any{}, WordLength: WordLength,
			NumGuesses: MaxGuesses},
		Logs:          [][2]any{},
		Done:          g.done,
		RoleMapping:   roleMapping{Player: "Player", Game: "GAME"},
		GameInfo:      map[string]gameInfo{"0": {Role: "Player 0", InvalidMove: g.invalid, TurnCount: g.turn, Reason: g.reason}},
		RewardSignals: e.lastInfo.RewardSignals,
	}
	for _, gu := range g.guesses {
		rs.GameState.GuessHistory = append(rs.GameState.GuessHistory, [2]any{gu.Word, strings.Split(gu.Feedback, "")})
	}
	if len(g.guesses) > 0 {
		board, view := g.renderedBoard(), g.playerView()
		rs.GameState.RenderedBoard, rs.GameState.PlayerView = &board, &view
	}
	for _, m := range g.msgs {
		rs.Logs = append(rs.Logs, [2]any{-1, m})
	}
	if g.done {
		if g.won {
			rs.Rewards = map[string]any{"0": 1}
		} else {
			rs.Rewards = map[string]any{"0": pyjson.Float(g.reward)}
		}
	}
	raw, err := pyjson.Marshal(rs)
	if err != nil {
		return nil, err
	}
	return pyjson.Marshal(State{EpisodeID: e.episodeID, StepCount: e.steps, EnvID: EnvID, NumPlayers: 1,
		Turn: g.turn, LastReward: pyjson.Float(g.reward), LastInfo: e.lastInfo, RawState: raw})
}
