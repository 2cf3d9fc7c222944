package wordlegame

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

// remoteBoard plays games on an OpenEnv Wordle server (ours from
// env/cmd/envserver, or OpenEnv's Python textarena_env): one session per
// board, held for the board's life. Moves are TextArena actions ("[word]");
// the accepted guesses and their feedback come from the session state, so
// the board needs nothing but the protocol.
type remoteBoard struct {
	client *wordle.Client
	seen   string // the transcript so far
	n      int    // accepted guesses so far
}

// RemoteFactory returns a factory of Wordle envs, each holding its own
// session on the server at url (token, when set, is sent as a bearer
// token).
func RemoteFactory(url, token string, words []string) env.Factory {
	var opts []openenv.Option
	if token != "" {
		opts = append(opts, openenv.WithBearerToken(token))
	}
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		c, err := wordle.Dial(ctx, url, opts...)
		if err != nil {
			return nil, fmt.Errorf("connect to the Wordle server: %w", err)
		}
		return newWordle(&remoteBoard{client: c}, words), nil
	})
}

func (b *remoteBoard) close() error { return b.client.Close() }

func (b *remoteBoard) start(ctx context.Context, secret string) error {
	var o wordle.ResetOptions
	if secret != "" {
		o.SecretWord = &secret // our server honours it; OpenEnv's draws its own
	}
	res, err := b.client.Reset(ctx, o)
	if err != nil {
		return err
	}
	b.seen, b.n = res.Observation.Content(), 0
	return nil
}

func (b *remoteBoard) play(ctx context.Context, word string) (move, error) {
	res, err := b.client.Step(ctx, "["+word+"]")
	if err != nil {
		return move{}, fmt.Errorf("step the Wordle server: %w", err)
	}
	content := res.Observation.Content()
	delta, ok := strings.CutPrefix(content, b.seen)
	if !ok {
		return move{}, fmt.Errorf("the Wordle server's transcript does not continue the previous one")
	}
	b.seen = content
	st, err := b.client.State(ctx)
	if err != nil {
		return move{}, fmt.Errorf("read the Wordle server's state: %w", err)
	}
	gs, err := parseGameState(st.RawState)
	if err != nil {
		return move{}, err
	}
	m := move{done: res.Done, won: res.Done && res.Reward != nil && *res.Reward == 1}
	if m.done {
		m.secret = gs.SecretWord
	}
	if len(gs.GuessHistory) > b.n {
		b.n = len(gs.GuessHistory)
		last := gs.GuessHistory[b.n-1]
		m.accepted = &wordle.Guess{Word: last.word, Feedback: last.feedback}
	} else {
		m.reason = invalidReason(strings.Split(delta, "\n[GAME] "))
	}
	return m, nil
}

// gameState is the part of TextArena's raw_state this board reads.
type gameState struct {
	SecretWord   string         `json:"secret_word"`
	GuessHistory []historyEntry `json:"guess_history"`
}

// historyEntry is one [word, [f, e, e, d, b]] pair of guess_history.
type historyEntry struct {
	word, feedback string
}

func (h *historyEntry) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("guess_history entry %s is not a [word, feedback] pair", data)
	}
	var marks []string
	if err := json.Unmarshal(pair[0], &h.word); err != nil {
		return fmt.Errorf("guess_history word %s: %w", pair[0], err)
	}
	if err := json.Unmarshal(pair[1], &marks); err != nil {
		return fmt.Errorf("guess_history feedback %s: %w", pair[1], err)
	}
	h.feedback = strings.Join(marks, "")
	return nil
}

func parseGameState(raw json.RawMessage) (gameState, error) {
	var rs struct {
		GameState gameState `json:"game_state"`
	}
	if err := json.Unmarshal(raw, &rs); err != nil {
		return gameState{}, fmt.Errorf("the Wordle server's raw_state: %w", err)
	}
	return rs.GameState, nil
}
