package grpo

import (
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/model"
)

type testState struct {
	Generation int `json:"generation"`
	DataPos    int `json:"data_pos"`
}

// trainedWeights loads the tiny model, with adapters when lora is set,
// and takes two optimizer steps on made-up gradients so that the params
// and the optimizer's moments are not at their initial values.
func trainedWeights(t *testing.T, dir string, lora *model.LoRAConfig, gradSeed float32) CheckpointWeights {
	return trainedWeightsOf(t, loadTiny(t, dir), lora, gradSeed)
}

// trainedWeightsOf is trainedWeights on the model m.
func trainedWeightsOf(t *testing.T, m *model.Model, lora *model.LoRAConfig, gradSeed float32) CheckpointWeights {
	if lora != nil {
		require.NoError(t, model.AttachLoRA(m, *lora, 1))
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: lora == nil})
	require.NoError(t, err)
	opt, err := model.NewAdamW(m.Backend, tr.Params(), model.DefaultAdamWConfig(1e-3))
	require.NoError(t, err)
	for range 2 {
		for _, p := range tr.Params() {
			for i := range p.Grad.Len() {
				p.Grad.F32()[i] = float32(math.Sin(float64(gradSeed) + float64(i)))
			}
		}
		_, err := opt.Step()
		require.NoError(t, err)
	}
	return CheckpointWeights{Model: m, Params: tr.Params(), LoRA: lora, Optimizer: opt}
}

func paramData(w CheckpointWeights) [][]float32 {
	var out [][]float32
	for _, p := range w.Params {
		out = append(out, slices.Clone(p.Data.F32()))
	}
	return out
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := tinyModelDir(t)
	for _, lora := range []*model.LoRAConfig{{R: 4, Alpha: 8}, nil} {
		name := "full"
		if lora != nil {
			name = "lora"
		}
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			src := trainedWeights(t, dir, lora, 1)
			path, err := SaveCheckpoint(out, 7, 0, src, testState{Generation: 3, DataPos: 12}, map[string]int{"seed": 42})
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(out, "checkpoint-7"), path)
			if lora != nil {
				_, err := model.LoadAdapter(path, loadTiny(t, dir))
				require.NoError(t, err, "the folder is a PEFT adapter")
			} else {
				_, err := model.Load(path, loadTiny(t, dir).Backend)
				require.NoError(t, err, "the folder is a Hugging Face checkpoint")
			}

			dst := trainedWeights(t, dir, lora, 2) // other values, other moments
			var st testState
			step, err := LoadCheckpoint(path, dst, &st)
			require.NoError(t, err)
			assert.Equal(t, 7, step)
			assert.Equal(t, testState{Generation: 3, DataPos: 12}, st)
			want, got := paramData(src), paramData(dst)
			require.Equal(t, len(want), len(got))
			for i := range want {
				require.True(t, slices.Equal(want[i], got[i]), "param %s restored bit for bit", dst.Params[i].Name)
			}
			// The optimizer state too: one more identical step stays identical.
			for _, w := range []CheckpointWeights{src, dst} {
				for _, p := range w.Params {
					for i := range p.Grad.Len() {
						p.Grad.F32()[i] = float32(math.Cos(float64(i)))
					}
				}
				_, err := w.Optimizer.Step()
				require.NoError(t, err)
			}
			assert.Equal(t, src.Optimizer.Steps(), dst.Optimizer.Steps())
			want, got = paramData(src), paramData(dst)
			for i := range want {
				require.True(t, slices.Equal(want[i], got[i]), "param %s after one more step", dst.Params[i].Name)
			}
		})
	}
}

func TestCheckpointKeepAndLatest(t *testing.T) {
	out := t.TempDir()
	w := trainedWeights(t, tinyModelDir(t), &model.LoRAConfig{R: 2, Alpha: 2}, 1)
	_, err := LatestCheckpoint(out)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	for _, step := range []int{5, 10, 15, 20} {
		_, err := SaveCheckpoint(out, step, 2, w, nil, nil)
		require.NoError(t, err)
	}
	// Saving a step again replaces that checkpoint whole.
	_, err = SaveCheckpoint(out, 20, 2, w, testState{DataPos: 99}, nil)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(out, "checkpoint-x"), 0o755)) // not a checkpoint
	cks, err := Checkpoints(out)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(out, "checkpoint-15"), filepath.Join(out, "checkpoint-20")}, cks)
	latest, err := LatestCheckpoint(out)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(out, "checkpoint-20"), latest)
	var st testState
	_, err = LoadCheckpoint(latest, w, &st)
	require.NoError(t, err)
	assert.Equal(t, 99, st.DataPos)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".tmp", "no temporary folder left")
	}
}

