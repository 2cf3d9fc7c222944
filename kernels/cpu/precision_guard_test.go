//go:build linux

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// guarded returns n elements of T whose last one ends exactly where an
// inaccessible page begins, so that a kernel reading or writing past the
// end faults (the test binary crashes) instead of reading a neighbour's
// memory unnoticed.
func guarded[T any](t *testing.T, n int) []T {
	t.Helper()
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	page := syscall.Getpagesize()
	span := (size+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, span, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	require.NoError(t, err, "mmap %d bytes", span)
	t.Cleanup(func() { require.NoError(t, syscall.Munmap(mem)) })
	require.NoError(t, syscall.Mprotect(mem[span-page:], syscall.PROT_NONE), "protecting the guard page")
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[span-page-size])), n)
}

// TestMatMulBF16Bounds runs MatMul at both precisions on every path with
// x, the bf16 weights and out each ending right before a guard page: the
// VDPBF16PS kernels' 64-byte loads of the last weight row and of x, the
// K tails and the ragged column blocks must stay inside their operands.
// The result must still match the reference (on x rounded to bf16 under
// kernels.MatMulBF16).
func TestMatMulBF16Bounds(t *testing.T) {
	var r ref.Backend
	tol := kerneltest.Tolerance("MatMul")
	shapes := [][3]int{{1, 7, 33}, {2, 5, 32}, {3, 4, 31}, {8, 3, 64}, {9, 49, 95}, {15, 50, 1}, {16, 16, 16}, {17, 19, 33}, {40, 67, 1030}}
	for _, p := range precisionPaths() {
		t.Run(p.testName(), func(t *testing.T) {
			if p.missing != "" {
				t.Skipf("%s path not run: %s", p.testName(), p.missing)
			}
			b := pathBackend(t, p, 2)
			for _, prec := range []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16} {
				require.NoError(t, b.SetMatMulPrecision(prec))
				for _, s := range shapes {
					m, n, k := s[0], s[1], s[2]
					t.Run(fmt.Sprintf("%s/M%d_N%d_K%d", prec, m, n, k), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(m*n), uint64(k)))
						x := guarded[float32](t, m*k)
						copy(x, uniformF32(rng, m*k, 1/math.Sqrt(float64(k))))
						wh := guarded[uint16](t, n*k)
						for i, v := range uniformF32(rng, n*k, 1) {
							wh[i] = kernels.F32ToBF16(v)
						}
						w := kernels.MatBF16(wh, n, k)
						out := guarded[float32](t, m*n)
						b.MatMul(kernels.HostF32(out), kernels.HostF32(x), w, m, false)
						xr := append([]float32(nil), x...)
						if prec == kernels.MatMulBF16 {
							xr = roundBF16(x)
						}
						want := make([]float32, m*n)
						r.MatMul(kernels.HostF32(want), kernels.HostF32(xr), w, m, false)
						kerneltest.CheckClose(t, "out vs reference", out, want, tol)
					})
				}
			}
		})
	}
}
