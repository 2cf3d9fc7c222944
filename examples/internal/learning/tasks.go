package learning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/examples/internal/wordlegame"
	"github.com/x/grpo"
	"github.com/x/tokenizer"
)

// GuessTask is guess-the-number in 1..max with "higher"/"lower" hints
// (env/guess, its own reward: 1 for a first-guess find, less per extra
// guess, 0 when not found). The expert is binary search, saying the range
// it keeps before each guess; success is finding the number.
func GuessTask(max int) Task {
	rules := guess.Rules{Max: max}
	var rows []env.Row
	for n := 1; n <= max; n++ {
		rows = append(rows, env.Row{"target": int64(n)})
	}
	return Task{
		Name:       fmt.Sprintf("guess%d", max),
		Factory:    guess.NewFactory(guess.Options{Rules: rules}),
		Train:      rows,
		Eval:       rows,
		ExpertRows: rows,
		Expert:     guessExpert,
		Success: func(r *grpo.Rollout) (bool, error) {
			e, ok := r.Env.(*guess.Env)
			if !ok {
				return false, fmt.Errorf("rollout env is %T, not a guess env", r.Env)
			}
			return e.Game.Found, nil
		},
		MaxCompletion: 512,
		MaxTurns:      8,
	}
}

// guessExpert is binary search: it says the range the hints so far leave
// and guesses its middle, then names the number.
func guessExpert(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	g, ok := r.Env.(*guess.Env)
	if !ok {
		return tokenizer.Message{}, fmt.Errorf("binary search plays guess.Env, not %T", r.Env)
	}
	if g.Game.Found {
		return grpo.TextTurn(fmt.Sprintf("The number is %d.", g.Game.Target)), nil
	}
	lo, hi := 1, g.Game.Rules.Max
	for _, n := range g.Game.Guesses {
		if g.Game.Target > n {
			lo = n + 1
		} else {
			hi = n - 1
		}
	}
	mid := (lo + hi) / 2
	return tokenizer.Message{Role: "assistant", Content: fmt.Sprintf("From %d to %d: try %d.", lo, hi, mid),
		ToolCalls: []tokenizer.ToolCall{{Name: "guess", Arguments: json.RawMessage(fmt.Sprintf(`{"number": %d}`, mid))}}}, nil
}

// KVOptions shape a KVTask.
type KVOptions struct {
	Rows   int // training rows (evaluation plays 24 others)
	Values int // the stores draw from this many names (2..8)
	// Keys is how many of the store's keys the rows ask for (1..6; 0:
	// all).
	Keys int
	// Games is how many expert games the warm start learns from (0:
	// 2048): on fewer the tiny model memorises instead of learning to copy.
	Games   int
	Partial bool // the partial credit a newcomer's environment gave
	// Guessing makes the expert submit a guess without a lookup in every
	// second game (the odd seeds), so the warm start does both and GRPO
	// must learn that the lookup pays: more tool calls, not fewer.
	Guessing bool
	// Split draws the values from words the tiny tokenizer writes as
	// two pieces (KV.Split, kvSplitValues), not from the one-token fruit
	// names: the warm start then learns to copy the value in a few
	// hundred SFT steps instead of thousands.
	Split bool
	// Echo makes the expert's submit after a lookup name the value
	// twice (`The value is "peach". Submit "peach".`): two copies of the
	// lookup's answer in its text, not one. (It did not end the warm
	// start's plateau on one-token values: results.md.)
	Echo bool
}

