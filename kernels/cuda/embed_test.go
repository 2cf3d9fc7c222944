package cuda

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImages checks that every .cu family has its PTX and cubin embedded,
// that the PTX targets sm_90 and defines every extern "C" __global__
// kernel of its source, and that no generated file lacks a source.
func TestImages(t *testing.T) {
	sources, err := filepath.Glob("*.cu")
	require.NoError(t, err)
	require.NotEmpty(t, sources)
	kernelRE := regexp.MustCompile(`KERNEL void (?:__launch_bounds__\([\d, ]+\) )?(\w+)\(`)
	want := map[string]bool{}
	for _, src := range sources {
		base := strings.TrimSuffix(src, ".cu")
		t.Run(base, func(t *testing.T) {
			code, err := os.ReadFile(src)
			require.NoError(t, err)
			ptx, err := fs.ReadFile(Images(), "gen/"+base+".ptx")
			require.NoError(t, err, "run make cuda-kernels")
			assert.Contains(t, string(ptx), "\n.target sm_90\n")
			cubin, err := fs.ReadFile(Images(), "gen/"+base+".sm_90.cubin")
			require.NoError(t, err, "run make cuda-kernels")
			assert.Equal(t, "\x7fELF", string(cubin[:4]), "cubin is an ELF image")
			kernels := kernelRE.FindAllStringSubmatch(string(code), -1)
			assert.NotEmpty(t, kernels, "no KERNEL in %s", src)
			for _, k := range kernels {
				assert.Contains(t, string(ptx), ".entry "+k[1]+"(", "PTX of %s lacks kernel %s", src, k[1])
				assert.Contains(t, string(cubin), k[1], "cubin of %s lacks kernel %s", src, k[1])
			}
		})
		want["gen/"+base+".ptx"] = true
		want["gen/"+base+".sm_90.cubin"] = true
	}
	gen, err := fs.Glob(Images(), "gen/*")
	require.NoError(t, err)
	for _, g := range gen {
		assert.True(t, want[g], "%s has no .cu source", g)
	}
}
