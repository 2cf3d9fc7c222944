package grpo

import (
	"encoding/json"
	"fmt"

	"github.com/x/env"
	"github.com/x/tokenizer"
)

// PromptColumn is the row column holding the prompt: a string (one user
// message) or a list of chat messages. A row without it starts from an
// empty user message, which the environment's Reset observation fills.
const PromptColumn = "prompt"

// promptMessages reads the prompt of row as chat messages (a copy) and
// appends the env's first observation to the last message's content by
// plain concatenation, as TRL does.
func promptMessages(row env.Row, observation string) ([]tokenizer.Message, error) {
	var msgs []tokenizer.Message
	switch p := row[PromptColumn].(type) {
	case nil:
		msgs = []tokenizer.Message{{Role: "user"}}
	case string:
		msgs = []tokenizer.Message{{Role: "user", Content: p}}
	case []tokenizer.Message:
		msgs = append([]tokenizer.Message(nil), p...)
	default:
		// Decoded JSON ([]any of objects) or any other shape that
		// marshals to a list of message objects.
		b, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("grpo: prompt column of type %T: %w", p, err)
		}
		if err := json.Unmarshal(b, &msgs); err != nil {
			return nil, fmt.Errorf("grpo: prompt column of type %T is neither a string nor a list of chat messages: %w", p, err)
		}
	}
	if len(msgs) == 0 {
		msgs = []tokenizer.Message{{Role: "user"}}
	}
	if observation != "" {
		last := &msgs[len(msgs)-1]
		last.Content += observation
	}
	return msgs, nil
}
