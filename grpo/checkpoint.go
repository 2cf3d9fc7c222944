package grpo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/x/internal/atomicfile"
	"github.com/x/kernels"
	"github.com/x/model"
)

// Checkpoint folder layout, after the transformers Trainer's: OutputDir/
// checkpoint-<step>/ holds the weights (adapter_config.json and
// adapter_model.safetensors, a PEFT folder that PEFT and vLLM load; or
// config.json and model.safetensors after full fine-tuning), the
// optimizer's moments and step (optimizer.safetensors) and
// trainer_state.json (step, the trainer's state, the config).
const (
	CheckpointPrefix   = "checkpoint-"
	OptimizerStateFile = "optimizer.safetensors"
	TrainerStateFile   = "trainer_state.json"
	modelWeightsFile   = "model.safetensors"
	// checkpointTempInfix follows ".checkpoint-<step>" in the name of the
	// folder a checkpoint is written into before it is renamed.
	checkpointTempInfix = ".tmp"
)

// CheckpointWeights is what a checkpoint saves and restores besides the
// trainer's own state: the parameters being trained (restored in place,
// by name, bit for bit) and the optimizer.
type CheckpointWeights struct {
	Model *model.Model
	// Params are the Trainable's parameters (Trainable.Params): PEFT names
	// for adapters, Hugging Face names in full fine-tuning.
	Params []model.Param
	// LoRA is the adapters' config; nil means full fine-tuning, saved as a
	// whole Hugging Face checkpoint.
	LoRA      *model.LoRAConfig
	BaseModel string       // recorded in adapter_config.json
	Optimizer *model.AdamW // nil: no optimizer state saved or loaded
	// Snapshots are adapter snapshots by policy version that asynchronous
	// training still samples or learns with (Config.MaxStaleness), saved
	// as policy_version_<v>.safetensors (SnapshotFile); LoadCheckpoint
	// leaves them to Trainer.Resume.
	Snapshots map[int]*model.AdapterSnapshot
}

// SnapshotFile is the file name of the adapter snapshot of policy version
// v in a checkpoint (see CheckpointWeights.Snapshots).
func SnapshotFile(v int) string { return fmt.Sprintf("policy_version_%d.safetensors", v) }

