package cuda

import "github.com/x/kernels"

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

// probeBroken runs one of host.cc's deliberately broken kernels
// ("diverge", "mask") on one warp and waits: the shim must fail the
// launch.
func (dev *Device) probeBroken(kernel string, out []int32) error {
	s := dev.begin("probe " + kernel)
	p := s.out(kernels.HostI32(out))
	one := dims{gx: 1, gy: 1, gz: 1, bx: 32, by: 1, bz: 1}
	switch kernel {
	case "diverge":
		s.launch("simt_broken_diverge", one, argsOf().ptr(p))
	case "mask":
		s.launch("simt_broken_mask", one, argsOf().ptr(p))
	}
	s.end()
	return dev.err
}
