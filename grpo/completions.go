package grpo

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// CompletionRecord is one rollout as the completions log keeps it (TRL's
// log_completions table, as JSON lines): the prompt and completion text
// (decoded with special tokens kept, tool responses included), each reward
// function's score, the weighted reward, the advantage and the tool use.
type CompletionRecord struct {
	Step int `json:"step"`
	// PolicyVersion is the optimizer step count of the policy that sampled
	// the rollout (Rollout.PolicyVersion).
	PolicyVersion int                `json:"policy_version"`
	Group         int                `json:"group"` // index of the prompt in its generation batch
	Env           string             `json:"env,omitempty"`
	Prompt        string             `json:"prompt"`
	Completion    string             `json:"completion"`
	Rewards       map[string]float64 `json:"-"` // by function name; NaN = no score
	Reward        float64            `json:"-"` // weighted sum; NaN = unscorable
	Advantage     float64            `json:"advantage"`
	ToolCalls     int                `json:"tool_calls"`
	// ToolFailures counts malformed calls, unknown tools and tool errors.
	ToolFailures int    `json:"tool_failures"`
	Truncated    bool   `json:"truncated,omitempty"`
	Error        string `json:"error,omitempty"` // why a failed rollout was left out
}

func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalJSON writes the record with NaN scores as null; a non-finite
// advantage is an error (advantages of NaN are 0 by then, spec §10.6).
func (r CompletionRecord) MarshalJSON() ([]byte, error) {
	if math.IsNaN(r.Advantage) || math.IsInf(r.Advantage, 0) {
		return nil, fmt.Errorf("completion record: advantage %v is not finite", r.Advantage)
	}
	rewards := make(map[string]*float64, len(r.Rewards))
	for k, v := range r.Rewards {
		rewards[k] = finiteOrNil(v)
	}
	// plain has the fields without this method, so Marshal does not recurse.
	type plain CompletionRecord
	return json.Marshal(struct {
		plain
		Rewards map[string]*float64 `json:"rewards"`
		Reward  *float64            `json:"reward"`
	}{plain(r), rewards, finiteOrNil(r.Reward)})
}

// UnmarshalJSON reads a record written by MarshalJSON; null reads as NaN.
func (r *CompletionRecord) UnmarshalJSON(data []byte) error {
	type plain CompletionRecord
	var in struct {
		plain
		Rewards map[string]*float64 `json:"rewards"`
		Reward  *float64            `json:"reward"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*r = CompletionRecord(in.plain)
	r.Reward = math.NaN()
	if in.Reward != nil {
		r.Reward = *in.Reward
	}
	r.Rewards = make(map[string]float64, len(in.Rewards))
	for k, v := range in.Rewards {
		r.Rewards[k] = math.NaN()
		if v != nil {
			r.Rewards[k] = *v
		}
	}
	return nil
}

// CompletionsWriter appends CompletionRecords as JSON lines and flushes
// after each Write, so the log is whole up to the last finished step. Not
// safe for concurrent use.
type CompletionsWriter struct {
	w      *bufio.Writer
	closer io.Closer
}

// NewCompletionsWriter writes records to w.
func NewCompletionsWriter(w io.Writer) *CompletionsWriter {
	return &CompletionsWriter{w: bufio.NewWriter(w)}
}

// CreateCompletionsFile creates (or truncates) path for a completions log;
// Close closes the file.
func CreateCompletionsFile(path string) (*CompletionsWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create completions log: %w", err)
	}
	w := NewCompletionsWriter(f)
	w.closer = f
	return w, nil
}

// Write appends one line per record and flushes.
func (w *CompletionsWriter) Write(recs ...CompletionRecord) error {
	for i, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("write completion %d of step %d: %w", i, r.Step, err)
		}
		if _, err := w.w.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("write completion %d of step %d: %w", i, r.Step, err)
		}
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("write completions: %w", err)
	}
	return nil
}

// Close flushes and, if the writer made the file, closes it.
func (w *CompletionsWriter) Close() error {
	err := w.w.Flush()
	if w.closer != nil {
		err = errors.Join(err, w.closer.Close())
		w.closer = nil
	}
	if err != nil {
		return fmt.Errorf("close completions log: %w", err)
	}
	return nil
}