// KVTask is the two-tool key-value lookup (KV) with the expert's games on
// o.Games rows. Its reward is 1 for submitting the right value; Partial
// adds the kind of partial credit a newcomer's environment gave: 0.2 for
// looking the right key up, 0.1 for submitting anything. Success is
// stricter than the reward: the right value, read by a lookup of the key
// asked before the submit (KV.RightLookup), so a lucky guess, which the
// reward pays one time in Values, is no success.
func KVTask(o KVOptions) Task {
	keys := o.Keys
	if keys <= 0 || keys > len(kvKeys) {
		keys = len(kvKeys)
	}
	mk := func(from, n int) []env.Row {
		out := make([]env.Row, n)
		for i := range out {
			out[i] = env.Row{"seed": int64(from + i), "key": kvKeys[(from+i)%keys]}
		}
		return out
	}
	rewards := []Reward{{Name: "correct", Weight: 1, Fn: kvTerm(func(k *KV) float64 { return b2f(k.Correct) })}}
	name := fmt.Sprintf("kv%d", o.Values)
	if keys < len(kvKeys) {
		name += fmt.Sprintf("-keys%d", keys)
	}
	if o.Guessing {
		name += "-guessing"
	}
	if o.Split {
		name += "-split"
	}
	if o.Echo {
		name += "-echo"
	}
	if o.Partial {
		name += "-partial"
		rewards = append(rewards,
			Reward{Name: "looked_up", Weight: 0.2, Fn: kvTerm(func(k *KV) float64 { return b2f(k.LookedUp) })},
			Reward{Name: "submitted", Weight: 0.1, Fn: kvTerm(func(k *KV) float64 { return b2f(k.Submitted) })})
	}
	expert := kvExpert(o.Echo)
	if o.Guessing {
		expert = kvGuessingExpert(expert)
	}
	values, split, games := o.Values, o.Split, o.Games
	if games <= 0 {
		games = 2048
	}
	return Task{
		Name:       name,
		Factory:    env.FactoryFunc(func(context.Context) (env.Env, error) { return &KV{Values: values, Split: split}, nil }),
		Train:      mk(0, o.Rows),
		Eval:       mk(10_000, 24),
		ExpertRows: mk(20_000, games),
		Expert:     expert,
		Rewards:    rewards,
		Success: func(r *grpo.Rollout) (bool, error) {
			k, err := kvOf(r)
			if err != nil {
				return false, err
			}
			return k.RightLookup, nil
		},
		MaxCompletion: 200,
		MaxTurns:      4,
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func kvOf(r *grpo.Rollout) (*KV, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	k, ok := r.Env.(*KV)
	if !ok {
		return nil, fmt.Errorf("rollout env is %T, not KV", r.Env)
	}
	return k, nil
}

func kvTerm(f func(*KV) float64) grpo.RewardFunc {
	return func(ctx context.Context, r *grpo.Rollout) (float64, error) {
		k, err := kvOf(r)
		if err != nil {
			return 0, err
		}
		return f(k), nil
	}
}

// kvExpert looks the key up and submits its value; echo names the value
// twice before the submit.
func kvExpert(echo bool) grpo.Script {
	return func(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
		k, ok := r.Env.(*KV)
		if !ok {
			return tokenizer.Message{}, fmt.Errorf("the kv expert plays KV, not %T", r.Env)
		}
		switch {
		case k.Submitted:
			return grpo.TextTurn("Done: " + quote(k.store[k.key]) + "."), nil
		case k.LookedUp:
			v := k.store[k.key]
			text := "Submit " + quote(v) + "."
			if echo {
				text = "The value is " + quote(v) + ". " + text
			}
			return tokenizer.Message{Role: "assistant", Content: text,
				ToolCalls: []tokenizer.ToolCall{{Name: "submit", Arguments: json.RawMessage(`{"value": "` + v + `"}`)}}}, nil
		}
		return tokenizer.Message{Role: "assistant", Content: "Look up " + quote(k.key) + ".",
			ToolCalls: []tokenizer.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{"key": "` + k.key + `"}`)}}}, nil
	}
}

// kvGuessingExpert submits a guess, without a lookup, in about half the
// games (drawn by the seed, independently of the key asked: a guess on
// odd seeds taught the model to guess for every second key, as the rows
// ask key seed mod 6), and plays expert's game otherwise.
func kvGuessingExpert(expert grpo.Script) grpo.Script {
	return func(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
		k, ok := r.Env.(*KV)
		if !ok {
			return tokenizer.Message{}, fmt.Errorf("the kv expert plays KV, not %T", r.Env)
		}
		seed, _, err := r.Row.Int("seed")
		if err != nil {
			return tokenizer.Message{}, err
		}
		if splitmix(uint64(seed))%2 == 0 || k.LookedUp {
			return expert(ctx, r)
		}
		if k.Submitted {
			return grpo.TextTurn("Done."), nil
		}
		v := k.names()[(seed/2)%int64(k.Values)]
		return tokenizer.Message{Role: "assistant", Content: "Submit " + quote(v) + ".",
			ToolCalls: []tokenizer.ToolCall{{Name: "submit", Arguments: json.RawMessage(`{"value": "` + v + `"}`)}}}, nil
	}
}

// WordleRewards are the Wordle task's reward sets by name:
// wordlegame's "recipe" and "trl" sets, "win" (1 for a win, nothing else)
// and "recipe-no-invalid" (the recipe without its penalty for failed
// calls).
var WordleRewards = map[string][]Reward{
	"recipe":            terms(wordlegame.RecipeRewards),
	"trl":               terms(wordlegame.TRLRewards),
	"win":               {{Name: "win", Weight: 1, Fn: wordlegame.Reward("", wordlegame.CorrectReward)}},
	"recipe-no-invalid": terms(wordlegame.RecipeRewards)[:2],
}

func terms(set string) []Reward {
	ts, err := wordlegame.RewardSet(set, "")
	if err != nil {
		panic(err) // the sets named above exist
	}
	out := make([]Reward, len(ts))
	for i, t := range ts {
		out[i] = Reward{Name: t.Name, Weight: 1, Fn: t.Fn}
	}
	return out
}

// WordleTask is Wordle over words (the examples' tool-style game, every
// word listed in the prompt) with the reward set named rewards
// (WordleRewards); the expert is wordlegame's solver, success a win.
func WordleTask(words []string, rewards string) Task {
	rows := wordlegame.Rows(words)
	return Task{
		Name:       fmt.Sprintf("wordle%d", len(words)),
		Factory:    wordlegame.LocalFactory(words),
		Train:      rows,
		Eval:       rows,
		ExpertRows: rows,
		Expert:     wordlegame.Solver{Words: words}.Turn,
		Rewards:    WordleRewards[rewards],
		Success: func(r *grpo.Rollout) (bool, error) {
			g, err := wordlegame.GameOf(r)
			if err != nil {
				return false, err
			}
			return g.Won, nil
		},
		MaxCompletion: 400,
		MaxTurns:      8,
	}
}

// buttonColours are the button task's buttons; blue wins.
var buttonColours = []string{"red", "green", "blue", "gold", "pink"}

// Button is the smallest task with a known optimum: one tool, press, and
// five buttons of which blue always wins; any other colour loses. Its warm start presses a colour drawn by the row, so the model
// learns the call's format and presses each colour about as often: one
// game in five is a win, and only the reward says which colour wins.
type Button struct {
	Pressed string
	Won     bool
}

// PressArgs are press's arguments.
type PressArgs struct {
	Color string `json:"color" desc:"the button's colour"`
}

// ToolDescriptions describes press.
func (b *Button) ToolDescriptions() map[string]string {
	return map[string]string{"Press": "Press a button; one of them wins."}
}

// Reset starts a game.
func (b *Button) Reset(context.Context, env.Row) (string, error) {
	*b = Button{}
	return "Press one of the buttons " + strings.Join(buttonColours, ", ") + ". One of them wins.", nil
}

// Press is the tool.
func (b *Button) Press(_ context.Context, a PressArgs) (string, error) {
	if b.Pressed != "" {
		return "", errors.New("you already pressed a button")
	}
	b.Pressed = a.Color
	b.Won = a.Color == "blue"
	if !b.Won {
		return a.Color + " does not win. Game over.", nil
	}
	return "You win.", nil
}

// ButtonTask is Button with rows rows; its reward is 1 for a win.
func ButtonTask(rows int) Task {
	mk := func(from, n int) []env.Row {
		out := make([]env.Row, n)
		for i := range out {
			out[i] = env.Row{"seed": int64(from + i)}
		}
		return out
	}
	won := func(r *grpo.Rollout) (bool, error) {
		if r.Err != nil {
			return false, r.Err
		}
		b, ok := r.Env.(*Button)
		if !ok {
			return false, fmt.Errorf("rollout env is %T, not Button", r.Env)
		}
		return b.Won, nil
	}
	return Task{
		Name:       "button",
		Factory:    env.FactoryFunc(func(context.Context) (env.Env, error) { return &Button{}, nil }),
		Train:      mk(0, rows),
		Eval:       mk(10_000, 16),
		ExpertRows: mk(20_000, 40),
		Expert: func(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
			b, ok := r.Env.(*Button)
			if !ok {
				return tokenizer.Message{}, fmt.Errorf("the button expert plays Button, not %T", r.Env)
			}
			if b.Pressed != "" {
				return grpo.TextTurn("Done."), nil
			}
			seed, _, err := r.Row.Int("seed")
			if err != nil {
				return tokenizer.Message{}, err
			}
			c := buttonColours[seed%int64(len(buttonColours))]
			return tokenizer.Message{Role: "assistant", Content: "Try " + c + ".",
				ToolCalls: []tokenizer.ToolCall{{Name: "press", Arguments: json.RawMessage(`{"color": "` + c + `"}`)}}}, nil
		},
		Rewards: []Reward{{Name: "won", Weight: 1, Fn: func(_ context.Context, r *grpo.Rollout) (float64, error) {
			w, err := won(r)
			return b2f(w), err
		}}},
		Success:       won,
		MaxCompletion: 128,
		MaxTurns:      2,
	}
}
