package kernels_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
)

// TestLossParamsValidate: each bad setting is named; TRL's defaults pass.
func TestLossParamsValidate(t *testing.T) {
	ok := kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 0.2, EpsHigh: 0.28}
	tests := []struct {
		name string
		p    kernels.LossParams
		msg  string // "" = valid
	}{
		{"dapo", ok, ""},
		{"gspo", kernels.LossParams{Objective: kernels.ObjectiveClipped, EpsLow: 3e-4, EpsHigh: 4e-4, SequenceRatio: true}, ""},
		{"cispo", kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 5}, ""},
		{"sapo", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1.05}, ""},
		{"vespo", kernels.LossParams{Objective: kernels.ObjectiveVESPO, VESPOKPos: 2, VESPOLambdaPos: 3, VESPOKNeg: 3, VESPOLambdaNeg: 2}, ""},
		{"pg", kernels.LossParams{Objective: kernels.ObjectivePG, Beta: 0.04, EntropyCoef: 0.01}, ""},
		// TRL's settings it accepts: ε ≥ 1 (no lower clip), δ ≤ 1+ε_high,
		// every objective at sequence level, the off-policy mask.
		{"eps low 1", kernels.LossParams{EpsLow: 1}, ""},
		{"delta inside the clip", kernels.LossParams{EpsLow: 0.2, EpsHigh: 0.2, Delta: 1.1}, ""},
		{"cispo sequence", kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: 0.2, SequenceRatio: true}, ""},
		{"off-policy mask", kernels.LossParams{OffPolicyMask: true, OffPolicyMaskThreshold: 0.5}, ""},
		{"eps low", kernels.LossParams{EpsLow: -0.1}, "EpsLow"},
		{"eps high", kernels.LossParams{EpsHigh: -1}, "EpsHigh"},
		{"delta", kernels.LossParams{Delta: -0.5}, "Delta"},
		{"threshold nan", kernels.LossParams{OffPolicyMask: true, OffPolicyMaskThreshold: float32(math.Inf(1))}, "OffPolicyMaskThreshold"},
		{"nan", kernels.LossParams{Beta: float32(math.NaN())}, "Beta"},
		{"negative beta", kernels.LossParams{Beta: -1}, "Beta = -1"},
		{"cispo cap", kernels.LossParams{Objective: kernels.ObjectiveCISPO, EpsHigh: -1}, "EpsHigh"},
		{"sapo tau", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1}, "SAPO"},
		{"sapo sequence", kernels.LossParams{Objective: kernels.ObjectiveSAPO, SAPOTemperaturePos: 1, SAPOTemperatureNeg: 1, SequenceRatio: true}, ""},
		{"unknown", kernels.LossParams{Objective: 42}, "Objective(42)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.msg == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	assert.True(t, kernels.LossParams{Objective: kernels.ObjectiveVESPO}.NeedsSegments())
	assert.True(t, kernels.LossParams{SequenceRatio: true}.NeedsSegments())
	assert.True(t, kernels.LossParams{OffPolicyMask: true}.NeedsSegments())
	assert.False(t, ok.NeedsSegments())
}
