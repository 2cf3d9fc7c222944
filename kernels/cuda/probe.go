package cuda

import (
	"unsafe"

	"github.com/x/kernels"
)

// The SIMT probes (simt_probe.cu) through the one launch path: the host
// build's tests check the shim with them, the GPU check the hardware, with
// the same launches.

// probeMMA runs simt_probe_mma: d[16,8] = a[16,16]·b[16,8] + c (a, b bf16
// bits) through one mma.sync, and waits.
func (dev *Device) probeMMA(d []float32, a, b []uint16, c []float32) error {
	s := dev.begin("probe mma")
	po, pa, pb, pc := s.out(kernels.HostF32(d)), s.in(kernels.HostBF16(a)), s.in(kernels.HostBF16(b)), s.in(kernels.HostF32(c))
	s.launch("simt_probe_mma", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(po).ptr(pa).ptr(pb).ptr(pc))
	s.end()
	return dev.err
}

// probeBarrier runs simt_probe_barrier on one block of len(out) threads,
// and waits.
func (dev *Device) probeBarrier(out []int32) error {
	s := dev.begin("probe barrier")
	s.launch("simt_probe_barrier", dims{gx: 1, gy: 1, gz: 1, bx: uint32(len(out)), by: 1, bz: 1}, argsOf().ptr(s.out(kernels.HostI32(out))))
	s.end()
	return dev.err
}

// probeLdmatrix runs simt_probe_ldmatrix on one warp (out[32·12],
// m[32·8]) and waits.
func (dev *Device) probeLdmatrix(out []uint32, m []uint16) error {
	s := dev.begin("probe ldmatrix")
	po, pm := s.out(kernels.HostI32(u32AsI32(out))), s.in(kernels.HostBF16(m))
	s.launch("simt_probe_ldmatrix", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(po).ptr(pm))
	s.end()
	return dev.err
}

// probeCpAsync runs simt_probe_cp_async on one warp (out[2·384],
// src[384]) and waits.
func (dev *Device) probeCpAsync(out, src []float32) error {
	s := dev.begin("probe cp.async")
	po, ps := s.out(kernels.HostF32(out)), s.in(kernels.HostF32(src))
	s.launch("simt_probe_cp_async", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(po).ptr(ps))
	s.end()
	return dev.err
}

// probeMMAChain runs simt_probe_mma_chain (d[16,8] = a[16,r]·b[r,8] in one
// chain of mma.sync, a split into three bf16 terms) and waits.
func (dev *Device) probeMMAChain(d, a []float32, b []uint16, r int) error {
	s := dev.begin("probe mma chain")
	po, pa, pb := s.out(kernels.HostF32(d)), s.in(kernels.HostF32(a)), s.in(kernels.HostBF16(b))
	s.launch("simt_probe_mma_chain", dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}, argsOf().ptr(po).ptr(pa).ptr(pb).i32(r))
	s.end()
	return dev.err
}

// u32AsI32 views a []uint32 as []int32 (the same bits).
func u32AsI32(x []uint32) []int32 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&x[0])), len(x))
}

// probeBroken runs one of host.cc's deliberately broken kernels
// ("diverge", "mask", "ldmatrix": the shim must fail the launch;
// "cp_async": a read before the wait, whose values TestCpAsyncLandsAtWait
// checks) on one warp and waits.
func (dev *Device) probeBroken(kernel string, out []int32) error {
	s := dev.begin("probe " + kernel)
	var p devptr
	if kernel == "cp_async" {
		p = s.inout(kernels.HostI32(out)) // its source
	} else {
		p = s.out(kernels.HostI32(out))
	}
	one := dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}
	switch kernel {
	case "diverge":
		s.launch("simt_broken_diverge", one, argsOf().ptr(p))
	case "mask":
		s.launch("simt_broken_mask", one, argsOf().ptr(p))
	case "ldmatrix":
		s.launch("simt_broken_ldmatrix", one, argsOf().ptr(p))
	case "cp_async":
		s.launch("simt_broken_cp_async", one, argsOf().ptr(p))
	}
	s.end()
	return dev.err
}
