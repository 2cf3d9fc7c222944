package wordlegame

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/envtest"
	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
	"github.com/x/grpo"
	"github.com/x/tokenizer"
)

func defaultTestWords(t *testing.T) []string {
	t.Helper()
	words, err := ParseWords(DefaultWordList)
	require.NoError(t, err)
	return words
}

func guess(word string) envtest.Call {
	return envtest.Call{Tool: "guess", Args: `{"word": "` + word + `"}`}
}

// TestRewards plays scripted games and checks each reward term and the
// tool errors the model sees.
func TestRewards(t *testing.T) {
	words := defaultTestWords(t)
	tests := []struct {
		name        string
		secret      string
		calls       []envtest.Call
		win, greens float64
		invalid     int
		errs        []bool // which calls were tool errors
	}{
		{name: "win in one", secret: "crane", calls: []envtest.Call{guess("crane")},
			win: 1 + 0.5*(1-1.0/6), errs: []bool{false}},
		{name: "win in three", secret: "plant", calls: []envtest.Call{guess("crane"), guess("plain"), guess("plant")},
			win: 1 + 0.5*(1-3.0/6), errs: []bool{false, false, false}},
		{name: "not a word, then a win", secret: "plant", calls: []envtest.Call{guess("zzzzz"), guess("plant")},
			win: 1 + 0.5*(1-1.0/6), invalid: 1, errs: []bool{true, false}},
		{name: "guess after the win", secret: "plant", calls: []envtest.Call{guess("plant"), guess("crane")},
			win: 1 + 0.5*(1-1.0/6), invalid: 1, errs: []bool{false, true}},
		{name: "repeat, then stop", secret: "grain", calls: []envtest.Call{guess("brave"), guess("brave")},
			greens: 0.1 * 2, invalid: 1, errs: []bool{false, true}},
		{name: "two invalid in a row end it", secret: "grain", calls: []envtest.Call{guess("grand"), guess("qqqqq"), guess("zzzzz"), guess("grain")},
			greens: 0.1 * 3, invalid: 3, errs: []bool{false, true, true, true}},
		{name: "brackets", secret: "grain", calls: []envtest.Call{guess("[grain]")},
			invalid: 1, errs: []bool{true}},
		{name: "six misses", secret: "chart", calls: []envtest.Call{guess("brave"), guess("brick"), guess("bride"), guess("grace"), guess("grade"), guess("plate"), guess("chart")},
			greens: 0.1 * 1, invalid: 1, errs: []bool{false, false, false, false, false, false, true}},
	}
	cfg := grpo.DefaultConfig()
	cfg.MaxCompletionLength = 2048
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The rollout a reward sees in training: the guesses made through
			// the trainer's rollout loop, failed calls counted by it.
			w := NewLocal(words)
			var turns []tokenizer.Message
			for _, c := range tc.calls {
				turns = append(turns, grpo.CallTurn(c.Tool, c.Args))
			}
			r, err := grpo.PlayScript(context.Background(), w, env.Row{"secret_word": tc.secret}, grpo.Turns(append(turns, grpo.TextTurn("Done."))...), grpo.PlayOptions{Config: &cfg})
			require.NoError(t, err)
			var errs []bool
			for _, m := range r.Completion {
				if m.Role == "tool" {
					errs = append(errs, strings.HasPrefix(m.Content, `{"error"`))
				}
			}
			assert.Equal(t, tc.errs, errs, "which guesses came back as tool errors the model reads")
			g := &w.Game
			assert.InDelta(t, tc.win, WinReward(g), 1e-12, "win")
			assert.InDelta(t, tc.greens, GreensReward(g), 1e-12, "greens")
			assert.Equal(t, tc.invalid, g.Invalid)
			assert.Equal(t, tc.invalid, r.ToolFailures, "every refusal was a failed tool call, which the invalid term counts")
			for name, fn := range map[string]grpo.RewardFunc{"win": Reward("", WinReward), "greens": Reward("", GreensReward), "invalid": Invalid("")} {
				got, err := fn(context.Background(), r)
				require.NoError(t, err)
				want := map[string]float64{"win": tc.win, "greens": tc.greens, "invalid": -0.1 * float64(tc.invalid)}[name]
				assert.InDelta(t, want, got, 1e-12, name)
			}
			_, err = Invalid("wordle")(context.Background(), &grpo.Rollout{EnvName: "catch"})
			assert.ErrorIs(t, err, grpo.ErrNoScore)
		})
	}
}

