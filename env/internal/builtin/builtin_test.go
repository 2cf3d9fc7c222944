package builtin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFactory(t *testing.T) {
	for _, name := range Names() {
		for _, asTools := range []bool{false, true} {
			f, err := Factory(name, 1, asTools)
			require.NoError(t, err, "%s tools=%v", name, asTools)
			assert.NotNil(t, f, "%s tools=%v", name, asTools)
		}
	}
}

func TestFactoryUnknown(t *testing.T) {
	tests := []struct {
		name    string
		asTools bool
	}{{"chess", false}, {"chess", true}, {"", false}, {"Echo", true}}
	for _, tt := range tests {
		_, err := Factory(tt.name, 1, tt.asTools)
		require.Error(t, err, "%q", tt.name)
		assert.Contains(t, err.Error(), "unknown environment (have catch, echo, guess, wordle)")
	}
}
