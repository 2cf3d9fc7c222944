package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// dpPath is the AVX-512 path with VDPBF16PS, or the reason this CPU cannot
// run it.
func dpPath() simdPath {
	p := simdPath{name: "avx512", label: "avx512bf16", f: features{avx512: true, avx2: true, avx512bf16: true}}
	if have := detect(); !have.avx512 || !have.avx512bf16 {
		p.missing = "this CPU lacks AVX-512 F/BW/VL/DQ with AVX512_BF16 (or GODEBUG turned one off)"
	}
	return p
}

// TestDPAxpyKernels checks every dpaxpy register block (mr 1–6 × nv 1–4)
// against a float64 sum of the same bf16 products, for 0, 1 and 7 column
// pairs and both accumulate modes, and that the kernel writes nothing
// outside its mr × 16·nv block. Inputs are bf16 values in [−1, 1) with
// init values in [−1, 1), so each output is a float32 sum of at most 15
// terms below 1 in magnitude: 1e-5 bounds its rounding (15 · 15 · 2⁻²⁴
// ≈ 1.3e-5 is the crude worst case; the float32 error of such sums is
// measured around 1e-7).
func TestDPAxpyKernels(t *testing.T) {
	if p := dpPath(); p.missing != "" {
		t.Skip(p.missing)
	}
	const (
		ldc  = 80 // output row stride (floats): 16 sentinel columns past 64
		rows = 8  // output rows: 2+ sentinel rows past mr
		tol  = 1e-5
	)
	rng := rand.New(rand.NewPCG(11, 12))
	bf := func(n int) []uint16 {
		h := make([]uint16, n)
		for i := range h {
			h[i] = kernels.F32ToBF16(float32(2*rng.Float64() - 1))
		}
		return h
	}
	for mr := 1; mr <= 6; mr++ {
		for nv := 1; nv <= 4; nv++ {
			for _, steps := range []int{0, 1, 7} {
				for _, acc := range []int{0, 1} {
					t.Run(fmt.Sprintf("%dx%d_steps%d_acc%d", mr, nv, steps, acc), func(t *testing.T) {
						lda := 2*steps + 2 // bf16 per x row (a pair of padding)
						a := bf(mr * lda)
						panel := bf(max(steps, 1) * 2 * 64) // [steps][64 lanes][2]
						init := make([]float32, rows*ldc)
						for i := range init {
							init[i] = float32(2*rng.Float64() - 1)
						}
						c := append([]float32(nil), init...)
						dpaxpyAsm(mr, nv, unsafe.Pointer(&a[0]), lda*2, 4, unsafe.Pointer(&panel[0]), 64*4, steps, &c[0], ldc*4, acc)
						for i := range rows {
							for j := range ldc {
								if i >= mr || j >= 16*nv {
									require.Equalf(t, init[i*ldc+j], c[i*ldc+j], "wrote outside the block at (%d, %d)", i, j)
									continue
								}
								var want float64
								if acc == 1 {
									want = float64(init[i*ldc+j])
								}
								for p := range steps {
									for h := range 2 {
										want += float64(kernels.BF16ToF32(a[i*lda+2*p+h])) * float64(kernels.BF16ToF32(panel[(p*64+j)*2+h]))
									}
								}
								require.InDeltaf(t, want, c[i*ldc+j], tol, "out[%d, %d]", i, j)
							}
						}
					})
				}
			}
		}
	}
}

// TestMatMulDPPacked checks matMulDPPacked on the shapes that reach its
// every branch: K over several dpkc blocks with a K tail and odd K, K
// below one packT2 step (all through dotTail), N below, at and past
// multiples of 16 (ragged columns through the exact kernels), M past
// mbNT with a short last row group. Each result must equal the reference
// MatMul of x rounded to bf16 within MatMul's tolerance (the products are
// exact in float32 on both sides; only the summation order differs), and
// be bit-identical with one thread and two (the sum order is fixed by
// the blocking, not the scheduling) and run to run.
func TestMatMulDPPacked(t *testing.T) {
	p := dpPath()
	if p.missing != "" {
		t.Skip(p.missing)
	}
	var r ref.Backend
	tol := kerneltest.Tolerance("MatMul")
	one, two := pathBackend(t, p, 1), pathBackend(t, p, 2)
	for _, b := range []*Backend{one, two} {
		require.NoError(t, b.SetMatMulPrecision(kernels.MatMulBF16))
	}
	shapes := [][3]int{
		{16, 16, 16}, {31, 15, 40}, {18, 48, 2*dpkc + 19}, {50, 130, dpkc + 32}, {245, 64, 8},
		{97, 200, 1040}, {mbNT + 1, 80, 33}, {20, 1, 1},
	}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, acc := range []bool{false, true} {
			t.Run(fmt.Sprintf("M%d_N%d_K%d_acc%v", m, n, k, acc), func(t *testing.T) {
				require.Truef(t, one.dpPacked(kernels.Mat{DType: kernels.BF16}, m), "M %d does not take the packed VDPBF16PS path", m)
				rng := rand.New(rand.NewPCG(uint64(m*7919+n), uint64(k)))
				x := uniformF32(rng, m*k, 1/math.Sqrt(float64(k)))
				w := randomMat(rng, kernels.BF16, n, k)
				init := uniformF32(rng, m*n, 1)
				want := append([]float32(nil), init...)
				r.MatMul(kernels.HostF32(want), kernels.HostF32(roundBF16(x)), w, m, acc)
				var got [3][]float32
				for i, b := range []*Backend{one, two, two} {
					got[i] = append([]float32(nil), init...)
					b.MatMul(kernels.HostF32(got[i]), kernels.HostF32(x), w, m, acc)
				}
				kerneltest.CheckClose(t, "out vs reference on rounded x", got[0], want, tol)
				assert.Equal(t, got[0], got[1], "one thread and two differ")
				assert.Equal(t, got[1], got[2], "two runs differ")
			})
		}
	}
}

