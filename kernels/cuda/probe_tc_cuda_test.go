//go:build cuda

package cuda

import (
	"fmt"
	"testing"
)

// The ldmatrix, cp.async and tensor-core probes on the GPU, with the host
// build's expectations (probe_tc_test.go): a pass on both says the SIMT
// shim emulates what the hardware does.

// TestGPUProbeLdmatrix runs simt_probe_ldmatrix on the device.
func TestGPUProbeLdmatrix(t *testing.T) {
	d := openDevice(t)
	m := ldmatrixInput()
	out := make([]uint32, 32*12)
	d.run("probe ldmatrix", func(s *session) {
		s.launch("simt_probe_ldmatrix", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(output(s, out, false)).ptr(upload(s, m)))
	})
	checkLdmatrix(t, out, m)
}

// TestGPUProbeCpAsync runs simt_probe_cp_async on the device.
func TestGPUProbeCpAsync(t *testing.T) {
	d := openDevice(t)
	src := cpAsyncInput()
	out := make([]float32, 2*len(src))
	d.run("probe cp.async", func(s *session) {
		s.launch("simt_probe_cp_async", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(output(s, out, false)).ptr(upload(s, src)))
	})
	checkCpAsync(t, out, src)
}

// TestGPUProbeMMAChain replays the H200's failed reduction through
// simt_probe_mma_chain on the device: the hardware must give again what
// the first gemm_bf16_wn gave on 2026-12-04 (and what simt.h's model
// gives: TestTensorCoreModelMatchesH200).
func TestGPUProbeMMAChain(t *testing.T) {
	d := openDevice(t)
	chain := func(out, a []float32, b []uint16, r int) error {
		return d.exec("probe mma chain", func(s *session) {
			s.launch("simt_probe_mma_chain", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1},
				argsOf().ptr(output(s, out, false)).ptr(upload(s, a)).ptr(upload(s, b)).i32(r))
		})
	}
	for _, c := range h200Cases() {
		t.Run(fmt.Sprintf("acc%v", c.acc), func(t *testing.T) { checkH200Case(t, c, chain) })
	}
}
