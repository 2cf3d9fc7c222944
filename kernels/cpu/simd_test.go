package cpu

import (
	"fmt"
	"testing"
)

// simdPath is one instruction-set path the tests force a Backend onto.
type simdPath struct {
	name    string   // as Backend.SIMD names it
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
