package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/x/kernels"
)

// Optimizer state files are safetensors: "<param>.exp_avg" and
// "<param>.exp_avg_sq" (F32, the param's length) for every param, and the
// step count in the metadata. Values round-trip bit for bit, so a run
// resumed from a saved adapter (or checkpoint) and optimizer state
// continues exactly as if it had not stopped.

const (
	stateKind    = "adamw"
	stateMomentM = ".exp_avg"
	stateMomentV = ".exp_avg_sq"
)

// SaveState writes the optimizer's moments and step count to path. The
// params' values are not included: save them with SaveAdapter or
// SaveCheckpoint.
func (o *AdamW) SaveState(path string) error {
	if o.freed {
		return fmt.Errorf("save optimizer state: %w", ErrReleased)
	}
	ts := make([]Tensor, 0, 2*len(o.params))
	for i, p := range o.params {
		m, v := make([]float32, o.m[i].Len()), make([]float32, o.v[i].Len())
		if err := o.be.Download(kernels.HostF32(m), o.m[i]); err != nil {
			return fmt.Errorf("save optimizer state: downloading %s: %w", p.Name+stateMomentM, err)
		}
		if err := o.be.Download(kernels.HostF32(v), o.v[i]); err != nil {
			return fmt.Errorf("save optimizer state: downloading %s: %w", p.Name+stateMomentV, err)
		}
		ts = append(ts, F32Tensor(p.Name+stateMomentM, m, len(m)), F32Tensor(p.Name+stateMomentV, v, len(v)))
	}
	meta := map[string]string{"format": "pt", "optimizer": stateKind, "step": strconv.Itoa(o.step)}
	if err := WriteSafetensors(path, ts, meta); err != nil {
		return fmt.Errorf("save optimizer state: %w", err)
	}
	return nil
}

// LoadState replaces the optimizer's moments and step count with those
// saved at path. The file must hold exactly this optimizer's params with
// their lengths; otherwise nothing changes and the error names the
// mismatch.
func (o *AdamW) LoadState(path string) error {
	if o.freed {
		return fmt.Errorf("load optimizer state: %w", ErrReleased)
	}
	f, err := OpenSafetensors(path)
	if err != nil {
		return fmt.Errorf("load optimizer state: %w", err)
	}
	defer f.Close()
	if err := o.readState(f); err != nil {
		return fmt.Errorf("load optimizer state %s: %w", path, err)
	}
	return nil
}

func (o *AdamW) readState(f *SafetensorsFile) error {
	meta := f.Header.Metadata
	if meta["optimizer"] != stateKind {
		return fmt.Errorf("metadata optimizer %q, want %q", meta["optimizer"], stateKind)
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("metadata step %q is not a step count", meta["step"])
	}
	want := make(map[string]bool, 2*len(o.params))
	m, v := make([][]float32, len(o.params)), make([][]float32, len(o.params))
	for i, p := range o.params {
		want[p.Name+stateMomentM], want[p.Name+stateMomentV] = true, true
		if m[i], err = f.Float32s(p.Name+stateMomentM, p.Data.Len()); err != nil {
			return err
		}
		if v[i], err = f.Float32s(p.Name+stateMomentV, p.Data.Len()); err != nil {
			return err
		}
	}
	for _, t := range f.Header.Tensors {
		if !want[t.Name] {
			return fmt.Errorf("tensor %s: no such optimizer param (saved for a different model or adapter?)", strings.TrimSuffix(strings.TrimSuffix(t.Name, stateMomentV), stateMomentM))
		}
	}
	for i, p := range o.params {
		if err := o.be.Upload(o.m[i], kernels.HostF32(m[i])); err != nil {
			return fmt.Errorf("uploading %s: %w", p.Name+stateMomentM, err)
		}
		if err := o.be.Upload(o.v[i], kernels.HostF32(v[i])); err != nil {
			return fmt.Errorf("uploading %s: %w", p.Name+stateMomentV, err)
		}
	}
	o.step = step
	return nil
}
