package cpu

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/kernels/ref"
)

// simdPath is one instruction-set path the tests force a Backend onto.
type simdPath struct {
	name    string   // as Backend.SIMD names it
	label   string   // the subtest's name when it is not name (a variant of a path)
	f       features // what the Backend is told it may use
	missing string   // why this CPU cannot run the path; "" when it can
}

// simdPaths lists every path the kernels have, best first, each with the
// features that force it. A path the CPU lacks carries the reason, so the
// tests skip it by name whatever machine runs them: the AVX-512 path
// (where the CPU has it), the AVX2 path (forced on AVX-512 machines too)
// and the portable path (always).
func simdPaths() []simdPath {
	have := detect()
	ps := []simdPath{
		{name: "avx512", f: features{avx512: true, avx2: true}},
		{name: "avx2", f: features{avx2: true}},
		{name: "generic"},
	}
	if !have.avx512 {
		ps[0].missing = "this CPU lacks AVX-512 F/BW/VL/DQ (or GODEBUG turned it off)"
	}
	if !have.avx2 {
		ps[1].missing = "this CPU lacks AVX2 + FMA + F16C (or GODEBUG turned it off)"
	}
	return ps
}

// testName is the path's subtest name: its label, or else its name.
func (p simdPath) testName() string {
	if p.label != "" {
		return p.label
	}
	return p.name
}

// pathBackend is a Backend of threads threads forced onto path p, closed
// when the test ends.
func pathBackend(t testing.TB, p simdPath, threads int) *Backend {
	b := New(threads)
	b.simd = p.f
	t.Cleanup(b.Close)
	if got := b.SIMD(); got != p.name {
		t.Fatalf("forced path %s, Backend reports %s", p.name, got)
	}
	return b
}

// forEachPath runs fn as a subtest per SIMD path, named by the path, and
// skips (with the reason) the paths this CPU lacks.
func forEachPath(t *testing.T, fn func(t *testing.T, p simdPath)) {
	for _, p := range simdPaths() {
		t.Run(p.name, func(t *testing.T) {
			if p.missing != "" {
				t.Skipf("%s path not run: %s", p.name, p.missing)
			}
			fn(t, p)
		})
	}
}

// forEachBackend runs fn per SIMD path on two threads (workers) and on one
// (the caller alone): subtests <path>/threads2 and <path>/threads1.
func forEachBackend(t *testing.T, fn func(t *testing.T, b *Backend)) {
	forEachPath(t, func(t *testing.T, p simdPath) {
		for _, threads := range []int{2, 1} {
			b := pathBackend(t, p, threads)
			t.Run(fmt.Sprintf("threads%d", threads), func(t *testing.T) { fn(t, b) })
		}
	})
}

// TestSIMDPaths checks the path list itself: the generic path always runs,
// the detected path is among those that run, and each forced Backend
// reports the path it was forced onto.
func TestSIMDPaths(t *testing.T) {
	ps := simdPaths()
	if ps[len(ps)-1].name != "generic" || ps[len(ps)-1].missing != "" {
		t.Fatalf("the generic path must always run: %+v", ps[len(ps)-1])
	}
	def := New(1)
	defer def.Close()
	found := false
	for _, p := range ps {
		if p.name == def.SIMD() {
			found = true
			if p.missing != "" {
				t.Errorf("the detected path %s is marked missing: %s", p.name, p.missing)
			}
		}
		if p.missing == "" {
			pathBackend(t, p, 1) // fails the test if SIMD() disagrees
		} else {
			t.Logf("%s path not available: %s", p.name, p.missing)
		}
	}
	if !found {
		t.Errorf("the detected path %q is not in the path list", def.SIMD())
	}
}

// TestMatMulBlockEdges runs MatMul's direct and packed paths (M ≥ mBig) on every
// SIMD path against the reference at shapes the conformance suite leaves
// out: K over two kc chunks with a tail, N over several nbNT blocks with
// ragged columns, M over an mbNT block, on both sides of mDirect, for
// each weight dtype, = and +=.
// Inputs are uniform in (−1, 1), so Σ|x·w| is about K/4 (525 at K = 2100)
// and float32 sums in another order differ by ~1e-5 absolute near zero
// outputs: ATol 1e-4 is 2e-7 of that scale (the suite's MatMul tolerance
// is tuned to its own, smaller inputs).
func TestMatMulBlockEdges(t *testing.T) {
	tol := kerneltest.Tol{ATol: 1e-4, RTol: 1e-5, NMSE: 1e-10}
	var r ref.Backend
	forEachPath(t, func(t *testing.T, p simdPath) {
		b := pathBackend(t, p, 2)
		for _, s := range [][3]int{{40, 70, 2100}, {mDirect, 70, 2100}, {250, 45, 300}, {16, 8, 7}} {
			m, n, k := s[0], s[1], s[2]
			for _, dt := range []kernels.DType{kernels.F32, kernels.BF16, kernels.F16} {
				w := matAs(dt, bwRand(uint64(n*k), n*k, 1), n, k)
				x := bwRand(uint64(m*k+1), m*k, 1)
				for _, acc := range []bool{false, true} {
					got, want := bwRand(5, m*n, 1), bwRand(5, m*n, 1)
					b.MatMul(kernels.HostF32(got), kernels.HostF32(x), w, m, acc)
					r.MatMul(kernels.HostF32(want), kernels.HostF32(x), w, m, acc)
					kerneltest.CheckClose(t, fmt.Sprintf("M%d_N%d_K%d_%v_acc%v", m, n, k, dt, acc), got, want, tol)
				}
			}
		}
	})
}
