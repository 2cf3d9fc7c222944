package grpo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

func TestReadJSONL(t *testing.T) {
	in := "{\"prompt\": \"hi\", \"secret\": 7}\n\n  {\"prompt\": [{\"role\": \"user\", \"content\": \"x\"}], \"environment\": \"wordle\"}\r\n{}"
	d, err := ReadJSONL(strings.NewReader(in), "train.jsonl")
	require.NoError(t, err)
	require.Equal(t, 3, d.Len())
	assert.Equal(t, "hi", d.Row(0)["prompt"])
	secret, ok, err := d.Row(0).Int("secret")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, int64(7), secret)
	assert.Equal(t, "wordle", d.Row(1)["environment"])
	assert.Equal(t, []any{map[string]any{"role": "user", "content": "x"}}, d.Row(1)["prompt"])
	assert.Equal(t, env.Row{}, d.Row(2))
}

func TestReadJSONLErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"malformed line", "{\"a\": 1}\n{\"a\": }\n", "dataset train.jsonl line 2: malformed JSON"},
		{"array line", "{\"a\": 1}\n\n[1, 2]\n", "dataset train.jsonl line 3: a row must be a JSON object of columns, got an array"},
		{"string line", "\"text\"\n", "line 1: a row must be a JSON object of columns, got a string"},
		{"null line", "null\n", "line 1: a row must be a JSON object of columns, got null"},
		{"two values on a line", "{\"a\": 1} {\"b\": 2}\n", "line 1: more than one JSON value"},
		{"truncated object", "{\"a\": 1\n", "line 1: malformed JSON"},
		{"empty", "\n\n", "dataset train.jsonl has no rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader(tt.in), "train.jsonl")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{\"x\": 1}\n{\"x\": 2}\n"), 0o644))
	d, err := LoadJSONL(path)
	require.NoError(t, err)
	assert.Equal(t, 2, d.Len())
	_, err = LoadJSONL(filepath.Join(t.TempDir(), "missing.jsonl"))
	assert.ErrorContains(t, err, "missing.jsonl")
}

func FuzzReadJSONL(f *testing.F) {
	f.Add("{\"a\": 1}\n{\"b\": [1, 2]}\n")
	f.Add("[1]\n")
	f.Add("{\"a\": }")
	f.Add("\n\n{}\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ReadJSONL(strings.NewReader(in), "fuzz")
		if err != nil {
			assert.Contains(t, err.Error(), "fuzz")
			return
		}
		for i := range d.Len() {
			assert.NotNil(t, d.Row(i))
		}
	})
}

func numbered(n int) Rows {
	rows := make(Rows, n)
	for i := range rows {
		rows[i] = env.Row{"i": i}
	}
	return rows
}

func indices(rows []env.Row) []int {
	out := make([]int, len(rows))
	for k, r := range rows {
		out[k] = r["i"].(int)
	}
	return out
}

// Like TRL's RepeatSampler (§8.19): chunks of whole prompts, the
// incomplete last chunk dropped, each epoch a fresh order.
func TestSamplerUnshuffled(t *testing.T) {
	s, err := NewSampler(numbered(7), 3, false, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, s.GenerationsPerEpoch())
	assert.Equal(t, []int{0, 1, 2}, indices(s.Next()))
	assert.Equal(t, []int{3, 4, 5}, indices(s.Next()))
	assert.Equal(t, Position{Epoch: 0, Index: 6}, s.Position())
	assert.Equal(t, []int{0, 1, 2}, indices(s.Next()), "row 6 dropped; epoch 1 starts over")
	assert.Equal(t, Position{Epoch: 1, Index: 3}, s.Position())
}

