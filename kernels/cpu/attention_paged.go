package cpu

import (
	"unsafe"

	"github.com/x/kernels"
)

// kvRows returns the K and V rows of positions j0 .. j0+nb−1, kv head kvh,
// of s, with their row stride in floats. They are views of s's memory when
// the rows are float32 and evenly strided (a contiguous sequence, or a key
// block that lies inside one block of an F32 pool), else copies into kbuf
// and vbuf ([nb, D], stride D), widened exactly from bf16. Either way the
// attention kernels see the same floats in the same order, so paged
// attention equals contiguous attention bit for bit.
func (b *Backend) kvRows(s *kernels.HostSeq, kvh, j0, nb, kvHeads, d int, kbuf, vbuf []float32) (k, v []float32, stride int) {
	p := &s.Paged
	if p.BlockSize == 0 {
		off := (j0*kvHeads + kvh) * d
		return s.K[off:], s.V[off:], kvHeads * d
	}
	bs := p.BlockSize
	if p.DType == kernels.F32 && j0/bs == (j0+nb-1)/bs {
		return p.F32[p.Offset(false, j0, kvh, kvHeads, d):], p.F32[p.Offset(true, j0, kvh, kvHeads, d):], kvHeads * d
	}
	kn, simd := b.mm()
	fast := simd && p.DType == kernels.BF16 && d%kn.vec == 0
	for i := range nb {
		kr, vr := kbuf[i*d:(i+1)*d], vbuf[i*d:(i+1)*d]
		j := j0 + i
		ko, vo := p.Offset(false, j, kvh, kvHeads, d), p.Offset(true, j, kvh, kvHeads, d)
		switch {
		case p.DType == kernels.F32:
			copy(kr, p.F32[ko:ko+d])
			copy(vr, p.F32[vo:vo+d])
		case fast:
			kn.cvt[1](&kr[0], &p.BF16[ko], d)
			kn.cvt[1](&vr[0], &p.BF16[vo], d)
		default:
			p.Row(kr, false, j, kvh, kvHeads, d)
			p.Row(vr, true, j, kvh, kvHeads, d)
		}
	}
	return kbuf[:nb*d], vbuf[:nb*d], d
}

// kvPtrs is kvRows for the tiled kernel, which reads bf16 rows itself: it
// returns K and V pointers, the matmul kernel dtype (0 f32, 1 bf16) and the
// row stride in bytes. A bf16 key block inside one block of the pool is
// read in place by the bf16 kernels (which widen exactly, as kvRows does);
// everything else goes through kvRows.
func (b *Backend) kvPtrs(s *kernels.HostSeq, kvh, j0, nb, kvHeads, d int, kbuf, vbuf []float32) (k, v unsafe.Pointer, dt, ld int) {
	if p := &s.Paged; p.BlockSize > 0 && p.DType == kernels.BF16 && j0/p.BlockSize == (j0+nb-1)/p.BlockSize {
		return unsafe.Pointer(&p.BF16[p.Offset(false, j0, kvh, kvHeads, d)]), unsafe.Pointer(&p.BF16[p.Offset(true, j0, kvh, kvHeads, d)]),
			1, kvHeads * d * 2
	}
	kr, vr, stride := b.kvRows(s, kvh, j0, nb, kvHeads, d, kbuf, vbuf)
	return unsafe.Pointer(&kr[0]), unsafe.Pointer(&vr[0]), 0, stride * 4
}
