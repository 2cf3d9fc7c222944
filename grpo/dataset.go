package grpo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"

	"github.com/x/env"
)

// Dataset is rows of named columns: every column reaches the env's Reset
// and the reward functions. Row must be safe for concurrent calls and must
// not change while training runs.
type Dataset interface {
	Len() int
	Row(i int) env.Row
}

// Rows is a Dataset held in memory.
type Rows []env.Row

// Len is the number of rows.
func (r Rows) Len() int { return len(r) }

// Row returns row i.
func (r Rows) Row(i int) env.Row { return r[i] }

// NewDataset returns the rows as a Dataset. The slice and the rows are not
// copied; the trainer hands each rollout a shallow copy of its row.
func NewDataset(rows []env.Row) Dataset { return Rows(rows) }

// LoadJSONL reads a dataset from a JSON Lines file: one JSON object per
// line, its keys the columns; blank lines are skipped. Numbers decode as
// float64 (env.Row.Int reads whole numbers back as integers).
func LoadJSONL(path string) (Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("grpo: load dataset: %w", err)
	}
	defer f.Close()
	return ReadJSONL(f, path)
}

// ReadJSONL reads a JSON Lines dataset from r; name (a file name) is used
// in errors, which give the line number of a malformed line or of a line
// that is not a JSON object. An input with no rows is an error.
func ReadJSONL(r io.Reader, name string) (Dataset, error) {
	br := bufio.NewReader(r)
	var rows Rows
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("grpo: dataset %s line %d: %w", name, line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			row, perr := parseRow(t)
			if perr != nil {
				return nil, fmt.Errorf("grpo: dataset %s line %d: %w", name, line, perr)
			}
			rows = append(rows, row)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("grpo: dataset %s has no rows", name)
	}
	return rows, nil
}

