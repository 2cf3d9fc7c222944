package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatMulPrecisionNames checks the names, their parsing, and that
// unknown values are neither valid nor parsed.
func TestMatMulPrecisionNames(t *testing.T) {
	tests := []struct {
		in      string
		want    MatMulPrecision
		wantErr string
	}{
		{"exact", MatMulExact, ""},
		{"bf16", MatMulBF16, ""},
		{"BF16", 0, `matmul precision "BF16": want exact or bf16`},
		{"", 0, `matmul precision "": want exact or bf16`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseMatMulPrecision(tt.in)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String())
			assert.True(t, got.Valid())
		})
	}
	assert.False(t, MatMulPrecision(5).Valid())
	assert.False(t, MatMulPrecision(-1).Valid())
	assert.Equal(t, "MatMulPrecision(5)", MatMulPrecision(5).String())
}
