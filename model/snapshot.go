package model

import (
	"errors"
	"fmt"

	"github.com/x/kernels"
)

// AdapterSnapshot is a frozen copy of every LoRA adapter attached to a
// Model, in the backend's memory: an older version of the policy that
// generation and scoring can run with (Model.UseAdapters) while a
// Trainable keeps training the live adapters. Only the adapters are
// copied; the base weights are shared. It is how asynchronous GRPO
// samples generation k+1 with the policy of an earlier optimizer step
// while it trains on generation k.
//
// A snapshot belongs to the adapters attached when it was made: attaching,
// loading or detaching adapters afterwards (AttachLoRA, LoadAdapter,
// DetachLoRA) leaves it describing adapters the model no longer has, and
// UseAdapters then has no effect on the new ones. Like the Model, it is
// used by one goroutine at a time (Capture, Load, Save and Release call
// the backend).
type AdapterSnapshot struct {
	m      *Model
	copies map[devKey]kernels.Buffer // live adapter matrix (its host key) -> this snapshot's copy
	mats   []snapshotMat             // layer by layer, q..down, A then B: the order of Save
}

// snapshotMat is one adapter matrix of a snapshot.
type snapshotMat struct {
	name  string         // PEFT tensor name
	shape [2]int         // [R, In] for A, [Out, R] for B
	host  kernels.Buffer // the live adapter's host matrix (LoRA.A or .B), the key ops look up
	buf   kernels.Buffer // the snapshot's copy, in the backend's memory
}

// NewAdapterSnapshot allocates a snapshot of m's adapters (uninitialised:
// Capture or Load fills it). It is an error if m carries no adapter.
func (m *Model) NewAdapterSnapshot() (*AdapterSnapshot, error) {
	s := &AdapterSnapshot{m: m, copies: map[devKey]kernels.Buffer{}}
	for li := range m.Layers {
		for j, nl := range m.Layers[li].Linears() {
			aH, bH, ok := loraHost(nl.Linear)
			if !ok {
				if nl.Linear.LoRA != nil {
					s.Release()
					return nil, fmt.Errorf("model: adapter snapshot: layer %d %s: adapter does not fit its projection", li, nl.Name)
				}
				continue
			}
			a := nl.Linear.LoRA
			for _, mt := range []snapshotMat{
				{name: peftName(li, loraTargets[j], "A"), shape: [2]int{a.R, nl.Linear.In()}, host: aH},
				{name: peftName(li, loraTargets[j], "B"), shape: [2]int{nl.Linear.Out(), a.R}, host: bH},
			} {
				buf, err := m.Backend.Alloc(kernels.F32, mt.host.Len())
				if err != nil {
					s.Release()
					return nil, fmt.Errorf("model: adapter snapshot: allocating %s: %w", mt.name, err)
				}
				mt.buf = buf
				s.mats = append(s.mats, mt)
				s.copies[keyOf(mt.host)] = buf
			}
		}
	}
	if len(s.mats) == 0 {
		return nil, errors.New("model: adapter snapshot: the model carries no adapters")
	}
	return s, nil
}

// Capture copies the live adapters (the Buffers a Trainable trains, or
// the imports of the host matrices) into s, on the backend (one Copy per
// matrix, no host round trip).
func (s *AdapterSnapshot) Capture() error {
	be := s.m.Backend
	for _, mt := range s.mats {
		be.Copy(mt.buf, s.m.devBufLive(mt.host))
	}
	if err := be.Err(); err != nil {
		return fmt.Errorf("model: adapter snapshot: %w", err)
	}
	return nil
}

// Save writes s to path as a safetensors file of F32 tensors with PEFT's
// names (the layout of adapter_model.safetensors), downloading each
// matrix.
func (s *AdapterSnapshot) Save(path string) error {
	tensors := make([]Tensor, len(s.mats))
	for i, mt := range s.mats {
		host := make([]float32, mt.buf.Len())
		if err := s.m.Backend.Download(kernels.HostF32(host), mt.buf); err != nil {
			return fmt.Errorf("model: adapter snapshot: downloading %s: %w", mt.name, err)
		}
		tensors[i] = F32Tensor(mt.name, host, mt.shape[0], mt.shape[1])
	}
	if err := WriteSafetensors(path, tensors, nil); err != nil {
		return fmt.Errorf("model: adapter snapshot: %w", err)
	}
	return nil
}

// Load fills s from a file Save wrote for adapters of the same shapes:
// every matrix must be present with its shape (as F32, BF16 or F16); on
// error s keeps what it held.
func (s *AdapterSnapshot) Load(path string) error {
	f, err := OpenSafetensors(path)
	if err != nil {
		return fmt.Errorf("model: adapter snapshot: %w", err)
	}
	defer f.Close()
	if got, want := len(f.Header.Tensors), len(s.mats); got != want {
		return fmt.Errorf("model: adapter snapshot: %s holds %d tensors, the model's adapters %d", path, got, want)
	}
	vals := make([][]float32, len(s.mats))
	for i, mt := range s.mats {
		if vals[i], err = f.Float32s(mt.name, mt.shape[0], mt.shape[1]); err != nil {
			return fmt.Errorf("model: adapter snapshot: %w", err)
		}
	}
	for i, mt := range s.mats {
		if err := s.m.Backend.Upload(mt.buf, kernels.HostF32(vals[i])); err != nil {
			return fmt.Errorf("model: adapter snapshot: uploading %s: %w", mt.name, err)
		}
	}
	return nil
}

// Release gives the snapshot's memory back to the backend; s must not be
// used afterwards. If the model was using it (UseAdapters), the model
// goes back to its live adapters. Calling it twice is harmless.
func (s *AdapterSnapshot) Release() {
	if s.m.adapters == s {
		s.m.adapters = nil
	}
	for i := range s.mats {
		free(s.m.Backend, &s.mats[i].buf)
	}
	s.mats, s.copies = nil, nil
}

// UseAdapters makes every forward of m (generation, prefill, scoring and
// training passes alike) read the adapters of s instead of the live ones,
// until the next call; nil goes back to the live adapters. The swap is a
// pointer: nothing is copied. A Trainable must not accumulate gradients
// while a snapshot is in use (its gradients would be of the snapshot's
// adapters while AdamW updates the live ones); score with it only.
func (m *Model) UseAdapters(s *AdapterSnapshot) {
	if s != nil && s.m != m {
		panic("model: UseAdapters: a snapshot of another model")
	}
	m.adapters = s
}

// devBufLive is devBuf without the snapshot in use: the live weight.
func (m *Model) devBufLive(b kernels.Buffer) kernels.Buffer {
	saved := m.adapters
	m.adapters = nil
	defer func() { m.adapters = saved }()
	return m.devBuf(b)
}
