package kerneltest

import (
	"fmt"
	"math"
	"testing"

	"github.com/x/kernels"
)

// MatMulMany checks a backend's kernels.MatMulManyer (skipped when the
// backend does not implement it) against the unfused sequence it
// replaces: each output must equal the backend's own MatMul of the same
// weight bit for bit, for the Q/K/V-like (three weights of two widths)
// and gate/up-like (two) shapes of a small layer, M from decode (1, 5)
// across tile sizes (17, 130), every weight dtype (mixed in one call too),
// and a Qwen3-0.6B-wide Q/K/V in bf16 at M 1; at the exact precision
// and, when the backend has a MatMulPrecisionSetter, at MatMulBF16.
func MatMulMany(t *testing.T, b kernels.Backend) {
	mm, ok := b.(kernels.MatMulManyer)
	if !ok {
		t.Skipf("%T does not implement kernels.MatMulManyer", b)
	}
	precs := []kernels.MatMulPrecision{kernels.MatMulExact}
	ps, hasPrec := b.(kernels.MatMulPrecisionSetter)
	if hasPrec {
		precs = append(precs, kernels.MatMulBF16)
		defer restorePrecision(t, ps)()
	}
	shapes := []struct {
		name string
		ns   []int
		k    int
	}{
		{"qkv_small", []int{64, 32, 32}, 48},
		{"gateup_small", []int{90, 90}, 33},
		{"qkv_qwen3", []int{2048, 1024, 1024}, 1024},
	}
	for _, prec := range precs {
		if hasPrec {
			if err := ps.SetMatMulPrecision(prec); err != nil {
				t.Fatalf("SetMatMulPrecision(%s): %v", prec, err)
			}
		}
		for _, s := range shapes {
			for _, m := range []int{1, 5, 17, 130} {
				dtss := [][]kernels.DType{{kernels.BF16}, {kernels.F32}, {kernels.F16}, {kernels.BF16, kernels.F32, kernels.F16}}
				if s.k >= 1024 {
					if m > 1 {
						continue // the wide layer at decode only (slow on a SIMT host build)
					}
					dtss = dtss[:1]
				}
				for _, dts := range dtss {
					name := fmt.Sprintf("%s_%s_M%d_K%d_%v", prec, s.name, m, s.k, dts)
					t.Run(name, func(t *testing.T) {
						rng := newRNG("MatMulMany" + name)
						x := uniform(rng, m*s.k, 1/math.Sqrt(float64(s.k)))
						ws := make([]kernels.Mat, len(s.ns))
						outs := make([]kernels.Buffer, len(s.ns))
						got := make([][]float32, len(s.ns))
						for i, n := range s.ns {
							ws[i] = randMat(rng, dts[i%len(dts)], n, s.k, 1)
							got[i] = padded(uniform(rng, m*n, 1), 5) // overwritten, not accumulated
							outs[i] = kernels.HostF32(got[i][:m*n])
						}
						mm.MatMulMany(outs, kernels.HostF32(x), ws, m)
						for i, n := range s.ns {
							want := make([]float32, m*n)
							b.MatMul(kernels.HostF32(want), kernels.HostF32(x), ws[i], m, false)
							CheckExact(t, fmt.Sprintf("output %d vs MatMul", i), got[i][:m*n], want)
							CheckExact(t, fmt.Sprintf("output %d past its end", i), got[i][m*n:], padded(nil, 5))
						}
					})
				}
			}
		}
	}
}
