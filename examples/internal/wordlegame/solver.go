package wordlegame

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/wordle"
	"github.com/x/tokenizer"
)

// Solver plays Wordle over a known word list: it keeps the words that fit
// every feedback so far and guesses the one that splits them best. On the
// default list it wins every game in at most 4 guesses (see the test).
type Solver struct {
	// Words are the secrets it knows.
	Words []string
}

// candidates are the words that would have given every feedback in history.
func (s Solver) candidates(history []wordle.Guess) []string {
	var out []string
	for _, w := range s.Words {
		fits := true
		for _, g := range history {
			if wordle.Score(w, g.Word) != g.Feedback {
				fits = false
				break
			}
		}
		if fits {
			out = append(out, w)
		}
	}
	return out
}

// choose picks, among cands, the guess that leaves the fewest words on
// average: the smallest sum of squared sizes of the groups its feedback
// splits cands into (ties: the earlier word).
func (s Solver) choose(cands []string) string {
	best, bestCost := "", 0
	for _, g := range cands {
		groups := map[string]int{}
		for _, secret := range cands {
			groups[wordle.Score(secret, g)]++
		}
		cost := 0
		for fb, n := range groups {
			if fb != strings.Repeat("G", wordle.WordLength) {
				cost += n * n
			}
		}
		if best == "" || cost < bestCost {
			best, bestCost = g, cost
		}
	}
	return best
}

// turn is the solver's next move: a short reasoning and the word. ok is
// false when no listed word fits the feedback (a secret off the list).
func (s Solver) turn(history []wordle.Guess) (reasoning, word string, ok bool) {
	cands := s.candidates(history)
	if len(cands) == 0 {
		return "", "", false
	}
	word = s.choose(cands)
	switch {
	case len(history) == 0:
		reasoning = fmt.Sprintf("All %d words fit. Open with %s.", len(cands), word)
	case len(cands) == 1:
		reasoning = fmt.Sprintf("Only %s fits.", word)
	case len(cands) <= 4:
		reasoning = fmt.Sprintf("Fit: %s. Try %s.", strings.Join(cands, ", "), word)
	default:
		reasoning = fmt.Sprintf("%d words fit. Try %s.", len(cands), word)
	}
	return reasoning, word, true
}

// Play plays one game with the solver against e (reset with row)
// through e's tools, exactly as a rollout calls them, and returns the
// conversation: the user's intro, then per move an assistant turn (the
// reasoning and a guess call) and the tool's reply, then a closing
// assistant turn. The env is left in its final state.
func (s Solver) Play(ctx context.Context, e *Wordle, row env.Row) ([]tokenizer.Message, error) {
	obs, err := e.Reset(ctx, row)
	if err != nil {
		return nil, err
	}
	set, err := env.Tools(e)
	if err != nil {
		return nil, err
	}
	msgs := []tokenizer.Message{{Role: "user", Content: obs}}
	for !e.Game.Done {
		reasoning, word, ok := s.turn(e.Game.Guesses)
		if !ok {
			return nil, fmt.Errorf("no listed word fits the feedback %v", e.Game.Guesses)
		}
		args, err := json.Marshal(GuessArgs{Word: word})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: reasoning,
			ToolCalls: []tokenizer.ToolCall{{Name: "guess", Arguments: args}}})
		resp, err := set.Call(ctx, "guess", args)
		if err != nil {
			return nil, fmt.Errorf("the solver's guess %q was refused: %s", word, resp)
		}
		msgs = append(msgs, tokenizer.Message{Role: "tool", Name: "guess", Content: resp})
	}
	closing := "Out of guesses."
	if e.Game.Won {
		closing = fmt.Sprintf("Solved: %s.", e.Game.Secret)
	}
	return append(msgs, tokenizer.Message{Role: "assistant", Content: closing}), nil
}
