//go:build cudahost

package cuda

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x/kernels"
)

// TestProbeBarrierWorkers checks __syncthreads, __shared__,
// __shfl_xor_sync and __ballot_sync on blocks of several warps with one
// and two workers (TestSeamProbeBarrier runs it on any Device).
func TestProbeBarrierWorkers(t *testing.T) {
	for _, n := range []int{32, 96, 1024} {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("n%d_workers%d", n, workers), func(t *testing.T) {
				out := make([]int32, n)
				dev, err := NewHostDevice(HostOptions{Workers: workers})
				require.NoError(t, err)
				defer func() { require.NoError(t, dev.Close()) }()
				require.NoError(t, dev.probeBarrier(out))
				checkBarrier(t, out)
			})
		}
	}
}

// TestBrokenKernels checks that collective misuse is reported, not hung:
// the launch fails when the twin runs it, which fails the Device as a
// kernel fault fails a CUDA context (the error is sticky).
func TestBrokenKernels(t *testing.T) {
	for kernel, want := range map[string]string{
		"diverge":  "deadlock",
		"mask":     "mask 0xffff but the warp's live lanes are 0xffffffff",
		"ldmatrix": "is not 16-byte aligned",
	} {
		t.Run(kernel, func(t *testing.T) {
			dev := NewHost(1)
			defer func() { assert.Error(t, dev.Close()) }()
			err := dev.probeBroken(kernel, make([]int32, 32))
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
			_, err = dev.Alloc(kernels.F32, 1)
			assert.ErrorContains(t, err, want, "sticky")
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
	dev := NewHost(1)
	defer func() { require.NoError(t, dev.Close()) }()
	require.NoError(t, dev.probeBroken("cp_async", out))
	for l := range 32 {
		assert.Equal(t, int32(-1), out[l*4+1], "lane %d before the wait", l)
		assert.Equal(t, int32(1000+l*4), out[l*4+2], "lane %d after the wait", l)
	}
}
