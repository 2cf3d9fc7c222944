//go:build cudahost

package cuda

/*
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"unsafe"

	"github.com/x/kernels"
)

// The buffer ops of Host: memory comes from kernels.HostMemory (host
// slices, embedded in Host); the six data-movement and reduction ops run
// buffer.cu's kernels through the shim on the slices' memory.

// Copy is dst = src, raw or cast between F32 and BF16.
func (h *Host) Copy(dst, src kernels.Buffer) {
	kernels.CheckCopy(dst, src)
	n := dst.Len()
	if n == 0 {
		return
	}
	pd, es := hostData(dst)
	ps, _ := hostData(src)
	d := elementwisePlan(n)
	launched("Copy", C.host_copy_cast(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		pd, ps, C.int(dst.DType()), C.int(src.DType()), C.int(es), C.long(n)))
}

// GatherRows is dst[i, :] = src[idx[i], :].
func (h *Host) GatherRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("GatherRows", dst, src, idx, cols)
	rowIndices("GatherRows", idx.I32(), rows)
	if idx.Len() == 0 || cols == 0 {
		return
	}
	pd, es := hostData(dst)
	ps, _ := hostData(src)
	d := elementwisePlan(idx.Len() * cols)
	launched("GatherRows", C.host_gather_rows(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		pd, ps, i32p(idx.I32()), C.int(es), C.long(idx.Len()), C.long(cols)))
}

// ScatterRows is dst[idx[i], :] = src[i, :].
func (h *Host) ScatterRows(dst, src, idx kernels.Buffer, cols int) {
	rows := kernels.CheckRows("ScatterRows", src, dst, idx, cols)
	rowIndices("ScatterRows", idx.I32(), rows)
	if idx.Len() == 0 || cols == 0 {
		return
	}
	pd, es := hostData(dst)
	ps, _ := hostData(src)
	d := elementwisePlan(idx.Len() * cols)
	launched("ScatterRows", C.host_scatter_rows(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		pd, ps, i32p(idx.I32()), C.int(es), C.long(idx.Len()), C.long(cols)))
}

// Transpose is dst[cols, rows] = src[rows, cols]ᵀ.
func (h *Host) Transpose(dst, src kernels.Buffer, rows, cols int) {
	kernels.CheckTranspose(dst, src, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	pd, es := hostData(dst)
	ps, _ := hostData(src)
	d := elementwisePlan(rows * cols)
	launched("Transpose", C.host_transpose_rows(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
		pd, ps, C.int(es), C.long(rows), C.long(cols)))
}

// SumSquares is Σ x² over the F32 buffers, in float64.
func (h *Host) SumSquares(xs ...kernels.Buffer) (float64, error) {
	kernels.CheckReduce("SumSquares", xs)
	out := []float64{0}
	d := singleBlockPlan()
	for _, x := range xs {
		if x.Len() == 0 {
			continue
		}
		launched("SumSquares", C.host_sum_squares(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			(*C.double)(unsafe.Pointer(&out[0])), f32p(x.F32()), C.long(x.Len())))
	}
	return out[0], nil
}

// AllFinite reports whether no element of the F32 buffers is NaN or ±Inf.
func (h *Host) AllFinite(xs ...kernels.Buffer) (bool, error) {
	kernels.CheckReduce("AllFinite", xs)
	out := []int32{1}
	for _, x := range xs {
		if x.Len() == 0 {
			continue
		}
		d := elementwisePlan(x.Len())
		launched("AllFinite", C.host_all_finite(C.uint(d.gx), C.uint(d.gy), C.uint(d.gz), C.uint(d.bx), C.uint(d.by), C.uint(d.bz), h.w(),
			i32p(out), f32p(x.F32()), C.long(x.Len())))
	}
	return out[0] == 1, nil
}
