package learning

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/x/env"
)

// kvKeys are the key-value store's keys; every row's store has them all.
var kvKeys = []string{"red", "blue", "green", "gold", "pink", "gray"}

// kvValues are the values a store draws from (one token each in the tiny
// tokenizer, so a lookup's answer is copied as one token).
var kvValues = []string{"apple", "lemon", "mango", "peach", "plum", "kiwi", "grape", "melon"}

// kvSplitValues are values the tiny tokenizer writes as two pieces each
// after a quote ("ti"+"ger", "ze"+"bra", ...), each with its own first
// piece: KV.Split's values. The embedded model starts from random
// weights, and a one-token fruit is always followed by the same closing
// quote, so until the copy itself is learnt nothing in the loss tells the
// values' embeddings apart: the warm start sat on a plateau with the value
// at chance for 1000 SFT steps and more. A two-piece value's first piece
// must predict its own second piece, which sets the values apart from the
// first steps, and the copy is learnt in a few hundred (results.md, "kv,
// fourth session").
var kvSplitValues = []string{"tiger", "zebra", "otter", "stone", "river", "seven", "cloud", "amber"}

// KV is the two-tool key-value task: the prompt names a key of a small
// store; lookup(key) returns its value and submit(value) ends the episode,
// right or wrong. Values are the first Values fruit names (or, Split, of
// kvSplitValues), so a submit without a lookup is right one time in
// Values. The optimal policy is
// lookup(the key), then submit what it returned: two calls. A policy that
// does less (submits a guess, or calls nothing) is right one time in
// Values at best, so the task shows whether GRPO learns to use the tools
// or to avoid them. Every key and value is written as a call's arguments
// write it (quote, lookupAnswer), so that the copies the task needs are
// copies of token ids.
type KV struct {
	// Values is how many names the store draws its values from (2..8);
	// it survives Reset.
	Values int
	// Split draws the values from kvSplitValues, not kvValues; it
	// survives Reset.
	Split bool

	store map[string]string
	key   string
	// Episode state, for reward functions.
	Submitted   bool // submit was called
	Correct     bool // ... with the key's value
	LookedUp    bool // lookup was called with the prompt's key
	Lookups     int  // lookup calls
	Invalid     int  // refused calls (unknown key, submit after the end)
	RightLookup bool // the submitted value was read by a lookup of the key before
}

// KVArgs are lookup's arguments.
type KVArgs struct {
	Key string `json:"key" desc:"a key of the store"`
}

// SubmitArgs are submit's arguments.
type SubmitArgs struct {
	Value string `json:"value" desc:"the value you found"`
}

// ToolDescriptions describes the two tools.
func (k *KV) ToolDescriptions() map[string]string {
	return map[string]string{
		"Lookup": "Read the value stored under a key.",
		"Submit": "Submit the value you were asked for; this ends the task.",
	}
}

// Reset builds the row's store (from its "seed") and asks for its "key".
func (k *KV) Reset(ctx context.Context, row env.Row) (string, error) {
	seed, ok, err := row.Int("seed")
	if err != nil || !ok {
		return "", fmt.Errorf("kv: the row needs an integer seed: %v", err)
	}
	key, _, err := row.String("key")
	if err != nil {
		return "", err
	}
	names := k.names()
	if k.Values < 2 || k.Values > len(names) {
		return "", fmt.Errorf("kv: %d values: want 2..%d", k.Values, len(names))
	}
	// PCG's first draws from neighbouring seeds are alike; mixing the
	// seed first keeps a store's values from being guessable by its row.
	rng := rand.New(rand.NewPCG(splitmix(uint64(seed)), 7))
	store := map[string]string{}
	for _, name := range kvKeys {
		store[name] = names[rng.IntN(k.Values)]
	}
	if _, ok := store[key]; !ok {
		return "", fmt.Errorf("kv: key %q is not one of %v", key, kvKeys)
	}
	*k = KV{Values: k.Values, Split: k.Split, store: store, key: key}
	quoted := make([]string, len(kvKeys))
	for i, name := range kvKeys {
		quoted[i] = quote(name)
	}
	return fmt.Sprintf("The store has the keys %s. Find the value of %s and submit it.", strings.Join(quoted, ", "), quote(key)), nil
}

// names are the words the store's values are drawn from (the first
// Values of them).
func (k *KV) names() []string {
	if k.Split {
		return kvSplitValues
	}
	return kvValues
}

// quote writes a key or value as the prompt and the expert's text name
// it: in double quotes, as a tool call's JSON arguments write it. The tiny
// tokenizer splits a word by what precedes it (" green" is one token,
// "green" after a quote three), and a tiny model copies token ids far
// more easily than it maps one tokenization onto another; quoted, every
// mention of a word is the same ids as the call's (TestKVCopiesAreTheSameTokens).
func quote(w string) string {
	return `"` + w + `"`
}

// Lookup is the first tool.
func (k *KV) Lookup(ctx context.Context, a KVArgs) (string, error) {
	if k.Submitted {
		k.Invalid++
		return "", errors.New("the task is over")
	}
	v, ok := k.store[a.Key]
	if !ok {
		k.Invalid++
		return "", fmt.Errorf("no key %q", a.Key)
	}
	k.Lookups++
	if a.Key == k.key {
		k.LookedUp = true
	}
	return lookupAnswer(a.Key, v), nil
}

// lookupAnswer is lookup's answer, {"key": "green", "value": "grape"}:
// JSON written as a tool call's arguments are (Python's json.dumps, a
// space after ':' and ','), so that the value's tokens, and the tokens
// before them, are those of submit's {"value": "grape"}. Keys and values
// are plain words of kvKeys and kvValues, so quote is their JSON string.
func lookupAnswer(key, value string) string {
	return `{"key": ` + quote(key) + `, "value": ` + quote(value) + `}`
}

// Submit is the second tool.
func (k *KV) Submit(ctx context.Context, a SubmitArgs) (string, error) {
	if k.Submitted {
		k.Invalid++
		return "", errors.New("the task is over")
	}
	k.Submitted = true
	k.Correct = strings.TrimSpace(a.Value) == k.store[k.key]
	k.RightLookup = k.Correct && k.LookedUp
	if k.Correct {
		return "Correct.", nil
	}
	return "Wrong.", nil
}

// splitmix is SplitMix64's output function: neighbouring inputs give
// unrelated outputs.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
