package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// closers closes each in turn and joins their errors.
type closers []io.Closer

// Close closes every closer.
func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// backendCloser adapts a backend's Close() to io.Closer.
type backendCloser struct{ b *cpu.Backend }

// Close stops the backend's workers.
func (c backendCloser) Close() error {
	c.b.Close()
	return nil
}

// Load reads a Hugging Face Qwen3ForCausalLM folder: config.json and
// model.safetensors, or the shards named by model.safetensors.index.json.
// The files are memory-mapped and weights keep their stored dtype (F32,
// BF16 or F16); norm weights are copied to float32. Close releases the
// mappings. b runs every op; nil means a fast CPU backend using every core
// (cpu.New(0)), which the Model then owns and Close releases.
func Load(dir string, b kernels.Backend) (*Model, error) {
	if err := checkFolder(dir); err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	src, err := openWeights(dir)
	if err != nil {
		return nil, err
	}
	m, err := bind(cfg, src)
	if err != nil {
		_ = src.Close()
		return nil, fmt.Errorf("model: load %s: %w", dir, err)
	}
	m.closer = src
	if b == nil {
		c := cpu.New(0)
		b = c
		m.closer = closers{src, backendCloser{c}}
	}
	m.Backend = b
	if err := m.ImportWeights(); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("model: load %s: %w", dir, err)
	}
	return m, nil
}

// weightSet finds tensors across one or several safetensors files.
type weightSet struct {
	files  []*SafetensorsFile
	byName map[string]*SafetensorsFile
}

// Close unmaps every file.
func (s *weightSet) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

func (s *weightSet) file(name string) (*SafetensorsFile, error) {
	f, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s: missing", name)
	}
	return f, nil
}

func (s *weightSet) mat(name string, rows, cols int) (kernels.Mat, error) {
	f, err := s.file(name)
	if err != nil {
		return kernels.Mat{}, err
	}
	return f.Mat(name, rows, cols)
}

func (s *weightSet) vec(name string, n int) ([]float32, error) {
	f, err := s.file(name)
	if err != nil {
		return nil, err
	}
	return f.Float32s(name, n)
}

// openWeights opens model.safetensors, or every shard listed in
// model.safetensors.index.json.
func openWeights(dir string) (*weightSet, error) {
	s := &weightSet{byName: map[string]*SafetensorsFile{}}
	index := filepath.Join(dir, "model.safetensors.index.json")
	data, err := os.ReadFile(index)
	var shards []string
	var weightMap map[string]string
	switch {
	case err == nil:
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, fmt.Errorf("model: parse %s: %w", index, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("model: %s: empty weight_map", index)
		}
		weightMap = idx.WeightMap
		for name, shard := range idx.WeightMap {
			if shard == "" || filepath.Base(shard) != shard {
				return nil, fmt.Errorf("model: %s: tensor %s: bad shard file name %q", index, name, shard)
			}
			if !slices.Contains(shards, shard) {
				shards = append(shards, shard)
			}
		}
		slices.Sort(shards)
	case errors.Is(err, os.ErrNotExist):
		shards = []string{"model.safetensors"}
	default:
		return nil, fmt.Errorf("model: read %s: %w", index, err)
	}
	byShard := map[string]*SafetensorsFile{}
	for _, shard := range shards {
		f, err := OpenSafetensors(filepath.Join(dir, shard))
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("model: %w", err)
		}
		s.files = append(s.files, f)
		byShard[shard] = f
	}
	if weightMap == nil {
		for _, t := range s.files[0].Header.Tensors {
			s.byName[t.Name] = s.files[0]
		}
		return s, nil
	}
	for name, shard := range weightMap {
		f := byShard[shard]
		if _, ok := f.Tensor(name); !ok {
			_ = s.Close()
			return nil, fmt.Errorf("model: tensor %s: index names %s, which does not hold it", name, shard)
		}
		s.byName[name] = f
	}
	return s, nil
}

// bind looks up and shape-checks every weight of cfg in src.
func bind(cfg Config, src *weightSet) (*Model, error) {
	c, v, f, qd, kvd, d := cfg.HiddenSize, cfg.VocabSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim(), cfg.HeadDim
	m := &Model{Config: cfg, Layers: make([]Layer, cfg.NumLayers)}
	var errs []error
	mat := func(name string, rows, cols int) kernels.Mat {
		w, err := src.mat(name, rows, cols)
		if err != nil {
			errs = append(errs, err)
		}
		return w
	}
	vec := func(name string, n int) []float32 {
		w, err := src.vec(name, n)
		if err != nil {
			errs = append(errs, err)
		}
		return w
	}
	m.Embed = mat("model.embed_tokens.weight", v, c)
	m.Norm = vec("model.norm.weight", c)
	if cfg.TieWordEmbeddings {
		m.LMHead = m.Embed
	} else {
		m.LMHead = mat("lm_head.weight", v, c)
	}
	for i := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := &m.Layers[i]
		l.AttnNorm = vec(p+"input_layernorm.weight", c)
		l.MLPNorm = vec(p+"post_attention_layernorm.weight", c)
		l.Attn.QNorm = vec(p+"self_attn.q_norm.weight", d)
		l.Attn.KNorm = vec(p+"self_attn.k_norm.weight", d)
		l.Attn.Q.W = mat(p+"self_attn.q_proj.weight", qd, c)
		l.Attn.K.W = mat(p+"self_attn.k_proj.weight", kvd, c)
		l.Attn.V.W = mat(p+"self_attn.v_proj.weight", kvd, c)
		l.Attn.O.W = mat(p+"self_attn.o_proj.weight", c, qd)
		l.MLP.Gate.W = mat(p+"mlp.gate_proj.weight", f, c)
		l.MLP.Up.W = mat(p+"mlp.up_proj.weight", f, c)
		l.MLP.Down.W = mat(p+"mlp.down_proj.weight", c, f)
		if len(errs) > 0 {
			break
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	m.DType = m.Embed.DType
	return m, nil
}
