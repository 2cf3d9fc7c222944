package warmstart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// Policy is a model with its tokenizer: what GRPO trains.
type Policy struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	// TokenizerJSON is the tokenizer.json Save writes beside the model.
	TokenizerJSON []byte
	// Dir is the checkpoint folder the model was loaded from (the embedded
	// model's is a temporary folder that Close removes).
	Dir string
	// Description says what the model is, for a log line.
	Description string

	embedded bool
	backend  *cpu.Backend // made by Load (a nil backend), closed by Close
}

// Options choose the model Load loads. The zero value is the embedded
// model.
type Options struct {
	// Dir is a Hugging Face Qwen3 folder (config.json, *.safetensors,
	// tokenizer.json); "" means the embedded model: a Qwen3 of the "tiny"
	// shape (4 layers, hidden 128) with random weights, sized to the
	// embedded 4,096-token tokenizer (tokenizer.Tiny). Nothing is
	// downloaded.
	Dir string
	// Hidden is the embedded model's hidden size, a multiple of 32 (0:
	// 128); its MLP is three times as wide.
	Hidden int
	// Seed seeds the embedded model's random weights.
	Seed uint64
}

// Load loads the model and its tokenizer on be (nil: a CPU backend on every
// core, which Close closes). Close releases them.
func Load(o Options, be kernels.Backend) (*Policy, error) {
	var own *cpu.Backend
	if be == nil {
		own = cpu.New(0)
		be = own
	}
	p, err := load(o, be)
	if err != nil {
		if own != nil {
			own.Close()
		}
		return nil, err
	}
	p.backend = own
	return p, nil
}

func load(o Options, be kernels.Backend) (*Policy, error) {
	if o.Dir != "" {
		m, err := model.Load(o.Dir, be) // says what a folder that is not a checkpoint lacks
		if err != nil {
			return nil, err
		}
		tokJSON, err := os.ReadFile(filepath.Join(o.Dir, "tokenizer.json"))
		if errors.Is(err, os.ErrNotExist) {
			m.Close()
			return nil, fmt.Errorf("model folder %s has no tokenizer.json (a Hugging Face Qwen3 folder has one beside config.json)", o.Dir)
		}
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("model folder %s: %w", o.Dir, err)
		}
		tok, err := tokenizer.Parse(tokJSON)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("model folder %s: tokenizer.json: %w", o.Dir, err)
		}
		return &Policy{Model: m, Tokenizer: tok, TokenizerJSON: tokJSON, Dir: o.Dir,
			Description: fmt.Sprintf("%s (%d layers, hidden %d)", o.Dir, m.Config.NumLayers, m.Config.HiddenSize)}, nil
	}
	if o.Hidden < 0 || o.Hidden%32 != 0 {
		return nil, fmt.Errorf("embedded model: hidden size %d: want a multiple of 32 (the head size), 0 for 128", o.Hidden)
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
	dir, err := os.MkdirTemp("", "warmstart-qwen3-")
	if err != nil {
		return nil, fmt.Errorf("temporary folder for the embedded model: %w", err)
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
	return &Policy{Model: m, Tokenizer: tok, TokenizerJSON: tokenizer.TinyJSON(), Dir: dir, embedded: true,
		Description: fmt.Sprintf("embedded Qwen3, %d layers, hidden %d, vocab %d (the tiny tokenizer), %.2fM parameters, random weights (seed %d)",
			cfg.NumLayers, cfg.HiddenSize, cfg.VocabSize, float64(Params(cfg))/1e6, o.Seed)}, nil
}

// Embedded reports whether the model is the embedded one.
func (p *Policy) Embedded() bool { return p.embedded }

// Close releases the model, the embedded model's temporary folder and the
// backend Load made.
func (p *Policy) Close() {
	p.Model.Close()
	if p.embedded {
		os.RemoveAll(p.Dir)
	}
	if p.backend != nil {
		p.backend.Close()
	}
}

// Save writes the model (its weights, adapters not included: merge them
// first, as SFT does) and its tokenizer as a Hugging Face folder, which
// Load reads back.
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