// TestBF16RowsRounding checks bf16Rows bit for bit against
// kernels.F32ToBF16 on every SIMD path (narrowBF16 on AVX-512), serial
// and split over two workers (m·k past bf16RowsPar), K with and without
// a tail past 16 and odd (the pad zero), on values that probe the
// rounding: ties to even both ways, values that round up across an
// exponent, to infinity, denormals, ±0, ±Inf and NaNs (quiet and
// signalling, which must stay NaN).
func TestBF16RowsRounding(t *testing.T) {
	special := []uint32{
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, // ties to even (down, up), just above, just below
		0x3fffffff, 0x7f7fffff, 0xff7fffff, // round up into the next exponent, to ±Inf
		0x00000001, 0x807fffff, 0x00008000, // denormals
		0x00000000, 0x80000000, 0x7f800000, 0xff800000, // ±0, ±Inf
		0x7fc00000, 0x7f800001, 0xffbfffff, 0x7f80ffff, // NaNs: quiet, signalling, negative, payload in the low half only
	}
	shapes := []struct{ m, k int }{{3, 16}, {2, 37}, {5, 19}, {70, 517}, {64, 1024}}
	for _, p := range simdPaths() {
		t.Run(p.testName(), func(t *testing.T) {
			if p.missing != "" {
				t.Skip(p.missing)
			}
			b := pathBackend(t, p, 2)
			for _, sh := range shapes {
				t.Run(fmt.Sprintf("M%d_K%d", sh.m, sh.k), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(sh.m), uint64(sh.k)))
					x := uniformF32(rng, sh.m*sh.k, 4)
					for i := range x {
						if rng.IntN(3) == 0 {
							x[i] = math.Float32frombits(special[rng.IntN(len(special))])
						}
					}
					h, ld := b.bf16Rows(x, sh.m, sh.k)
					require.Equal(t, (sh.k+1)&^1, ld)
					for i := range sh.m {
						for c := range ld {
							want := uint16(0)
							if c < sh.k {
								want = kernels.F32ToBF16(x[i*sh.k+c])
							}
							if h[i*ld+c] != want {
								require.Failf(t, "bf16Rows", "row %d column %d: x bits %#08x rounded to %#04x, want %#04x",
									i, c, math.Float32bits(x[i*sh.k+c]), h[i*ld+c], want)
							}
						}
					}
				})
			}
		})
	}
}

// BenchmarkMicroKernelDP times the VDPBF16PS register block alone, one
// thread, next to its ceiling: dpaxpy 6×64 over a 512-pair (K 1024)
// bf16 panel (128 KiB, L2) and a 64-pair one (16 KiB, L1), and dpLoop, 24
// independent VDPBF16PS chains. BenchmarkMicroKernel has the float32
// twins (axpy 6×64, fmaLoop).
func BenchmarkMicroKernelDP(b *testing.B) {
	if p := dpPath(); p.missing != "" {
		b.Skip(p.missing)
	}
	a := make([]uint16, 6*1024)
	for i := range a {
		a[i] = kernels.F32ToBF16(float32(i%7) - 3)
	}
	panel, c := make([]uint16, 512*128), make([]float32, 6*64)
	for i := range panel {
		panel[i] = kernels.F32ToBF16(float32(i%5) - 2)
	}
	for _, pairs := range []int{512, 64} {
		b.Run(fmt.Sprintf("dpaxpy_6x64_P%d", pairs), func(b *testing.B) {
			cpu0 := cpuSeconds()
			for range b.N {
				dpaxpyAsm(6, 4, unsafe.Pointer(&a[0]), 1024*2, 4, unsafe.Pointer(&panel[0]), 64*4, pairs, &c[0], 64*4, 1)
			}
			flops(b, 2*6*64*2*float64(pairs), cpu0)
		})
	}
	b.Run("dpLoop", func(b *testing.B) {
		cpu0 := cpuSeconds()
		for range b.N {
			dpLoop(1000)
		}
		flops(b, 1536*1000, cpu0)
	})
}

// BenchmarkMatMulPrecisionCold is BenchmarkMatMulPrecision's batched
// decode and prefill shapes with the weights read from memory, as in a
// model step (1.19 GB of weights, far past the caches): each call takes
// the next of 8 weight matrices, 48 MiB in all, past the 32 MiB L3 of the
// machine it was tuned on.
func BenchmarkMatMulPrecisionCold(b *testing.B) {
	be := New(0)
	defer be.Close()
	const n, k, copies = 3072, 1024, 8
	ws := make([]kernels.Mat, copies)
	for i := range ws {
		ws[i] = benchMat(kernels.BF16, n, k)
	}
	for _, m := range []int{64, 512} {
		x, out := benchVec(m*k), make([]float32, m*n)
		for _, p := range []kernels.MatMulPrecision{kernels.MatMulExact, kernels.MatMulBF16} {
			b.Run(fmt.Sprintf("M%d_N%d_K%d/%s", m, n, k, p), func(b *testing.B) {
				if err := be.SetMatMulPrecision(p); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for i := range b.N {
					be.MatMul(kernels.HostF32(out), kernels.HostF32(x), ws[i%copies], m, false)
				}
				flops(b, 2*float64(m*n*k), cpu0)
			})
		}
	}
}
