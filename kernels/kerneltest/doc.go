// Package kerneltest is the conformance suite every kernels.Backend must
// pass, in the style of gonum's testblas: each exported function takes a
// *testing.T and the Backend under test, runs one op family at awkward
// shapes (T = 1, sizes not divisible by the SIMD width or block size, K = 1,
// GQA ratios 1/2/4/8, Start > 0, the Qwen3 vocabulary of 151,936, large and
// −Inf logits) and every weight dtype, and compares the result with
// kernels/ref, the specification.
//
// A backend's test file therefore reads
//
//	func TestMatMul(t *testing.T) { kerneltest.MatMul(t, cpu.New(0)) }
//
// Comparisons widen both sides to float64 and require, with the single
// table of justified tolerances in tolerance.go, per element
// |got−want| ≤ ATol + RTol·|want| and over the whole tensor
// NMSE = Σ(got−want)²/Σwant² ≤ NMSE; the first 5 mismatches are reported.
// Integer outputs (Argmax, sampled ids under a fixed u), repeated calls
// of the same kernel and what a backend promises to compute as another of
// its ops does (SampleRows' full log-prob as Scale then LogSoftmaxGather:
// SampleFullLogProbExact) must match exactly. The reference always gets the same
// rounded inputs (bf16/f16 weights are the same Mat), so a test measures the
// kernel, not input quantization.
package kerneltest
