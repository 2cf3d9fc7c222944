// buffer.cu: the data-movement and reduction ops of the backend-owned
// buffers (kernels.Backend's Copy, GatherRows, ScatterRows, Transpose,
// SumSquares, AllFinite).
//
// Layouts: flat element arrays of es bytes per element (4: F32 or I32, 2:
// BF16 or F16), moved as raw bits; rows are `cols` contiguous elements.
// copy_cast: dst[i] = src[i] for i < n, raw bits when the dtypes agree,
// else F32 → BF16 (round to nearest even, as kernels.F32ToBF16) or BF16 →
// F32 (exact). gather_rows: dst[i·cols + c] = src[idx[i]·cols + c];
// scatter_rows: dst[idx[i]·cols + c] = src[i·cols + c] (indices distinct);
// for both, an index outside [0, rows) (the table's rows) is skipped and
// reported in the status slot (common.cuh, report_bad_index). transpose: dst[j·rows + i] =
// src[i·cols + j]. Launch (all four): elementwisePlan(n) in plan.go, 256
// threads, grid-stride loop, one element per thread per step.
// sum_squares: *out += Σ x[i]² in double, one block of 512 threads
// (singleBlockPlan): per-thread double partials over a stride of 512,
// then a shared-memory tree; one launch per buffer, so the buffers add in
// order. all_finite: *out = 0 if any x[i] is NaN or ±Inf (every writer
// stores the same 0, so the race is benign); elementwisePlan(n).
// store_words: dst[i] = w_i for i < n ≤ 16 (64-bit words passed by value):
// how a small descriptor reaches device memory inside a captured graph,
// where an upload cannot be recorded (the words are the launch's
// parameters, which the graph keeps). Launch: one block of 32 threads.
// Assumptions: no aliasing between dst and src; n, rows·cols < 2^63.
// Checked against: kernels/ref through kerneltest.Copy, GatherRows,
// ScatterRows, Transpose, SumSquares, AllFinite on the SIMT host build.
#include "common.cuh"

__device__ __forceinline__ void move_elem(void* dst, long di, const void* src, long si, int es) {
  if (es == 4) {
    static_cast<uint32_t*>(dst)[di] = static_cast<const uint32_t*>(src)[si];
  } else {
    static_cast<uint16_t*>(dst)[di] = static_cast<const uint16_t*>(src)[si];
  }
}

KERNEL void __launch_bounds__(256) copy_cast(void* dst, const void* src, int dt_dst, int dt_src, int es, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    if (dt_dst == dt_src) {
      move_elem(dst, i, src, i, es);
    } else if (dt_dst == DT_BF16) {
      static_cast<uint16_t*>(dst)[i] = f32_to_bf16(static_cast<const float*>(src)[i]);
    } else {
      static_cast<float*>(dst)[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    }
  }
}

KERNEL void __launch_bounds__(256) gather_rows(void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols,
                                             long rows, int* status) {
  long n = nidx * cols;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    long r = i / cols, c = i % cols;
    int id = idx[r];
    if (id < 0 || id >= rows) {
      if (c == 0) report_bad_index(status, r, id, rows);
      continue;
    }
    move_elem(dst, i, src, long(id) * cols + c, es);
  }
}

KERNEL void __launch_bounds__(256) scatter_rows(void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols,
                                             long rows, int* status) {
  long n = nidx * cols;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    long r = i / cols, c = i % cols;
    int id = idx[r];
    if (id < 0 || id >= rows) {
      if (c == 0) report_bad_index(status, r, id, rows);
      continue;
    }
    move_elem(dst, long(id) * cols + c, src, i, es);
  }
}

KERNEL void __launch_bounds__(256) transpose_rows(void* dst, const void* src, int es, long rows, long cols) {
  long n = rows * cols;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    long r = i / cols, c = i % cols;
    move_elem(dst, c * rows + r, src, i, es);
  }
}

KERNEL void __launch_bounds__(512) sum_squares(double* out, const float* x, long n) {
  __shared__ double part[512];
  double s = 0;
  for (long i = threadIdx.x; i < n; i += blockDim.x) {
    double v = x[i];
    s += v * v;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (int(threadIdx.x) < o) part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] += part[0];
}

KERNEL void __launch_bounds__(256) all_finite(int32_t* out, const float* x, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) out[0] = 0;  // exponent all ones: Inf or NaN
  }
}

KERNEL void __launch_bounds__(32) store_words(uint64_t* dst, int n, long w0, long w1, long w2, long w3, long w4, long w5,
                                              long w6, long w7, long w8, long w9, long w10, long w11, long w12,
                                              long w13, long w14, long w15) {
  const long w[16] = {w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15};
  int i = threadIdx.x;
  if (i < n && i < 16) dst[i] = uint64_t(w[i]);
}