// TestTRLRewards plays scripted games and checks TRL's terms, each of
// the last guess: correct, greens and yellows (of the last accepted guess,
// over five) and repetition (of the last guess call before the game
// ended, refused or not: a call after a win earns nothing).
func TestTRLRewards(t *testing.T) {
	words := defaultTestWords(t)
	tests := []struct {
		name                                 string
		secret                               string
		guesses                              []string
		attempts                             []string // nil: guesses
		correct, greens, yellows, repetition float64
	}{
		{"win in one", "crane", []string{"crane"}, nil, 1, 1, 0, 0},
		{"win in three", "plant", []string{"crane", "plain", "plant"}, nil, 1, 1, 0, 1},
		{"a call after a win in one is no attempt", "crane", []string{"crane", "plant"}, []string{"crane"}, 1, 1, 0, 0},
		{"one guess, then stop", "chart", []string{"charm"}, nil, 0, 0.8, 0, 0},
		{"a repeat refused", "grain", []string{"brave", "brave"}, nil, 0, 0.4, 0, 0},
		{"a repeat last of three", "grain", []string{"brick", "crane", "brick"}, nil, 0, 0.4, 0.2, 0.5},
		{"no call", "grain", nil, nil, 0, 0, 0, 0},
	}
	cfg := grpo.DefaultConfig()
	cfg.MaxCompletionLength = 2048
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewLocal(words)
			var turns []tokenizer.Message
			for _, g := range tc.guesses {
				turns = append(turns, grpo.CallTurn("guess", `{"word": "`+g+`"}`))
			}
			r, err := grpo.PlayScript(context.Background(), w, env.Row{"secret_word": tc.secret}, grpo.Turns(append(turns, grpo.TextTurn("Done."))...), grpo.PlayOptions{Config: &cfg})
			require.NoError(t, err)
			attempts := tc.attempts
			if attempts == nil {
				attempts = tc.guesses
			}
			assert.Equal(t, attempts, w.Game.Attempts)
			terms, err := RewardSet(TRLRewards, "")
			require.NoError(t, err)
			want := map[string]float64{"correct": tc.correct, "greens": tc.greens, "yellows": tc.yellows, "repetition": tc.repetition}
			require.Len(t, terms, len(want))
			for _, term := range terms {
				got, err := term.Fn(context.Background(), r)
				require.NoError(t, err)
				assert.InDelta(t, want[term.Name], got, 1e-12, term.Name)
			}
		})
	}
	recipe, err := RewardSet(RecipeRewards, "wordle")
	require.NoError(t, err)
	assert.Len(t, recipe, 3)
	_, err = recipe[0].Fn(context.Background(), &grpo.Rollout{EnvName: "catch"})
	assert.ErrorIs(t, err, grpo.ErrNoScore, "a set scores only its env's rollouts")
	withInvalid, err := RewardSet(TRLInvalidRewards, "")
	require.NoError(t, err)
	require.Len(t, withInvalid, 5)
	assert.Equal(t, "invalid", withInvalid[4].Name, "trl-invalid is TRL's terms and the recipe's penalty")
	_, err = RewardSet("greens", "")
	assert.ErrorContains(t, err, `reward set "greens"`)
}

// TestGameOverText checks the recipe's wording of a guess after the end.
func TestGameOverText(t *testing.T) {
	w := NewLocal(defaultTestWords(t))
	ep, err := envtest.Play(context.Background(), w, env.Row{"secret_word": "crane"}, guess("crane"), guess("plant"))
	require.NoError(t, err)
	assert.Contains(t, ep.Steps[0].Response, "Solved in 1")
	assert.Contains(t, ep.Steps[1].Response, "Game over.")
}

// TestSolverWinsEveryWord: the SFT data is only useful if the expert wins;
// on the default list it needs at most 4 guesses.
func TestSolverWinsEveryWord(t *testing.T) {
	words := defaultTestWords(t)
	s := Solver{Words: words}
	worst := 0
	for _, secret := range words {
		w := NewLocal(words)
		r, err := grpo.PlayScript(context.Background(), w, env.Row{"secret_word": secret}, s.Turn, grpo.PlayOptions{})
		require.NoError(t, err, secret)
		require.True(t, w.Game.Won, secret)
		assert.Zero(t, w.Game.Invalid, secret)
		assert.Zero(t, r.ToolFailures, secret)
		worst = max(worst, len(w.Game.Guesses))
		// (assistant, tool) per guess, closing assistant
		conv := r.Completion
		require.Len(t, conv, 1+2*len(w.Game.Guesses), secret)
		for i, g := range w.Game.Guesses {
			call := conv[2*i]
			require.Len(t, call.ToolCalls, 1)
			var a GuessArgs
			require.NoError(t, json.Unmarshal(call.ToolCalls[0].Arguments, &a))
			assert.Equal(t, g.Word, a.Word)
			assert.NotEmpty(t, call.Content, "a short reasoning precedes each guess")
			assert.Equal(t, "tool", conv[1+2*i].Role)
		}
		assert.Equal(t, "Solved: "+secret+".", conv[len(conv)-1].Content)
	}
	assert.LessOrEqual(t, worst, 4)
	assert.GreaterOrEqual(t, worst, 3, "the list should make the player read feedback more than once")
}

