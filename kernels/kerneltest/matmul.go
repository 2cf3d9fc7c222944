package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// matmulShapes are (M, N, K) triples: K = 1, M = 1 (decode GEMV), sizes
// around and not divisible by SIMD widths and register blocks, and a
// vocabulary-wide N.
func matmulShapes() [][3]int {
	return [][3]int{
		{1, 1, 1}, {3, 5, 1}, {2, 3, 2}, {1, 37, 19}, {1, 100, 1024}, {1, 67, 544}, {1, 9, 200},
		{4, 33, 64}, {6, 4, 32}, {7, 5, 33}, {13, 9, 95}, {17, 70, 129},
		{64, 48, 256}, {67, 37, 300}, {130, 66, 200}, {2, 151936, 16},
	}
}

// matmulTol is op's tolerance for a reduction over red terms.
func matmulTol(op string, red int) Tol {
	if red > 4096 {
		return Tolerance("MatMulLong")
	}
	return Tolerance(op)
}

// MatMul checks out[M,N] (=, +=) x[M,K]·wᵀ for every weight dtype.
func MatMul(t *testing.T, b kernels.Backend) {
	matmulFamily(t, "MatMul", b.MatMul, ref.Backend{}.MatMul, func(n, k int) (int, int) { return k, n }, dtypes())
}

// MatMulNN checks out[M,K] (=, +=) dy[M,N]·w[N,K] for every weight dtype.
func MatMulNN(t *testing.T, b kernels.Backend) {
	matmulFamily(t, "MatMulNN", b.MatMulNN, ref.Backend{}.MatMulNN, func(n, k int) (int, int) { return n, k }, dtypes())
}

// matmulOp is the shape of MatMul and MatMulNN.
type matmulOp func(out, in kernels.Buffer, w kernels.Mat, m int, accumulate bool)

// MatMulInputs returns the inputs of one case of the MatMul ("MatMul")
// or MatMulNN ("MatMulNN") family, exactly as the family draws them: in
// [M, reduce] (x or dy), the weight w [N, K] of dtype dt, and out's initial
// value [M, width] (reduce, width = K, N for MatMul; N, K for MatMulNN).
// A test that replays a case elsewhere (kernels/cuda's check of its
// tensor-core model against a GPU's recorded outputs) reads them here.
func MatMulInputs(op string, m, n, k int, dt kernels.DType, acc bool) (in []float32, w kernels.Mat, init []float32) {
	reduce, width := k, n
	if op == "MatMulNN" {
		reduce, width = n, k
	}
	rng := newRNG(op + matmulCaseName(m, n, k, dt, acc))
	in = uniform(rng, m*reduce, 1/math.Sqrt(float64(reduce)))
	w = randMat(rng, dt, n, k, 1)
	init = uniform(rng, m*width, 1)
	return in, w, init
}

// matmulCaseName is the subtest name of one MatMul/MatMulNN case.
func matmulCaseName(m, n, k int, dt kernels.DType, acc bool) string {
	return fmt.Sprintf("M%d_N%d_K%d_%s_acc%v", m, n, k, dt, acc)
}

// matmulFamily checks op against its reference for every shape, dtype of
// dts and accumulate mode: in is [M, reduce], out is [M, width], where
// dims gives (reduce, width) from w's [N, K].
func matmulFamily(t *testing.T, op string, got, want matmulOp, dims func(n, k int) (reduce, width int), dts []kernels.DType) {
	for _, s := range matmulShapes() {
		m, n, k := s[0], s[1], s[2]
		reduce, width := dims(n, k)
		for _, dt := range dts {
			for _, acc := range []bool{false, true} {
				name := matmulCaseName(m, n, k, dt, acc)
				t.Run(name, func(t *testing.T) {
					in, w, init := MatMulInputs(op, m, n, k, dt, acc)
					ref := clone(init)
					want(kernels.HostF32(ref), kernels.HostF32(in), w, m, acc)
					out := padded(init, 5)
					got(kernels.HostF32(out), kernels.HostF32(in), w, m, acc)
					CheckClose(t, "out", out[:m*width], ref, matmulTol(op, reduce))
					CheckExact(t, "out past the output", out[m*width:], padded(nil, 5))
					again := clone(init)
					got(kernels.HostF32(again), kernels.HostF32(in), w, m, acc)
					CheckExact(t, "repeated call", again, out[:m*width])
				})
			}
		}
	}
}

