package cuda

import (
	"fmt"
	"unsafe"

	"github.com/x/kernels"
)

// logitsRowThreads is the block size of the per-row log-softmax kernels.
const logitsRowThreads = 512

// LogSoftmaxGather writes logp[R] (and entropy[R] if not empty); device
// targets out of range are reported at the next sync point.
func (d *Device) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGather"
	kernels.CheckLogSoftmaxGather(logp, entropy, logits, targets, rows, v)
	if rows == 0 {
		return
	}
	s := d.begin(op)
	pl, pt := s.in(logits.Slice(0, rows*v)), s.in(targets.Slice(0, rows))
	plp := s.inout(logp.Slice(0, rows))
	var pe devptr
	if entropy.Len() > 0 {
		pe = s.inout(entropy.Slice(0, rows))
	}
	s.launch("logsoftmax_gather", rowPlan(rows, logitsRowThreads), argsOf().ptr(plp).ptr(pe).ptr(pl).ptr(pt).i32(rows).i32(v).
		ptr(d.slot(stLogSoftmaxGather)))
	s.end()
}

// LogSoftmaxGatherBackward writes dlogits[R,V], with the entropy term when
// dentropy is not empty. dlogits may alias logits (the kernel reads each
// element before its thread writes it).
func (d *Device) LogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy kernels.Buffer, rows, v int) {
	const op = "LogSoftmaxGatherBackward"
	kernels.CheckLogSoftmaxGatherBackward(dlogits, logits, targets, dlogp, dentropy, rows, v)
	if rows == 0 {
		return
	}
	s := d.begin(op)
	pdl, pl := s.inout(dlogits.Slice(0, rows*v)), s.in(logits.Slice(0, rows*v))
	pt, pdlp := s.in(targets.Slice(0, rows)), s.in(dlogp.Slice(0, rows))
	var pde devptr
	if dentropy.Len() > 0 {
		pde = s.in(dentropy.Slice(0, rows))
	}
	s.launch("logsoftmax_gather_backward", rowPlan(rows, logitsRowThreads),
		argsOf().ptr(pdl).ptr(pl).ptr(pt).ptr(pdlp).ptr(pde).i32(rows).i32(v).ptr(d.slot(stLogSoftmaxGatherBackward)))
	s.end()
}

// Softmax replaces each row of x[R,V] by its softmax.
func (d *Device) Softmax(x kernels.Buffer, rows, v int) {
	const op = "Softmax"
	kernels.CheckSoftmax(x, rows, v)
	if rows == 0 || v == 0 {
		return
	}
	s := d.begin(op)
	s.launch("softmax_rows", rowPlan(rows, logitsRowThreads), argsOf().ptr(s.inout(x.Slice(0, rows*v))).i32(rows).i32(v))
	s.end()
}

// Argmax returns the first index of the largest value of x: a sync point.
func (d *Device) Argmax(x kernels.Buffer) (int32, error) {
	const op = "Argmax"
	kernels.CheckArgmax(x)
	var res int32
	s := d.begin(op)
	po, px := s.scratch(4), s.in(x)
	s.launch("argmax_f32", singleBlockPlan(), argsOf().ptr(po).ptr(px).i32(x.Len()))
	if s.err == nil {
		s.outs = append(s.outs, hostCopy{host: unsafe.Pointer(&res), dev: po, n: 4})
	}
	s.end()
	if s.err != nil {
		return 0, d.err
	}
	return res, nil
}

// SampleRows draws one token per row of logits[R,V] (see kernels.Backend).
// Its parameters and uniforms are read where they are: a device Buffer in
// place (a recorded step replays with what was uploaded there since), a
// host one staged.
func (d *Device) SampleRows(ids, logp, fullLogp, logits kernels.Buffer, args kernels.SampleArgs, rows, v int) {
	const op = "SampleRows"
	kernels.CheckSampleRows(ids, logp, fullLogp, logits, args, rows, v)
	if rows == 0 {
		return
	}
	s := d.begin(op)
	pl := s.in(logits.Slice(0, rows*v))
	pp, pu := s.in(args.Params.Slice(0, rows*kernels.SampleParamWords)), s.in(args.U.Slice(0, rows*kernels.SampleUniformWords))
	if pu%8 != 0 {
		panic(fmt.Sprintf("kernels/cuda: SampleRows: u at device address %#x, not a multiple of 8 bytes", pu))
	}
	pi, plp, pf := s.inout(ids.Slice(0, rows)), s.inout(logp.Slice(0, rows)), s.inout(fullLogp.Slice(0, rows))
	s.launch("sample_rows", rowPlan(rows, 512), argsOf().ptr(pi).ptr(plp).ptr(pf).ptr(pl).ptr(pp).ptr(pu).i32(rows).i32(v))
	s.end()
}
