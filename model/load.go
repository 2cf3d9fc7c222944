package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/x/kernels"
)

// ErrNoBackend is Load's error for a nil Backend: the caller chooses where
// the model runs (kernels/cpu's cpu.New(0), or kernels/device's Open for
// "cpu", "cuda" or "cuda:N"), and owns and closes it.
var ErrNoBackend = errors.New("no backend: pass one, e.g. cpu.New(0) (kernels/cpu) or device.Open(\"cpu\") (kernels/device)")

// Load reads a Hugging Face Qwen3ForCausalLM folder: config.json and
// model.safetensors, or the shards named by model.safetensors.index.json.
// The files are memory-mapped and weights keep their stored dtype (F32,
// BF16 or F16); norm weights are copied to float32. Close releases the
// mappings. b runs every op and stays the caller's (Close does not close
// it); nil is ErrNoBackend.
func Load(dir string, b kernels.Backend) (*Model, error) {
	if b == nil {
		return nil, fmt.Errorf("model: load %s: %w", dir, ErrNoBackend)
	}
	if err := checkFolder(dir); err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if l, ok := b.(kernels.AttentionHeadDimLimiter); ok && cfg.HeadDim > l.MaxAttentionHeadDim() {
		return nil, fmt.Errorf("model: load %s: config head_dim = %d: this backend's attention takes head dims up to %d", dir, cfg.HeadDim, l.MaxAttentionHeadDim())
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

// unaccounted refuses a weights file holding tensors the config has no
// place for (layers past num_hidden_layers, say): loading it anyway would
// run a truncated model that nothing flags. It names the first few.
func (s *weightSet) unaccounted(used map[string]bool, cfg Config) error {
	var extra []string
	for name := range s.byName {
		if !used[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	slices.SortFunc(extra, compareTensorNames)
	const show = 8
	list := strings.Join(extra[:min(len(extra), show)], ", ")
	if len(extra) > show {
		list += fmt.Sprintf(" and %d more", len(extra)-show)
	}
	return fmt.Errorf("the weights hold %d tensor(s) that config.json (num_hidden_layers %d) does not account for: %s; "+
		"config.json and the weights do not describe the same model", len(extra), cfg.NumLayers, list)
}

// compareTensorNames orders names with their layer numbers as numbers
// (model.layers.2 before model.layers.10).
func compareTensorNames(a, b string) int {
	la, ra := layerOf(a)
	lb, rb := layerOf(b)
	if la != lb {
		return la - lb
	}
	return strings.Compare(ra, rb)
}

// layerOf splits "model.layers.N.rest" into N and rest; other names give
// -1 and the whole name.
func layerOf(name string) (int, string) {
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return -1, name
	}
	num, tail, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	if err != nil {
		return -1, name
	}
	return n, tail
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
	used := map[string]bool{}
	mat := func(name string, rows, cols int) kernels.Mat {
		used[name] = true
		w, err := src.mat(name, rows, cols)
		if err != nil {
			errs = append(errs, err)
		}
		return w
	}
	vec := func(name string, n int) []float32 {
		used[name] = true
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
		if _, err := src.file("lm_head.weight"); err == nil {
			// Stored beside tied embeddings: Hugging Face re-ties it after
			// loading, so it is ignored, once its shape is checked.
			_ = mat("lm_head.weight", v, c)
		}
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
	if err := src.unaccounted(used, cfg); err != nil {
		return nil, err
	}
	m.DType = m.Embed.DType
	return m, nil
}
