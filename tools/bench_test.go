package tools

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkCall measures one successful call with one string argument:
// lookup, strict argument check, decoding and the reflective call.
func BenchmarkCall(b *testing.B) {
	s, err := Discover(&benchEnv{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"word":"crane"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Call(ctx, "guess", args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/call")
}

// BenchmarkDiscover measures binding a cached type to a new value, what a
// pool pays once per environment instance.
func BenchmarkDiscover(b *testing.B) {
	if _, err := Discover(&board{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Discover(&board{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/discover")
}

// benchEnv has one tool with one string argument, like Wordle's guess.
type benchEnv struct{ last string }

type benchArgs struct {
	Word string `json:"word" desc:"the guess"`
}

func (e *benchEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Guess": "Guess a word."}
}

func (e *benchEnv) Guess(ctx context.Context, a benchArgs) (string, error) {
	e.last = a.Word
	return "X X G G X", nil
}
