package model

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// allocBudget is a backend whose Alloc and Import fail once left calls
// have been made (a device out of memory); left < 0 never fails.
type allocBudget struct {
	kernels.Backend
	left int
}

var errOutOfMemory = errors.New("out of device memory")

func (a *allocBudget) take() error {
	if a.left == 0 {
		return errOutOfMemory
	}
	if a.left > 0 {
		a.left--
	}
	return nil
}

// Alloc fails when the budget is spent.
func (a *allocBudget) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	if err := a.take(); err != nil {
		return kernels.Buffer{}, err
	}
	return a.Backend.Alloc(dt, n)
}

// Import fails when the budget is spent.
func (a *allocBudget) Import(src kernels.Buffer) (kernels.Buffer, error) {
	if err := a.take(); err != nil {
		return kernels.Buffer{}, err
	}
	return a.Backend.Import(src)
}

// TestNewTrainableErrorFreesGradients: when NewTrainable fails part way
// (an Alloc or Import that fails, at every point in turn), it gives back
// every gradient it allocated, so that after Model.Close no allocation of
// the copying backend is live, and nothing is freed twice.
func TestNewTrainableErrorFreesGradients(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "lora", true: "full"}[full], func(t *testing.T) {
			failures := 0
			for budget := 0; ; budget++ {
				be := cpu.New(1)
				c := &kerneltest.Counting{Backend: be, CopyImports: true}
				a := &allocBudget{Backend: c, left: -1}
				m := trLoadTiny(t, a, !full)
				a.left = budget
				tr, err := NewTrainable(m, TrainOptions{Full: full})
				a.left = -1
				if err == nil {
					tr.Close()
					require.NoError(t, m.Close())
					be.Close()
					break
				}
				failures++
				require.ErrorIs(t, err, errOutOfMemory, "budget %d", budget)
				require.NoError(t, m.Close())
				assert.Equal(t, 0, c.Live(), "budget %d (%v): allocations live after the failed NewTrainable and Model.Close", budget, err)
				assert.Empty(t, c.BadFrees, "budget %d: memory freed twice", budget)
				be.Close()
			}
			require.Greater(t, failures, 3, fmt.Sprintf("NewTrainable failed at %d points", failures))
		})
	}
}