// MatMulTN checks dw[N,K] += dy[M,N]ᵀ·x[M,K].
func MatMulTN(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	shapes := append(matmulShapes(), [3]int{300, 20, 40}, [3]int{1000, 3, 17})
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		name := fmt.Sprintf("M%d_N%d_K%d", m, n, k)
		t.Run(name, func(t *testing.T) {
			rng := newRNG("MatMulTN" + name)
			dy := uniform(rng, m*n, 1/math.Sqrt(float64(m)))
			x := uniform(rng, m*k, 1)
			init := uniform(rng, n*k, 1)
			want := clone(init)
			r.MatMulTN(kernels.HostF32(want), kernels.HostF32(dy), kernels.HostF32(x), m, n, k)
			got := padded(init, 5)
			b.MatMulTN(kernels.HostF32(got), kernels.HostF32(dy), kernels.HostF32(x), m, n, k)
			CheckClose(t, "dw", got[:n*k], want, matmulTol("MatMulTN", m))
			CheckExact(t, "dw past N·K", got[n*k:], padded(nil, 5))
			again := clone(init)
			b.MatMulTN(kernels.HostF32(again), kernels.HostF32(dy), kernels.HostF32(x), m, n, k)
			CheckExact(t, "repeated call", again, got[:n*k])
		})
	}
}

// batchShapes are (N, K) weights for MatMulBatchInvariance: a ragged N
// over a reduction of one K-tile and a bit, an odd K (unaligned rows), and
// a reduction of 33 chunks of 128 terms (past the 4096 of the tolerance
// table's short matmuls).
func batchShapes() [][2]int { return [][2]int{{67, 40}, {130, 299}, {33, 4160}} }

// batchSizes are the M of MatMulBatchInvariance: across the decode sizes
// (1, 2, 8) and the thresholds where a backend may change kernels or
// tiles (16/17, 64/65, 128/129).
func batchSizes() []int { return []int{1, 2, 3, 8, 16, 17, 64, 65, 129, 200} }

// MatMulBatchInvariance checks that MatMul computes a row of x the same
// way whatever the batch around it: every row of a 200-row x, multiplied
// alone, in batches of every size of batchSizes starting at several
// offsets, and in the whole batch, must give bit-identical outputs (both
// accumulate modes, every weight dtype, at the backend's current
// precision). A backend that picks kernels, tiles or reduction splits by
// M must keep each row's arithmetic fixed by K alone; this is what makes
// a sampled token's log-prob (a decode step, M = 1) equal the training
// forward's (M = all tokens).
func MatMulBatchInvariance(t *testing.T, b kernels.Backend) {
	const rows = 200
	for _, s := range batchShapes() {
		n, k := s[0], s[1]
		for _, dt := range dtypes() {
			for _, acc := range []bool{false, true} {
				name := fmt.Sprintf("N%d_K%d_%s_acc%v", n, k, dt, acc)
				t.Run(name, func(t *testing.T) {
					rng := newRNG("MatMulBatchInvariance" + name)
					x := uniform(rng, rows*k, 1/math.Sqrt(float64(k)))
					w := randMat(rng, dt, n, k, 1)
					init := uniform(rng, rows*n, 1)
					full := clone(init)
					b.MatMul(kernels.HostF32(full), kernels.HostF32(x), w, rows, acc)
					for _, m := range batchSizes() {
						for _, r0 := range []int{0, 1, rows - m} {
							if r0 < 0 || r0+m > rows || (r0 == rows-m && r0 <= 1) {
								continue
							}
							got := clone(init[r0*n : (r0+m)*n])
							b.MatMul(kernels.HostF32(got), kernels.HostF32(x[r0*k:(r0+m)*k]), w, m, acc)
							if !CheckExact(t, fmt.Sprintf("rows %d..%d as a batch of %d vs inside %d", r0, r0+m-1, m, rows), got, full[r0*n:(r0+m)*n]) {
								return
							}
						}
					}
					for _, r := range []int{5, 16, 17, 127, 128, 199} {
						got := clone(init[r*n : (r+1)*n])
						b.MatMul(kernels.HostF32(got), kernels.HostF32(x[r*k:(r+1)*k]), w, 1, acc)
						if !CheckExact(t, fmt.Sprintf("row %d alone vs inside %d", r, rows), got, full[r*n:(r+1)*n]) {
							return
						}
					}
				})
			}
		}
	}
}
