package grpo

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/model"
)

// failingUpload is a backend whose Upload fails, as a device's can.
type failingUpload struct{ kernels.Backend }

// Upload fails.
func (failingUpload) Upload(kernels.Buffer, kernels.Buffer) error {
	return errors.New("device lost")
}

// TestLoadCheckpointUploadErrorLeavesStateAlone: when restoring the
// parameters fails in the backend (their Upload), LoadCheckpoint reports
// it and leaves the caller's state and the parameters as they were, as
// its doc promises.
func TestLoadCheckpointUploadErrorLeavesStateAlone(t *testing.T) {
	dir := tinyModelDir(t)
	lora := &model.LoRAConfig{R: 4, Alpha: 8}
	src := trainedWeights(t, dir, lora, 1)
	path, err := SaveCheckpoint(t.TempDir(), 3, 0, src, testState{Generation: 3, DataPos: 12}, nil)
	require.NoError(t, err)

	dst := trainedWeights(t, dir, lora, 2)
	dst.Optimizer = nil // the parameters are the first thing uploaded
	before := paramData(dst)
	be := dst.Model.Backend
	dst.Model.Backend = failingUpload{be}
	defer func() { dst.Model.Backend = be }()
	state := testState{Generation: 99, DataPos: 7}
	_, err = LoadCheckpoint(path, dst, &state)
	require.ErrorContains(t, err, "device lost")
	assert.Equal(t, testState{Generation: 99, DataPos: 7}, state, "the state is left alone")
	for i, p := range paramData(dst) {
		assert.True(t, slices.Equal(before[i], p), "param %s left alone", dst.Params[i].Name)
	}
}
