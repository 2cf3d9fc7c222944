package wordlegame

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/x/env/wordle"
	"github.com/x/grpo"
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

// Turn is the solver as a grpo.Script: the next assistant turn of the
// game r plays on a *Wordle (in process or remote): a short reasoning and
// a guess call, or, once the game is over, a closing turn. Played through
// grpo.PlayScript it is exactly a rollout of a model that plays like the
// solver.
func (s Solver) Turn(ctx context.Context, r *grpo.Rollout) (tokenizer.Message, error) {
	e, ok := r.Env.(*Wordle)
	if !ok {
		return tokenizer.Message{}, fmt.Errorf("the solver plays the examples' Wordle, not %T", r.Env)
	}
	if e.Game.Done {
		if e.Game.Won {
			return grpo.TextTurn(fmt.Sprintf("Solved: %s.", e.Game.Secret)), nil
		}
		return grpo.TextTurn("Out of guesses."), nil
	}
	reasoning, word, ok := s.turn(e.Game.Guesses)
	if !ok {
		return tokenizer.Message{}, fmt.Errorf("no listed word fits the feedback %v", e.Game.Guesses)
	}
	args, err := json.Marshal(GuessArgs{Word: word})
	if err != nil {
		return tokenizer.Message{}, err
	}
	return tokenizer.Message{Role: "assistant", Content: reasoning,
		ToolCalls: []tokenizer.ToolCall{{Name: "guess", Arguments: args}}}, nil
}
