package device

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// TestParse checks every accepted spelling and the refusals.
func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Name
		wantErr string
	}{
		{"cpu", Name{Kind: CPU}, ""},
		{"cuda", Name{Kind: CUDA}, ""},
		{"cuda:0", Name{Kind: CUDA}, ""},
		{"cuda:3", Name{Kind: CUDA, Ordinal: 3}, ""},
		{"cuda:-1", Name{}, `device "cuda:-1": want cuda:N with N a GPU number`},
		{"cuda:", Name{}, `device "cuda:": want cuda:N`},
		{"cuda:01", Name{}, `device "cuda:01": want cuda:N`},
		{"cuda:x", Name{}, `device "cuda:x": want cuda:N`},
		{"CUDA", Name{}, `device "CUDA": want cpu, cuda (GPU 0) or cuda:N (GPU N)`},
		{"gpu", Name{}, `device "gpu": want cpu, cuda`},
		{"", Name{}, `device "": want cpu, cuda`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			if tt.in != "cuda:0" {
				assert.Equal(t, tt.in, got.String(), "String spells what Parse reads")
			}
		})
	}
}

// TestOpenCPU: "cpu" is kernels/cpu with the threads asked for (so a
// caller can still reach its optional interfaces, e.g. the matmul
// precision), and its closer works.
func TestOpenCPU(t *testing.T) {
	be, closeFn, err := Open("cpu", Options{Threads: 1})
	require.NoError(t, err)
	c, ok := be.(*cpu.Backend)
	require.True(t, ok, "the backend itself, not a wrapper: %T", be)
	assert.Equal(t, 1, c.Threads())
	_, ok = be.(kernels.MatMulPrecisionSetter)
	assert.True(t, ok)
	buf, err := be.Alloc(kernels.F32, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, buf.Len())
	require.NoError(t, closeFn())

	_, _, err = Open("cpu", Options{Threads: -1})
	assert.EqualError(t, err, "device cpu: -1 threads: want 0 (every core) or more")
	_, _, err = Open("tpu", Options{})
	assert.ErrorContains(t, err, `device "tpu"`)
}

// TestOpenCUDAWithoutTag: in a binary built without -tags cuda, every
// CUDA name is ErrNoCUDA, and the message tells a user what to do: the
// tag, cuda.h to build, libcuda.so.1 and a GPU to run, -device cpu.
func TestOpenCUDAWithoutTag(t *testing.T) {
	if CUDAEnabled {
		t.Skip("built with -tags cuda")
	}
	for _, name := range []string{"cuda", "cuda:1"} {
		_, _, err := Open(name, Options{})
		require.ErrorIs(t, err, ErrNoCUDA)
		for _, s := range []string{"device " + name + ":", "go build -tags cuda", "cuda.h", "libcuda.so.1", "GPU", "-device cpu"} {
			assert.Contains(t, err.Error(), s)
		}
	}
}