func parseRow(b []byte) (env.Row, error) {
	if b[0] != '{' {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("malformed JSON: %w", err)
		}
		return nil, fmt.Errorf("a row must be a JSON object of columns, got %s", jsonKind(v))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var row env.Row
	if err := dec.Decode(&row); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	if row == nil {
		row = env.Row{}
	}
	return row, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// Position is where a Sampler stands: the epoch and the index of the next
// row in that epoch's order. A checkpoint stores it so that Resume draws
// the same rows as an uninterrupted run.
type Position struct {
	Epoch int `json:"epoch"`
	Index int `json:"index"`
}

// Sampler draws the unique prompts of each generation from a Dataset as
// TRL's RepeatSampler does, without the repetition (the trainer makes the
// G rollouts of each prompt): each epoch is a permutation of the rows
// (seeded by Seed and the epoch; identity without shuffling) cut into
// chunks of Prompts rows, the incomplete last chunk dropped. With no
// dataset it yields rows with no columns (the env's Reset gives the
// prompt) for ever. Not safe for concurrent use.
type Sampler struct {
	data    Dataset
	prompts int
	pos     Position
	order   *epochOrder // nil without a dataset
}

// NewSampler returns a sampler of prompts rows per generation over data
// (nil for env-driven prompts), at epoch 0, index 0.
func NewSampler(data Dataset, prompts int, shuffle bool, seed uint64) (*Sampler, error) {
	if prompts < 1 {
		return nil, fmt.Errorf("grpo: sampler: %d prompts per generation", prompts)
	}
	if data != nil && data.Len() < prompts {
		return nil, fmt.Errorf("grpo: the dataset has %d rows, fewer than the %d prompts one generation needs (GenerationBatchSize / NumGenerations): add rows or lower the batch", data.Len(), prompts)
	}
	s := &Sampler{data: data, prompts: prompts}
	if data != nil {
		s.order = newEpochOrder(data.Len(), seed, shuffle)
	}
	return s, nil
}

// GenerationsPerEpoch is the number of generations one pass over the
// dataset feeds (rows / prompts, rounded down); 0 without a dataset.
func (s *Sampler) GenerationsPerEpoch() int {
	if s.data == nil {
		return 0
	}
	return s.data.Len() / s.prompts
}

// Epochs is the data drawn so far in epochs, fractional as Hugging Face
// logs "epoch": 0.5 after the first of two generations an epoch feeds, 1
// after the second. An epoch is the generations that fit: with 10 rows and
// 4 prompts per generation, 2 generations of 8 rows, the 2 rows left over
// sitting out (different ones each epoch when shuffled). -1 without a
// dataset.
func (s *Sampler) Epochs() float64 {
	g := s.GenerationsPerEpoch()
	if g == 0 {
		return -1
	}
	return float64(s.pos.Epoch) + float64(s.pos.Index)/float64(g*s.prompts)
}

// Position returns where the sampler stands.
func (s *Sampler) Position() Position { return s.pos }

// SetPosition moves the sampler to p, as saved by Position.
func (s *Sampler) SetPosition(p Position) error {
	if p.Epoch < 0 || p.Index < 0 {
		return fmt.Errorf("grpo: sampler position %+v is negative", p)
	}
	if s.data != nil && p.Index > s.GenerationsPerEpoch()*s.prompts {
		return fmt.Errorf("grpo: sampler position %+v is past the %d rows an epoch uses", p, s.GenerationsPerEpoch()*s.prompts)
	}
	s.pos = p
	return nil
}

// Next returns the next generation's prompts rows, each a shallow copy of
// its dataset row, moving to the next epoch when the current one has no
// whole chunk left.
func (s *Sampler) Next() []env.Row {
	rows := make([]env.Row, s.prompts)
	if s.data == nil {
		for i := range rows {
			rows[i] = env.Row{}
		}
		s.pos.Index += s.prompts
		return rows
	}
	if s.pos.Index+s.prompts > s.data.Len() {
		s.pos = Position{Epoch: s.pos.Epoch + 1}
	}
	order := s.order.of(s.pos.Epoch)
	for i := range rows {
		rows[i] = maps.Clone(s.data.Row(order[s.pos.Index+i]))
		if rows[i] == nil {
			rows[i] = env.Row{}
		}
	}
	s.pos.Index += s.prompts
	return rows
}

// epochOrder is the package's one shuffler, of GRPO's prompts (Sampler)
// and SFT's conversations alike: epoch e's order of n items is a
// permutation drawn from (seed, e), or the identity without shuffling, so
// an epoch and a position in it are all a resume needs.
type epochOrder struct {
	n       int
	seed    uint64
	shuffle bool
	epoch   int
	perm    []int // epoch's order
}

func newEpochOrder(n int, seed uint64, shuffle bool) *epochOrder {
	return &epochOrder{n: n, seed: seed, shuffle: shuffle, epoch: -1}
}

// of returns epoch e's order (the caller must not change it).
func (o *epochOrder) of(e int) []int {
	if e == o.epoch {
		return o.perm
	}
	o.epoch = e
	if o.shuffle {
		o.perm = rand.New(rand.NewPCG(o.seed, uint64(e))).Perm(o.n)
		return o.perm
	}
	o.perm = make([]int, o.n)
	for i := range o.perm {
		o.perm[i] = i
	}
	return o.perm
}

// at returns the item at position pos of the stream of epochs, one after
// the other (SFT's order: a step that runs past an epoch's end goes on
// into the next).
func (o *epochOrder) at(pos int) int {
	return o.of(pos / o.n)[pos%o.n]
}

// TotalSteps is the run's length in optimizer steps: MaxSteps if set, else
// NumEpochs × the generations an epoch of data feeds × the optimizer steps
// of each generation. Without a dataset (data nil) MaxSteps is required.
func TotalSteps(c Config, data Dataset) (int, error) {
	if c.MaxSteps > 0 {
		return c.MaxSteps, nil
	}
	if data == nil {
		return 0, errors.New("grpo: training without a dataset (prompts from the env's Reset) needs Config.MaxSteps > 0")
	}
	l := c.Layout()
	if l.Prompts < 1 {
		return 0, fmt.Errorf("grpo: the layout has %d prompts per generation; check Config.Validate", l.Prompts)
	}
	gens := data.Len() / l.Prompts
	if gens == 0 {
		return 0, fmt.Errorf("grpo: the dataset has %d rows, fewer than the %d prompts one generation needs", data.Len(), l.Prompts)
	}
	return c.NumEpochs * gens * l.OptimizerSteps(), nil
}