// TestSamplerEpochs: the fractional epoch counts the generations an epoch
// feeds (10 rows at 4 per generation: 2, the 2 rows left over sit out).
func TestSamplerEpochs(t *testing.T) {
	s, err := NewSampler(numbered(10), 4, true, 1)
	require.NoError(t, err)
	assert.Equal(t, 0.0, s.Epochs())
	var got []float64
	for range 5 {
		s.Next()
		got = append(got, s.Epochs())
	}
	assert.Equal(t, []float64{0.5, 1, 1.5, 2, 2.5}, got)
	none, err := NewSampler(nil, 4, false, 1)
	require.NoError(t, err)
	assert.Equal(t, -1.0, none.Epochs())
}

func TestSamplerShuffled(t *testing.T) {
	draw := func(seed uint64, n int) [][]int {
		s, err := NewSampler(numbered(10), 5, true, seed)
		require.NoError(t, err)
		var out [][]int
		for range n {
			out = append(out, indices(s.Next()))
		}
		return out
	}
	a := draw(42, 6)
	assert.Equal(t, a, draw(42, 6), "same seed, same order")
	assert.NotEqual(t, a, draw(43, 6), "another seed, another order")
	for e := range 3 {
		seen := map[int]bool{}
		for _, i := range append(append([]int{}, a[2*e]...), a[2*e+1]...) {
			assert.False(t, seen[i], "epoch %d draws row %d twice", e, i)
			seen[i] = true
		}
		assert.Len(t, seen, 10)
	}
	assert.NotEqual(t, a[0:2], a[2:4], "epochs are reshuffled")
}

// Resume: a sampler moved to a saved position draws what the original
// would have drawn next.
func TestSamplerResume(t *testing.T) {
	a, err := NewSampler(numbered(9), 4, true, 7)
	require.NoError(t, err)
	a.Next()
	a.Next()
	a.Next() // into epoch 1
	saved := a.Position()
	want := [][]int{indices(a.Next()), indices(a.Next()), indices(a.Next())}

	b, err := NewSampler(numbered(9), 4, true, 7)
	require.NoError(t, err)
	require.NoError(t, b.SetPosition(saved))
	assert.Equal(t, want, [][]int{indices(b.Next()), indices(b.Next()), indices(b.Next())})

	assert.Error(t, b.SetPosition(Position{Epoch: -1}))
	assert.Error(t, b.SetPosition(Position{Index: 9}), "past the 8 rows an epoch uses")
}

func TestSamplerRowsAreCopies(t *testing.T) {
	data := numbered(2)
	s, err := NewSampler(data, 2, false, 0)
	require.NoError(t, err)
	rows := s.Next()
	rows[0]["i"] = 99
	rows[0]["new"] = true
	assert.Equal(t, env.Row{"i": 0}, data[0])
}

func TestSamplerWithoutDataset(t *testing.T) {
	s, err := NewSampler(nil, 3, true, 0)
	require.NoError(t, err)
	assert.Equal(t, []env.Row{{}, {}, {}}, s.Next())
	assert.Equal(t, 0, s.GenerationsPerEpoch())
	_, err = NewSampler(numbered(2), 3, false, 0)
	assert.ErrorContains(t, err, "2 rows, fewer than the 3 prompts")
	_, err = NewSampler(nil, 0, false, 0)
	assert.Error(t, err)
}

func TestTotalSteps(t *testing.T) {
	// §8.20: B=6, steps_per_generation=4, G=4, μ=2: 6 prompts per
	// generation, each generation trained on 8 times; 12 prompts over 3
	// epochs make 48 steps.
	c := DefaultConfig()
	c.PerDeviceTrainBatchSize = 6
	c.StepsPerGeneration = 4
	c.NumGenerations = 4
	c.NumIterations = 2
	c.NumEpochs = 3
	require.NoError(t, c.Validate())
	n, err := TotalSteps(c, numbered(12))
	require.NoError(t, err)
	assert.Equal(t, 48, n)

	_, err = TotalSteps(c, nil)
	assert.ErrorContains(t, err, "MaxSteps")
	_, err = TotalSteps(c, numbered(5))
	assert.ErrorContains(t, err, "5 rows, fewer than the 6 prompts")
	c.MaxSteps = 5
	n, err = TotalSteps(c, nil)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
}