// TestExpertConversationRenders: the solver's games render with the Qwen3
// template, with the tiny tokenizer the default model uses, within the
// demo's budget.
func TestExpertConversationRenders(t *testing.T) {
	words := defaultTestWords(t)
	cfg := grpo.DefaultConfig()
	cfg.EnableThinking, cfg.MaxCompletionLength = tokenizer.ThinkingOff, 400
	convs, err := Conversations(context.Background(), []string{"plate", "chart"}, words, grpo.PlayOptions{Config: &cfg})
	require.NoError(t, err)
	chat, err := tokenizer.NewChat(tokenizer.Tiny())
	require.NoError(t, err)
	for _, conv := range convs {
		ids, err := chat.RenderIDs(conv.Messages, tokenizer.RenderOptions{Tools: conv.Tools, EnableThinking: tokenizer.ThinkingOff, KeepAllReasoning: true})
		require.NoError(t, err)
		assert.Less(t, len(ids), 1000, "a game stays short in tiny-tokenizer tokens")
		t.Logf("game: %d messages, %d tokens", len(conv.Messages), len(ids))
	}
}

// TestRemoteMatchesLocal plays the solver's games against our OpenEnv
// Wordle server over loopback, with a bearer token, and checks they are
// the in-process games message for message.
func TestRemoteMatchesLocal(t *testing.T) {
	words := defaultTestWords(t)
	srv := openenv.NewServer(wordle.NewEnvironmentFactory(wordle.Options{}), openenv.RequireBearerToken("s3cret"))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())
	ctx := context.Background()

	_, err := RemoteFactory(hs.URL, "wrong", words).New(ctx)
	if err == nil {
		t.Fatal("a wrong token must be refused")
	}

	e, err := RemoteFactory(hs.URL, "s3cret", words).New(ctx)
	require.NoError(t, err)
	rw := e.(*Wordle)
	defer rw.Close()
	s := Solver{Words: words}
	for _, secret := range []string{"chart", "plane", "brick"} {
		remote, err := grpo.PlayScript(ctx, rw, env.Row{"secret_word": secret}, s.Turn, grpo.PlayOptions{})
		require.NoError(t, err, secret)
		local, err := grpo.PlayScript(ctx, NewLocal(words), env.Row{"secret_word": secret}, s.Turn, grpo.PlayOptions{})
		require.NoError(t, err, secret)
		assert.Equal(t, local.PromptIDs, remote.PromptIDs, secret)
		assert.Equal(t, local.Completion, remote.Completion, secret)
		assert.Equal(t, local.CompletionIDs, remote.CompletionIDs, secret)
		assert.Equal(t, secret, rw.Game.Secret)
	}
	// Invalid moves and the end of the game read the same remotely.
	ep, err := envtest.Play(ctx, rw, env.Row{"secret_word": "grain"}, guess("grand"), guess("qqqqq"), guess("zzzzz"), guess("grain"))
	require.NoError(t, err)
	lw := NewLocal(words)
	lep, err := envtest.Play(ctx, lw, env.Row{"secret_word": "grain"}, guess("grand"), guess("qqqqq"), guess("zzzzz"), guess("grain"))
	require.NoError(t, err)
	for i := range ep.Steps {
		assert.Equal(t, lep.Steps[i].Response, ep.Steps[i].Response, "step %d", i)
	}
	assert.Equal(t, lw.Game, rw.Game)
}

func TestParseWords(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "crane, Plant", want: []string{"crane", "plant"}},
		{in: "crane plant\nbrick", want: []string{"crane", "plant", "brick"}},
		{in: "", wantErr: "empty"},
		{in: "cran", wantErr: "five letters"},
		{in: "crane,crane", wantErr: "twice"},
		{in: "cr4ne", wantErr: "five letters"},
	}
	for _, tc := range tests {
		got, err := ParseWords(tc.in)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
	}
	assert.NoError(t, CheckAllowed(wordle.DefaultDictionary(), defaultTestWords(t)))
	assert.ErrorContains(t, CheckAllowed(wordle.DefaultDictionary(), []string{"zzzzz"}), "zzzzz")
}
