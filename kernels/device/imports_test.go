package device

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrainerImportsNoBackend: model and grpo (and everything they import)
// name no backend implementation: they run on whatever kernels.Backend a
// program passes, chosen with this package or directly. (kernels/ref, the
// specification, serves model's host-side reductions and is allowed.)
// The cuda build is checked too, where kernels/cuda would appear if
// anything pulled it in.
func TestTrainerImportsNoBackend(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	for _, tags := range []string{"", "cuda"} {
		out, err := exec.Command(goTool, "list", "-deps", "-tags", tags, "github.com/x/model", "github.com/x/grpo").CombinedOutput()
		require.NoError(t, err, "%s", out)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "github.com/x/kernels")
		for _, banned := range []string{"github.com/x/kernels/cpu", "github.com/x/kernels/cuda", "github.com/x/kernels/device", "gorgonia.org/cu"} {
			assert.NotContains(t, deps, banned, "tags %q", tags)
		}
	}
}
