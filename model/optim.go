package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Param is one trainable tensor: its float32 master values and the
// gradient accumulated into it, both F32 Buffers of the same length in
// the backend's memory, owned by whoever made the Param (a Trainable). The
// optimizer updates Data in place on the backend, and a Trainable's Data
// is the very Buffer the forward reads (the Model's import of the weight),
// so during training it, not the Model's host field, holds the value: read
// it with Backend.Download or Model.DownloadParams, write it with
// Backend.Upload (on a CPU backend Data.F32() is the host field's memory
// itself). A Trainable's Grad comes from Backend.Alloc.
type Param struct {
	Name  string         // unique; PEFT or Hugging Face tensor name
	Data  kernels.Buffer // [N] F32 values, updated by the optimizer
	Grad  kernels.Buffer // [N] F32 accumulated gradient (+=)
	Decay bool           // whether weight decay applies (false for norm weights)
}

// AdamWConfig holds AdamW's hyperparameters, the learning-rate schedule and
// gradient clipping. DefaultAdamWConfig gives torch's defaults.
type AdamWConfig struct {
	Beta1       float32
	Beta2       float32
	Eps         float32
	WeightDecay float32 // decoupled, applied to params with Decay set
	Schedule    Schedule
	// MaxGradNorm, if > 0, scales the gradients so that their global L2
	// norm is at most this before each step (torch clip_grad_norm_).
	MaxGradNorm float64
}

// DefaultAdamWConfig is torch.optim.AdamW's defaults (betas 0.9, 0.999,
// eps 1e-8, weight decay 0.01) with a constant rate lr and clipping at 1.0
// as the transformers Trainer does.
func DefaultAdamWConfig(lr float64) AdamWConfig {
	return AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01,
		Schedule: Schedule{Kind: ScheduleConstant, LR: lr}, MaxGradNorm: 1}
}

// Validate reports what is wrong with c, if anything.
func (c AdamWConfig) Validate() error {
	switch {
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("adamw: beta1 %v not in [0,1)", c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("adamw: beta2 %v not in [0,1)", c.Beta2)
	case !(c.Eps > 0):
		return fmt.Errorf("adamw: eps %v must be > 0", c.Eps)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("adamw: weight decay %v must be >= 0", c.WeightDecay)
	case !(c.MaxGradNorm >= 0):
		return fmt.Errorf("adamw: max grad norm %v must be >= 0", c.MaxGradNorm)
	}
	return c.Schedule.Validate()
}

// AdamW is the AdamW optimizer over a fixed list of Params: decoupled
// weight decay, bias correction, a learning-rate schedule and optional
// global-norm clipping. Gradient accumulation is the Params' own: gradients
// add up (+=) across micro-batches until the caller zeroes them after
// Step. Not safe for concurrent use.
type AdamW struct {
	be     kernels.Backend
	cfg    AdamWConfig
	params []Param
	m, v   []kernels.Buffer // first and second moments, one per param, in the backend's memory (Alloc)
	freed  bool             // Release ran
	step   int              // optimizer steps taken
}

// StepStats describes one optimizer step.
type StepStats struct {
	Step     int     // steps taken, including this one
	LR       float64 // learning rate used
	GradNorm float64 // global L2 norm of the gradients before clipping
	Clipped  bool    // whether the gradients were scaled down
}

// NewAdamW makes an optimizer for params with zero moments.
func NewAdamW(be kernels.Backend, params []Param, cfg AdamWConfig) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(params))
	o := &AdamW{be: be, cfg: cfg, params: params}
	for _, p := range params {
		if p.Data.DType() != kernels.F32 || p.Data.Len() != p.Grad.Len() || p.Grad.DType() != kernels.F32 {
			return nil, fmt.Errorf("adamw: param %s has %d %v values but %d %v gradients (want F32 of one length)", p.Name, p.Data.Len(), p.Data.DType(), p.Grad.Len(), p.Grad.DType())
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("adamw: param name %s used twice", p.Name)
		}
		seen[p.Name] = true
	}
	for _, p := range params {
		m, err := be.Alloc(kernels.F32, p.Data.Len())
		if err != nil {
			o.Release()
			return nil, fmt.Errorf("adamw: moments of %s: %w", p.Name, err)
		}
		o.m = append(o.m, m)
		v, err := be.Alloc(kernels.F32, p.Data.Len())
		if err != nil {
			o.Release()
			return nil, fmt.Errorf("adamw: moments of %s: %w", p.Name, err)
		}
		o.v = append(o.v, v)
	}
	return o, nil
}

