//go:build cudahost

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/kernels"
)

// TestProbeMMA checks the shim's mma.sync against a direct product: the
// probe kernel places A, B, C and D by the PTX ISA fragment tables.
func TestProbeMMA(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := make([]uint16, 16*16), make([]uint16, 16*8)
	af, bf := make([]float32, len(a)), make([]float32, len(b))
	for i := range a {
		a[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
		af[i] = kernels.BF16ToF32(a[i])
	}
	for i := range b {
		b[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
		bf[i] = kernels.BF16ToF32(b[i])
	}
	c := make([]float32, 16*8)
	for i := range c {
		c[i] = float32(i) / 16
	}
	d := make([]float32, 16*8)
	require.NoError(t, probeMMA(d, a, b, c))
	for r := range 16 {
		for n := range 8 {
			want := float64(c[r*8+n])
			for k := range 16 {
				want += float64(af[r*16+k]) * float64(bf[k*8+n])
			}
			assert.InDelta(t, want, float64(d[r*8+n]), 1e-5, "D[%d][%d]", r, n)
		}
	}
}

// TestProbeBarrier checks __syncthreads, __shared__, __shfl_xor_sync and
// __ballot_sync on blocks of several warps, with one and two workers.
func TestProbeBarrier(t *testing.T) {
	for _, n := range []int{32, 96, 1024} {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("n%d_workers%d", n, workers), func(t *testing.T) {
				out := make([]int32, n)
				require.NoError(t, probeBarrier(out, workers))
				for i := range n {
					base := i / 32 * 32
					sum := 0
					for j := base; j < base+32; j++ {
						sum += j + 1
					}
					assert.Equal(t, int32((i+1)%n+1+sum+1), out[i], "thread %d", i)
				}
			})
		}
	}
}

// TestBrokenKernels checks that collective misuse is reported, not hung.
func TestBrokenKernels(t *testing.T) {
	for kernel, want := range map[string]string{
		"diverge":  "deadlock",
		"mask":     "mask 0xffff but the warp's live lanes are 0xffffffff",
		"ldmatrix": "is not 16-byte aligned",
	} {
		t.Run(kernel, func(t *testing.T) {
			err := probeBroken(kernel, make([]int32, 32))
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

// TestCpAsyncLandsAtWait checks that the shim completes a cp.async only at
// the wait that covers it: a thread that reads the destination first sees
// the old value (as it may on the GPU), and after the wait the copy.
func TestCpAsyncLandsAtWait(t *testing.T) {
	out := make([]int32, 32*4)
	for i := range out {
		out[i] = int32(1000 + i)
	}
	require.NoError(t, probeBroken("cp_async", out))
	for l := range 32 {
		assert.Equal(t, int32(-1), out[l*4+1], "lane %d before the wait", l)
		assert.Equal(t, int32(1000+l*4), out[l*4+2], "lane %d after the wait", l)
	}
}
