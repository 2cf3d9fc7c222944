package warmstart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/x/env"
	"github.com/x/grpo"
)

// Conversations plays script once per row against one env from f (reset
// for each row) through grpo.PlayScript, exactly as a rollout is played
// under o.Config, and returns the episodes as SFT conversations: the
// prompt, the script's turns and the tool responses, with the env's tool
// schemas. A failed tool call, or an episode the token budget
// (MaxCompletionLength) cuts, is an error: a warm start would teach it.
func Conversations(ctx context.Context, f env.Factory, rows []env.Row, script grpo.Script, o grpo.PlayOptions) (convs []grpo.Conversation, err error) {
	if len(rows) == 0 {
		return nil, errors.New("warmstart: conversations: no rows")
	}
	e, err := f.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("warmstart: conversations: new env: %w", err)
	}
	if c, ok := e.(env.Closer); ok {
		defer func() {
			if cerr := c.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("warmstart: conversations: close the env: %w", cerr)
			}
		}()
	}
	convs = make([]grpo.Conversation, 0, len(rows))
	for i, row := range rows {
		r, err := grpo.PlayScript(ctx, e, row, script, o)
		if err != nil {
			return nil, fmt.Errorf("warmstart: conversation %d (row %v): %w", i, row, err)
		}
		if err := teachable(r); err != nil {
			return nil, fmt.Errorf("warmstart: conversation %d (row %v): %w", i, row, err)
		}
		set, err := env.Tools(e)
		if err != nil {
			return nil, fmt.Errorf("warmstart: conversation %d: %w", i, err)
		}
		msgs := append(slices.Clip(r.Prompt), r.Completion...)
		convs = append(convs, grpo.Conversation{Messages: msgs, Tools: set.Schemas()})
	}
	return convs, nil
}

// teachable reports what in a scripted episode a warm start must not
// teach: failed calls and a cut-off end.
func teachable(r *grpo.Rollout) error {
	if r.ToolFailures > 0 {
		var replies []string
		for _, m := range r.Completion {
			if m.Role == "tool" && strings.HasPrefix(m.Content, `{"error"`) {
				replies = append(replies, m.Content)
			}
		}
		return fmt.Errorf("%d of the script's %d tool calls failed (%s): a warm start would teach failing calls", r.ToolFailures, r.ToolCalls, strings.Join(replies, "; "))
	}
	if r.Truncated {
		return fmt.Errorf("the episode is longer than MaxCompletionLength (%d tokens so far): raise it or shorten the script's turns", len(r.CompletionIDs))
	}
	return nil
}
