package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/x/env/guess"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
	"github.com/x/tools"
)

// player is a tiny Qwen3 with its tokenizer and chat template, set up to
// play guess-the-number.
type player struct {
	backend *cpu.Backend
	model   *model.Model
	chat    *tokenizer.Chat
	rules   guess.Rules
	opts    tokenizer.RenderOptions // tools, no thinking, the prefix-preserving variant
	stop    []int32                 // <|im_end|>
	seed    uint64
	dir     string // the random checkpoint, removed by Close
}

// newPlayer writes a random tiny checkpoint sized to the embedded tokenizer
// and loads it.
func newPlayer(cfg config) (*player, error) {
	tok := tokenizer.Tiny()
	chat, err := tokenizer.NewChat(tok)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	mcfg, err := model.NamedConfig("tiny")
	if err != nil {
		return nil, err
	}
	mcfg.VocabSize = tok.VocabSize()
	mcfg.EOSTokenIDs = []int32{tok.EOS()}

	dir, err := os.MkdirTemp("", "guess-tiny-qwen3-")
	if err != nil {
		return nil, fmt.Errorf("temp dir for the checkpoint: %w", err)
	}
	p := &player{chat: chat, rules: guess.Rules{Max: cfg.Max}, stop: []int32{tok.EOS()}, seed: cfg.Seed, dir: dir}
	if err := model.WriteRandom(dir, mcfg, kernels.F32, cfg.Seed, model.RandomOptions{}); err != nil {
		p.Close()
		return nil, fmt.Errorf("write random checkpoint: %w", err)
	}
	p.backend = cpu.New(cfg.Threads)
	if p.model, err = model.Load(dir, p.backend); err != nil {
		p.Close()
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	set, err := tools.Discover(guess.NewEnv(p.rules, nil))
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("tools of the guess env: %w", err)
	}
	p.opts = tokenizer.RenderOptions{Tools: set.Schemas(), EnableThinking: tokenizer.ThinkingOff, KeepAllReasoning: true}
	return p, nil
}

// Close releases the model, the backend's workers and the temporary files.
func (p *player) Close() {
	if p.model != nil {
		p.model.Close()
	}
	if p.backend != nil {
		p.backend.Close()
	}
	os.RemoveAll(p.dir)
}

// save writes the model and its tokenizer as a Hugging Face folder.
func (p *player) save(dir string) error {
	if err := model.SaveCheckpoint(dir, p.model); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokenizer.TinyJSON(), 0o644); err != nil {
		return fmt.Errorf("save tokenizer: %w", err)
	}
	return nil
}

// promptIDs renders the first user turn (the game's intro) with the tools
// and the generation prompt.
func (p *player) promptIDs(intro string) ([]int32, error) {
	o := p.opts
	o.AddGenerationPrompt = true
	return p.chat.RenderIDs([]tokenizer.Message{{Role: "user", Content: intro}}, o)
}

// numParams counts the weights of a Qwen3 of shape c.
func numParams(c model.Config) int {
	perLayer := c.HiddenSize*c.QDim() + 2*c.HiddenSize*c.KVDim() + c.QDim()*c.HiddenSize + // q, k, v, o
		3*c.HiddenSize*c.IntermediateSize + // gate, up, down
		2*c.HiddenSize + 2*c.HeadDim // the two layer norms, q_norm, k_norm
	n := c.VocabSize*c.HiddenSize + c.NumLayers*perLayer + c.HiddenSize
	if !c.TieWordEmbeddings {
		n += c.VocabSize * c.HiddenSize
	}
	return n
}
