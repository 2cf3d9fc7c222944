//go:build cudahost

package grpo

// The trainer on the CUDA kernels through the SIMT host build (cuda.Host):
// backend_run_test.go's harness against kernels/cpu. `make cudahost` runs
// these.

import (
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/cuda"
)

func newHost(*testing.T) kernels.Backend { return cuda.NewHost(2) }

// TestGRPOHostVsCPU: a short GRPO run (LoRA with the KL reference pass,
// and full weights) on the CUDA kernels equals the same run on kernels/cpu
// (see backendGRPOVsCPU), and the sampled log-probs equal the training
// forward's within samplingLogpBound.
func TestGRPOHostVsCPU(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "lora", true: "full"}[full], func(t *testing.T) {
			backendGRPOVsCPU(t, newHost, full)
		})
	}
}

// TestGRPOHostResume: a checkpoint and a bit-exact resume on the CUDA
// kernels, and the saved PEFT adapter on kernels/cpu (backendResume).
func TestGRPOHostResume(t *testing.T) { backendResume(t, newHost) }

// TestSFTHostVsCPU: SFT (LoRA and full) on the CUDA kernels equals
// kernels/cpu's and gives every allocation back (backendSFTVsCPU).
func TestSFTHostVsCPU(t *testing.T) { backendSFTVsCPU(t, newHost) }