// TestCheckpointTempsRemoved: the folders of checkpoints a killed run left
// unfinished go when SaveTotalLimit prunes; other hidden entries stay.
func TestCheckpointTempsRemoved(t *testing.T) {
	out := t.TempDir()
	w := trainedWeights(t, tinyModelDir(t), &model.LoRAConfig{R: 2, Alpha: 2}, 1)
	left := []string{".checkpoint-4.tmp1234", ".checkpoint-4.tmp99.old", ".checkpoint-12.tmpx"}
	for _, name := range left {
		require.NoError(t, os.MkdirAll(filepath.Join(out, name, "sub"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(out, name, "adapter_model.safetensors"), []byte("half"), 0o644))
	}
	kept := []string{".checkpoint-x.tmp1", ".cache", ".checkpoint-4"}
	for _, name := range kept {
		require.NoError(t, os.Mkdir(filepath.Join(out, name), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, ".checkpoint-5.tmp7"), nil, 0o644)) // a file, not ours

	_, err := SaveCheckpoint(out, 5, 0, w, nil, nil)
	require.NoError(t, err)
	assert.DirExists(t, filepath.Join(out, left[0]), "without a limit nothing is pruned")
	_, err = SaveCheckpoint(out, 6, 2, w, nil, nil)
	require.NoError(t, err)
	for _, name := range left {
		assert.NoDirExists(t, filepath.Join(out, name))
	}
	for _, name := range kept {
		assert.DirExists(t, filepath.Join(out, name))
	}
	assert.FileExists(t, filepath.Join(out, ".checkpoint-5.tmp7"))
}

func TestCheckpointErrors(t *testing.T) {
	dir := tinyModelDir(t)
	out := t.TempDir()
	lora := trainedWeights(t, dir, &model.LoRAConfig{R: 4, Alpha: 8}, 1)
	path, err := SaveCheckpoint(out, 1, 0, lora, testState{DataPos: 5}, nil)
	require.NoError(t, err)

	_, err = SaveCheckpoint("", 1, 0, lora, nil, nil)
	assert.ErrorContains(t, err, "no output folder")
	_, err = SaveCheckpoint(out, 2, 0, lora, func() {}, nil)
	assert.ErrorContains(t, err, "trainer state")

	tests := []struct {
		name string
		w    CheckpointWeights
		want string
	}{
		{"full run from a LoRA checkpoint", trainedWeights(t, dir, nil, 1), "saved by lora training, resuming full training"},
		{"other rank", trainedWeights(t, dir, &model.LoRAConfig{R: 2, Alpha: 8}, 1), "r=4 alpha=8"},
		{"other alpha", trainedWeights(t, dir, &model.LoRAConfig{R: 4, Alpha: 16}, 1), "this run has r=4 alpha=16"},
		{"fewer targets", trainedWeights(t, dir, &model.LoRAConfig{R: 4, Alpha: 8, Targets: []string{"q_proj"}}, 1), "not a trained parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := paramData(tt.w)
			steps := tt.w.Optimizer.Steps()
			st := testState{DataPos: -1}
			_, err := LoadCheckpoint(path, tt.w, &st)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, before, paramData(tt.w), "params unchanged")
			assert.Equal(t, steps, tt.w.Optimizer.Steps(), "optimizer unchanged")
			assert.Equal(t, -1, st.DataPos, "state unchanged")
		})
	}

	t.Run("state of another type", func(t *testing.T) {
		var wrong struct {
			DataPos string `json:"data_pos"`
		}
		before := paramData(lora)
		_, err := LoadCheckpoint(path, lora, &wrong)
		require.Error(t, err)
		assert.ErrorContains(t, err, "trainer state")
		assert.Equal(t, before, paramData(lora))
	})
	t.Run("state not a pointer", func(t *testing.T) {
		_, err := LoadCheckpoint(path, lora, testState{})
		assert.ErrorContains(t, err, "non-nil pointer")
	})
	t.Run("corrupt trainer_state.json", func(t *testing.T) {
		bad := t.TempDir()
		require.NoError(t, os.CopyFS(bad, os.DirFS(path)))
		require.NoError(t, os.WriteFile(filepath.Join(bad, TrainerStateFile), []byte("{"), 0o644))
		_, err := LoadCheckpoint(bad, lora, nil)
		assert.ErrorContains(t, err, TrainerStateFile)
	})
	t.Run("missing folder", func(t *testing.T) {
		_, err := LoadCheckpoint(filepath.Join(out, "checkpoint-99"), lora, nil)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	var st trainerStateFile
	data, err := os.ReadFile(filepath.Join(path, TrainerStateFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	assert.Equal(t, 1, st.Step)
	assert.Equal(t, "lora", st.Mode)
}

// TestConfigDiffAcrossRenames: a checkpoint written before the IS
// correction's settings took TRL's names (importance_sampling_correction,
// importance_sampling_cap) and before off_policy_mask_threshold,
// vllm_importance_sampling_clip_min and max_staleness existed differs
// from the same run's settings today in nothing; a setting changed since
// is still named.
func TestConfigDiffAcrossRenames(t *testing.T) {
	data, err := json.Marshal(DefaultConfig())
	require.NoError(t, err)
	var old map[string]any
	require.NoError(t, json.Unmarshal(data, &old))
	old["importance_sampling_correction"], old["importance_sampling_cap"] = old["vllm_importance_sampling_mode"], old["vllm_importance_sampling_clip_max"]
	for _, k := range []string{"vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min", "off_policy_mask_threshold", "max_staleness"} {
		delete(old, k)
	}
	cfgJSON, err := json.Marshal(old)
	require.NoError(t, err)
	file, err := json.Marshal(trainerStateFile{Step: 2, Mode: "lora", State: json.RawMessage(`{}`), Config: cfgJSON})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, TrainerStateFile), file, 0o644))

	assert.Empty(t, configDiff(dir, DefaultConfig()), "nothing changed")
	cfg := DefaultConfig()
	cfg.ISCorrectionClipMax, cfg.MaxStaleness = 5, 1
	assert.Equal(t, []string{"max_staleness", "vllm_importance_sampling_clip_max"}, configDiff(dir, cfg))
}
