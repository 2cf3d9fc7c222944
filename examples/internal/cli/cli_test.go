package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"success", nil, 0, ""},
		{"-h", flag.ErrHelp, 0, ""},
		{"-h wrapped", fmt.Errorf("parse: %w", flag.ErrHelp), 0, ""},
		{"an error", errors.New("-steps -1 is negative"), 1, "wordle: -steps -1 is negative\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, tc.code, ExitCode("wordle", tc.err, &stderr))
			assert.Equal(t, tc.stderr, stderr.String())
		})
	}
}
