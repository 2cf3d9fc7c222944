// Package policy loads the model an example trains: a Hugging Face Qwen3
// folder, or the embedded default, a small Qwen3 with random weights sized
// to the project's tiny tokenizer (no download).
package policy

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/x/kernels"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// Policy is a model with its tokenizer.
type Policy struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	// TokenizerJSON is the tokenizer.json the model is saved with.
	TokenizerJSON []byte
	// Dir is the checkpoint folder the model was loaded from.
	Dir string
	// Description says what the model is, for the log.
	Description string

	temp bool // Dir is ours to remove
}

// Options choose the model.
type Options struct {
	// Dir is a Hugging Face Qwen3 folder (config.json, *.safetensors,
	// tokenizer.json); "" means the embedded default.
	Dir string
	// Hidden is the embedded model's hidden size (0: 128, the "tiny"
	// shape); its MLP is three times as wide.
	Hidden int
	// Seed seeds the embedded model's random weights.
	Seed uint64
}

// Load loads the model on be. Close releases it.
func Load(o Options, be kernels.Backend) (*Policy, error) {
	if o.Dir != "" {
		tokJSON, err := os.ReadFile(filepath.Join(o.Dir, "tokenizer.json"))
		if err != nil {
			return nil, fmt.Errorf("model folder: %w", err)
		}
		tok, err := tokenizer.Parse(tokJSON)
		if err != nil {
			return nil, fmt.Errorf("model folder: tokenizer.json: %w", err)
		}
		m, err := model.Load(o.Dir, be)
		if err != nil {
			return nil, fmt.Errorf("model folder: %w", err)
		}
		return &Policy{Model: m, Tokenizer: tok, TokenizerJSON: tokJSON, Dir: o.Dir,
			Description: fmt.Sprintf("%s (%d layers, hidden %d)", o.Dir, m.Config.NumLayers, m.Config.HiddenSize)}, nil
	}
	if o.Hidden < 0 {
		return nil, fmt.Errorf("hidden size %d is negative", o.Hidden)
	}
	tok := tokenizer.Tiny()
	cfg, err := model.NamedConfig("tiny")
	if err != nil {
		return nil, err
	}
	// Sized to the tokenizer: its vocabulary, and <|im_end|> ends a turn.
	cfg.VocabSize = tok.VocabSize()
	cfg.EOSTokenIDs = []int32{tok.EOS()}
	if o.Hidden > 0 {
		cfg.HiddenSize, cfg.IntermediateSize = o.Hidden, 3*o.Hidden
	}
	dir, err := os.MkdirTemp("", "example-qwen3-")
	if err != nil {
		return nil, fmt.Errorf("temporary folder for the model: %w", err)
	}
	if err := model.WriteRandom(dir, cfg, kernels.F32, o.Seed, model.RandomOptions{}); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("write the embedded model: %w", err)
	}
	m, err := model.Load(dir, be)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("load the embedded model: %w", err)
	}
	return &Policy{Model: m, Tokenizer: tok, TokenizerJSON: tokenizer.TinyJSON(), Dir: dir, temp: true,
		Description: fmt.Sprintf("embedded Qwen3, %d layers, hidden %d, vocab %d (the tiny tokenizer), %.2fM parameters, random weights (seed %d)",
			cfg.NumLayers, cfg.HiddenSize, cfg.VocabSize, float64(Params(cfg))/1e6, o.Seed)}, nil
}

// Embedded reports whether the model is the embedded default.
func (p *Policy) Embedded() bool { return p.temp }

// Close releases the model and the embedded model's temporary folder.
func (p *Policy) Close() {
	p.Model.Close()
	if p.temp {
		os.RemoveAll(p.Dir)
	}
}

// Save writes the model (adapters not included) and its tokenizer as a
// Hugging Face folder.
func (p *Policy) Save(dir string) error {
	if err := model.SaveCheckpoint(dir, p.Model); err != nil {
		return fmt.Errorf("save the model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), p.TokenizerJSON, 0o644); err != nil {
		return fmt.Errorf("save the tokenizer: %w", err)
	}
	return nil
}

// Params counts the weights of a Qwen3 of shape c.
func Params(c model.Config) int {
	perLayer := c.HiddenSize*c.QDim() + 2*c.HiddenSize*c.KVDim() + c.QDim()*c.HiddenSize + // q, k, v, o
		3*c.HiddenSize*c.IntermediateSize + // gate, up, down
		2*c.HiddenSize + 2*c.HeadDim // the two layer norms, q_norm, k_norm
	n := c.VocabSize*c.HiddenSize + c.NumLayers*perLayer + c.HiddenSize
	if !c.TieWordEmbeddings {
		n += c.VocabSize * c.HiddenSize
	}
	return n
}