// trainerStateFile is trainer_state.json.
type trainerStateFile struct {
	Step   int             `json:"global_step"`
	Mode   string          `json:"mode"` // "lora" or "full"
	State  json.RawMessage `json:"state,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

func (w CheckpointWeights) mode() string {
	if w.LoRA != nil {
		return "lora"
	}
	return "full"
}

// SaveCheckpoint writes OutputDir/checkpoint-<step>/ with the weights,
// the optimizer state, and state and cfg (any JSON-marshalable values,
// e.g. the Trainer's TrainerState and Config) in trainer_state.json. The
// folder appears whole or not at all: it is written under a temporary name
// and renamed, replacing an older checkpoint of the same step. With keep
// > 0 only the newest keep checkpoints remain afterwards. It returns the
// folder's path.
func SaveCheckpoint(outputDir string, step, keep int, w CheckpointWeights, state, cfg any) (dir string, err error) {
	if outputDir == "" {
		return "", errors.New("save checkpoint: no output folder (set OutputDir)")
	}
	if step < 0 || keep < 0 {
		return "", fmt.Errorf("save checkpoint: step %d and keep %d must be >= 0", step, keep)
	}
	if w.Model == nil {
		return "", errors.New("save checkpoint: no model")
	}
	st := trainerStateFile{Step: step, Mode: w.mode()}
	if st.State, err = marshalOptional(state); err != nil {
		return "", fmt.Errorf("save checkpoint: trainer state: %w", err)
	}
	if st.Config, err = marshalOptional(cfg); err != nil {
		return "", fmt.Errorf("save checkpoint: config: %w", err)
	}
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	name := CheckpointPrefix + strconv.Itoa(step)
	tmp, err := atomicfile.MkdirTemp(outputDir, "."+name+checkpointTempInfix)
	if err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if w.LoRA != nil {
		err = model.SaveAdapter(tmp, w.Model, *w.LoRA, w.BaseModel)
	} else {
		err = model.SaveCheckpoint(tmp, w.Model)
	}
	if err != nil {
		return "", fmt.Errorf("save checkpoint %d: %w", step, err)
	}
	if w.Optimizer != nil {
		if err := w.Optimizer.SaveState(filepath.Join(tmp, OptimizerStateFile)); err != nil {
			return "", fmt.Errorf("save checkpoint %d: %w", step, err)
		}
	}
	for v, snap := range w.Snapshots {
		if err := snap.Save(filepath.Join(tmp, SnapshotFile(v))); err != nil {
			return "", fmt.Errorf("save checkpoint %d: policy version %d: %w", step, v, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, TrainerStateFile), append(js, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("save checkpoint %d: %w", step, err)
	}
	if err := syncTree(tmp); err != nil {
		return "", fmt.Errorf("save checkpoint %d: %w", step, err)
	}
	dir = filepath.Join(outputDir, name)
	if err := replaceDir(tmp, dir); err != nil {
		return "", fmt.Errorf("save checkpoint %d: %w", step, err)
	}
	if keep > 0 {
		if err := pruneCheckpoints(outputDir, keep); err != nil {
			return dir, fmt.Errorf("save checkpoint %d: %w", step, err)
		}
	}
	return dir, nil
}

func marshalOptional(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// syncTree flushes every file of a freshly written folder, and the
// folder, to disk, so that after the rename a crash cannot leave a
// checkpoint whose files are empty.
func syncTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := syncPath(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return syncPath(dir)
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// replaceDir renames tmp to dir, moving an existing dir aside first and
// removing it only once tmp is in place.
func replaceDir(tmp, dir string) error {
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			os.Rename(old, dir)
		}
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	}
	// The rename itself lives in the parent folder's entries.
	return syncPath(filepath.Dir(dir))
}

// checkpointStep parses "checkpoint-<step>".
func checkpointStep(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, CheckpointPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

// Checkpoints lists the checkpoint folders under outputDir, oldest step
// first. A missing outputDir has none.
func Checkpoints(outputDir string) ([]string, error) {
	entries, err := os.ReadDir(outputDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	type ck struct {
		step int
		path string
	}
	var cks []ck
	for _, e := range entries {
		if n, ok := checkpointStep(e.Name()); ok && e.IsDir() {
			cks = append(cks, ck{n, filepath.Join(outputDir, e.Name())})
		}
	}
	slices.SortFunc(cks, func(a, b ck) int { return a.step - b.step })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.path
	}
	return out, nil
}

// LatestCheckpoint returns the newest checkpoint folder under outputDir;
// if there is none the error wraps fs.ErrNotExist.
func LatestCheckpoint(outputDir string) (string, error) {
	cks, err := Checkpoints(outputDir)
	if err != nil {
		return "", err
	}
	if len(cks) == 0 {
		return "", fmt.Errorf("no %s<step> folder in %q: %w", CheckpointPrefix, outputDir, fs.ErrNotExist)
	}
	return cks[len(cks)-1], nil
}

// pruneCheckpoints keeps the newest keep checkpoints under outputDir and
// removes the temporary folders of checkpoints a killed run never
// finished (removeCheckpointTemps).
func pruneCheckpoints(outputDir string, keep int) error {
	if err := removeCheckpointTemps(outputDir); err != nil {
		return err
	}
	cks, err := Checkpoints(outputDir)
	if err != nil {
		return err
	}
	for len(cks) > keep {
		if err := os.RemoveAll(cks[0]); err != nil {
			return fmt.Errorf("remove old checkpoint: %w", err)
		}
		cks = cks[1:]
	}
	return nil
}

// removeCheckpointTemps removes the folders SaveCheckpoint writes a
// checkpoint into before renaming it (".checkpoint-<step>.tmp…", and the
// ".old" an older checkpoint of that step is moved to): one is left over
// only when the process died while saving, and a full fine-tune's is as
// big as the model. Only the run writing into outputDir may call it: it
// would remove another writer's checkpoint in progress. A missing
// outputDir has none.
func removeCheckpointTemps(outputDir string) error {
	entries, err := os.ReadDir(outputDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "."+CheckpointPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if step, _, ok := strings.Cut(rest, checkpointTempInfix); ok {
			if _, ok := checkpointStep(CheckpointPrefix + step); ok {
				if err := os.RemoveAll(filepath.Join(outputDir, e.Name())); err != nil {
					return fmt.Errorf("remove an unfinished checkpoint: %w", err)
				}
			}
		}
	}
	return nil
}

// LoadCheckpoint restores a checkpoint written by SaveCheckpoint: it
// uploads every saved parameter into w.Params by name (bit for bit; the
// file must hold exactly these parameters, as float32), loads the
// optimizer's moments and step into w.Optimizer, and decodes the saved
// trainer state into state (a pointer, or nil to skip it). Everything is
// read and checked before anything changes, so on error w and state are as
// they were; only a failing backend transfer (a device error while
// uploading the moments or the parameters) can leave w partly restored,
// and state is then still as it was. It returns the checkpoint's step.
func LoadCheckpoint(dir string, w CheckpointWeights, state any) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, TrainerStateFile))
	if err != nil {
		return 0, fmt.Errorf("load checkpoint: %w", err)
	}
	var st trainerStateFile
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("load checkpoint %s: %s: %w", dir, TrainerStateFile, err)
	}
	if len(w.Params) > 0 && (w.Model == nil || w.Model.Backend == nil) {
		return 0, errors.New("load checkpoint: no model (with a backend) to restore the parameters into")
	}
	if st.Mode != w.mode() {
		return 0, fmt.Errorf("load checkpoint %s: saved by %s training, resuming %s training", dir, st.Mode, w.mode())
	}
	weights := filepath.Join(dir, modelWeightsFile)
	if w.LoRA != nil {
		weights = filepath.Join(dir, model.AdapterWeightsFile)
		if err := checkAdapterConfig(filepath.Join(dir, model.AdapterConfigFile), *w.LoRA); err != nil {
			return 0, fmt.Errorf("load checkpoint %s: %w", dir, err)
		}
	}
	values, err := readParams(weights, w.Params)
	if err != nil {
		return 0, fmt.Errorf("load checkpoint %s: %w", dir, err)
	}
	// Decode the state into a fresh value, so a bad state leaves *state alone.
	var decoded reflect.Value
	if state != nil && len(st.State) > 0 {
		rv := reflect.ValueOf(state)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			return 0, fmt.Errorf("load checkpoint: state must be a non-nil pointer, got %T", state)
		}
		decoded = reflect.New(rv.Elem().Type())
		if err := json.Unmarshal(st.State, decoded.Interface()); err != nil {
			return 0, fmt.Errorf("load checkpoint %s: trainer state: %w", dir, err)
		}
	}
	if w.Optimizer != nil {
		if err := w.Optimizer.LoadState(filepath.Join(dir, OptimizerStateFile)); err != nil {
			return 0, fmt.Errorf("load checkpoint %s: %w", dir, err)
		}
	}
	// The parameters' values live in the backend's memory (the Buffers the
	// forward reads and AdamW updates): each goes up in one Upload.
	for i, p := range w.Params {
		if err := w.Model.Backend.Upload(p.Data, kernels.HostF32(values[i])); err != nil {
			return 0, fmt.Errorf("load checkpoint %s: uploading %s: %w", dir, p.Name, err)
		}
	}
	if decoded.IsValid() { // last: nothing can fail after it
		reflect.ValueOf(state).Elem().Set(decoded.Elem())
	}
	return st.Step, nil
}

// readParams reads one float32 slice per param from a safetensors file
// that must hold exactly those tensors.
func readParams(path string, params []model.Param) ([][]float32, error) {
	f, err := model.OpenSafetensors(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := make(map[string]bool, len(params))
	out := make([][]float32, len(params))
	for i, p := range params {
		want[p.Name] = true
		t, ok := f.Tensor(p.Name)
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %s (saved for a different model or adapter?)", path, p.Name)
		}
		if t.DType != "F32" {
			return nil, fmt.Errorf("%s: tensor %s is %s, not F32: it cannot be restored bit for bit", path, p.Name, t.DType)
		}
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != p.Data.Len() {
			return nil, fmt.Errorf("%s: tensor %s has shape %v (%d values), the parameter has %d", path, p.Name, t.Shape, n, p.Data.Len())
		}
		if out[i], err = f.Float32s(p.Name, t.Shape...); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for j, v := range out[i] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%s: tensor %s holds %v at %d", path, p.Name, v, j)
			}
		}
	}
	for _, t := range f.Header.Tensors {
		if !want[t.Name] {
			return nil, fmt.Errorf("%s: tensor %s is not a trained parameter of this run", path, t.Name)
		}
	}
	return out, nil
}

// checkAdapterConfig compares the saved adapter's rank and scaling with
// the run's: the same tensors under another alpha would train differently.
func checkAdapterConfig(path string, cfg model.LoRAConfig) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var saved struct {
		R      int     `json:"r"`
		Alpha  float64 `json:"lora_alpha"`
		RSLoRA bool    `json:"use_rslora"`
	}
	if err := json.Unmarshal(data, &saved); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if saved.R != cfg.R || saved.Alpha != cfg.Alpha || saved.RSLoRA != cfg.RSLoRA {
		return fmt.Errorf("%s: adapter r=%d alpha=%v rslora=%v, this run has r=%d alpha=%v rslora=%v",
			path, saved.R, saved.Alpha, saved.RSLoRA, cfg.R, cfg.Alpha, cfg.RSLoRA)
	}
	return nil
}

// --- the Trainer's checkpoints ---

// SaveCheckpoint writes the run as it stands into
// Config.OutputDir/checkpoint-<global step>/ (the package-level
// SaveCheckpoint: weights, optimizer, TrainerState, Config), keeping the
// newest Config.SaveTotalLimit checkpoints, and returns the folder. Train
// calls it every Config.SaveSteps optimizer steps.
func (t *Trainer) SaveCheckpoint() (dir string, err error) {
	w := t.checkpointWeights()
	if t.async != nil {
		w.Snapshots = t.async.saved()
	}
	// The weights and snapshots are read on the backend, which an
	// asynchronous run's producer shares.
	err = t.pol.locked(func() (err error) {
		dir, err = SaveCheckpoint(t.cfg.OutputDir, t.state.GlobalStep, t.cfg.SaveTotalLimit, w, t.state, t.cfg)
		return err
	})
	return dir, err
}

// Resume restores a checkpoint written by SaveCheckpoint into the
// Trainer: the adapters (or weights), the optimizer and the TrainerState,
// so that training on from here takes the same steps, bit for bit, as the
// run that wrote it. Build the Trainer as that run was built (the same
// base model, LoRA config and Config): the checkpoint holds what training
// changed, and the base weights are also the KL reference, so resuming on
// a model loaded from the checkpoint folder would move the reference.
// dir "latest" means the newest checkpoint under Config.OutputDir. The
// temporary folders of checkpoints a killed run left unfinished under
// Config.OutputDir are removed. Settings that differ from the saved config are logged as a warning: the
// run then continues, but not as the original would have. On error the
// Trainer is unchanged, but for a device error while the weights were
// uploaded (see LoadCheckpoint).
func (t *Trainer) Resume(dir string) error {
	if dir == "latest" {
		var err error
		if dir, err = LatestCheckpoint(t.cfg.OutputDir); err != nil {
			return fmt.Errorf("grpo: resume: %w", err)
		}
	}
	w := t.checkpointWeights()
	if w.Optimizer == nil {
		return errors.New("grpo: resume: the trainer has no optimizer")
	}
	// Check the saved state before anything changes, so that SetState
	// cannot fail after the weights were restored.
	var st TrainerState
	if err := readTrainerState(dir, &st); err != nil {
		return fmt.Errorf("grpo: resume: %w", err)
	}
	if st.GlobalStep < 0 || st.Generation < 0 || st.DataPos < 0 || st.Epoch < 0 || st.NumTokens < 0 || st.Evaluations < 0 {
		return fmt.Errorf("grpo: resume %s: trainer state %+v has a negative counter", dir, st)
	}
	snaps, err := t.loadSnapshots(dir, st.GlobalStep)
	if err != nil {
		return fmt.Errorf("grpo: resume %s: %w", dir, err)
	}
	if err := t.pol.locked(func() error { _, err := LoadCheckpoint(dir, w, &st); return err }); err != nil {
		t.releaseSnapshots(snaps)
		return fmt.Errorf("grpo: resume: %w", err)
	}
	if err := t.SetState(st); err != nil {
		t.releaseSnapshots(snaps)
		return fmt.Errorf("grpo: resume %s: %w", dir, err)
	}
	t.releaseResumed()
	t.resumed = snaps
	if t.cfg.OutputDir != "" {
		if err := removeCheckpointTemps(t.cfg.OutputDir); err != nil {
			return fmt.Errorf("grpo: resume: %w", err)
		}
	}
	if diff := configDiff(dir, t.cfg); len(diff) > 0 && t.log != nil {
		t.log.Warn("resuming with settings that differ from the checkpoint's", "checkpoint", dir, "settings", diff)
	}
	return nil
}

// readTrainerState decodes the state saved in checkpoint dir into st and
// checks that it is at the checkpoint's step.
func readTrainerState(dir string, st *TrainerState) error {
	data, err := os.ReadFile(filepath.Join(dir, TrainerStateFile))
	if err != nil {
		return err
	}
	var f trainerStateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if len(f.State) == 0 {
		return fmt.Errorf("%s: no trainer state (not a GRPO checkpoint?)", dir)
	}
	if err := json.Unmarshal(f.State, st); err != nil {
		return fmt.Errorf("%s: trainer state: %w", dir, err)
	}
	if st.GlobalStep != f.Step {
		return fmt.Errorf("%s: trainer state at step %d, checkpoint of step %d", dir, st.GlobalStep, f.Step)
	}
	return nil
}

// configDiff names the settings of cfg that differ from those saved in
// checkpoint dir (none if it saved no config). A checkpoint written
// before a setting was renamed has it under its old name
// (oldConfigName); one written before a setting existed ran as its
// default does, which is what a missing setting is compared with.
func configDiff(dir string, cfg Config) []string {
	data, err := os.ReadFile(filepath.Join(dir, TrainerStateFile))
	if err != nil {
		return nil
	}
	var st trainerStateFile
	if json.Unmarshal(data, &st) != nil || len(st.Config) == 0 {
		return nil
	}
	now, err := json.Marshal(cfg)
	if err != nil {
		return nil
	}
	def, err := json.Marshal(DefaultConfig())
	if err != nil {
		return nil
	}
	var a, b, d map[string]any
	if json.Unmarshal(st.Config, &a) != nil || json.Unmarshal(now, &b) != nil || json.Unmarshal(def, &d) != nil {
		return nil
	}
	var diff []string
	for k, v := range b {
		old, ok := a[k]
		if !ok {
			old, ok = a[oldConfigName(k)]
		}
		if !ok {
			old, ok = d[k]
		}
		if !ok || !reflect.DeepEqual(old, v) {
			diff = append(diff, k)
		}
	}
	slices.Sort(diff)
	return diff
}

// oldConfigName is the JSON name a Config setting had in checkpoints
// written before it took TRL's ("" if it had no other).
func oldConfigName(name string) string {
	switch name {
	case "vllm_importance_sampling_mode":
		return "importance_sampling_correction"
	case "vllm_importance_sampling_clip_max":
		return "importance_sampling_cap"
	}
	return ""
}

// loadSnapshots reads the adapter snapshots an asynchronous run's
// checkpoint at step holds (SnapshotFile, versions below step), for Train
// to sample the generations in flight with again.
func (t *Trainer) loadSnapshots(dir string, step int) (map[int]*model.AdapterSnapshot, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	snaps := map[int]*model.AdapterSnapshot{}
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "policy_version_%d.safetensors", &v); err != nil || SnapshotFile(v) != e.Name() {
			continue
		}
		if v < 0 || v >= step || t.pol.lora == nil {
			t.releaseSnapshots(snaps)
			return nil, fmt.Errorf("%s: policy version %d does not fit a LoRA checkpoint at step %d", e.Name(), v, step)
		}
		s, err := t.pol.newSnapshot()
		if err == nil {
			err = t.pol.locked(func() error { return s.Load(filepath.Join(dir, e.Name())) })
			if err != nil {
				t.pol.releaseSnapshot(s)
			}
		}
		if err != nil {
			t.releaseSnapshots(snaps)
			return nil, err
		}
		snaps[v] = s
	}
	if len(snaps) == 0 {
		return nil, nil
	}
	return snaps, nil
}

// releaseSnapshots gives snapshots back.
func (t *Trainer) releaseSnapshots(snaps map[int]*model.AdapterSnapshot) {
	for _, s := range snaps {
		t.pol.releaseSnapshot(s)
	}
}

// releaseResumed drops snapshots a Resume read that no asynchronous run
// took.
func (t *Trainer) releaseResumed() {
	t.releaseSnapshots(t.resumed)
	t.resumed = nil
}