// ErrReleased is returned by a released optimizer's Step, SaveState and
// LoadState.
var ErrReleased = errors.New("adamw: optimizer released")

// Release gives the moments' backend memory back (Backend.Free); Step,
// SaveState and LoadState then return ErrReleased.
func (o *AdamW) Release() {
	o.freed = true
	for i := range o.m {
		free(o.be, &o.m[i])
	}
	for i := range o.v {
		free(o.be, &o.v[i])
	}
	o.m, o.v = nil, nil
}

// Steps is the number of optimizer steps taken.
func (o *AdamW) Steps() int { return o.step }

// Config returns the optimizer's configuration.
func (o *AdamW) Config() AdamWConfig { return o.cfg }

// ErrNonFiniteGrad is returned by Step when a gradient holds NaN or Inf;
// the parameters are then left as they were.
var ErrNonFiniteGrad = errors.New("adamw: non-finite gradient norm")

// Step clips the gradients (if configured) and updates every param. It does
// not zero the gradients.
func (o *AdamW) Step() (StepStats, error) {
	if o.freed {
		return StepStats{}, fmt.Errorf("step %d: %w", o.step+1, ErrReleased)
	}
	norm, err := gradNorm(o.be, o.params)
	if err != nil {
		return StepStats{}, fmt.Errorf("step %d: %w", o.step+1, err)
	}
	st := StepStats{Step: o.step + 1, LR: o.cfg.Schedule.At(o.step), GradNorm: norm}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return st, fmt.Errorf("step %d: %w", o.step+1, ErrNonFiniteGrad)
	}
	if o.cfg.MaxGradNorm > 0 {
		st.Clipped = scaleGradsToNorm(o.be, o.params, norm, o.cfg.MaxGradNorm)
	}
	o.step++
	for i, p := range o.params {
		hp := kernels.AdamWParams{LR: float32(st.LR), Beta1: o.cfg.Beta1, Beta2: o.cfg.Beta2, Eps: o.cfg.Eps}
		if p.Decay {
			hp.WeightDecay = o.cfg.WeightDecay
		}
		o.be.AdamW(p.Data, p.Grad, o.m[i], o.v[i], hp, o.step)
	}
	return st, nil
}

// GradNorm is the global L2 norm of the params' gradients, accumulated in
// float64 (on the host, by the reference backend's SumSquares: the
// gradients must be host memory, as a CPU backend's are).
func GradNorm(params []Param) float64 {
	n, _ := gradNorm(ref.Backend{}, params) // the reference never fails
	return n
}

// gradNorm is the global L2 norm of the gradients, reduced by be (one
// scalar to the host).
func gradNorm(be kernels.Backend, params []Param) (float64, error) {
	grads := make([]kernels.Buffer, len(params))
	for i, p := range params {
		grads[i] = p.Grad
	}
	s, err := be.SumSquares(grads...)
	if err != nil {
		return 0, fmt.Errorf("gradient norm: %w", err)
	}
	return math.Sqrt(s), nil
}

// ClipGradNorm scales the gradients so their global L2 norm is at most
// maxNorm, as torch.nn.utils.clip_grad_norm_ does (factor maxNorm/(norm+1e-6)
// when that is below 1). It returns the norm before clipping (NaN if the
// backend failed to compute it; the gradients are then left alone).
func ClipGradNorm(be kernels.Backend, params []Param, maxNorm float64) float64 {
	norm, err := gradNorm(be, params)
	if err != nil {
		return math.NaN()
	}
	scaleGradsToNorm(be, params, norm, maxNorm)
	return norm
}

func scaleGradsToNorm(be kernels.Backend, params []Param, norm, maxNorm float64) bool {
	f := maxNorm / (norm + 1e-6)
	if !(f < 1) {
		return false
	}
	for _, p := range params {
		be.Scale(p.Grad, float32(f))
	}
	return true
}

// ScaleGrads multiplies every gradient by s, e.g. 1/GA after accumulating
// GA micro-batches whose weights were not already divided.
func ScaleGrads(be kernels.Backend, params []Param, s float32) {
	for _, p := range params {
		be.Scale(p.Grad, s)
	}
}
