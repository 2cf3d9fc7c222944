// rmsnorm.cu: RMSNorm out[R,C] = w[C]·x·rstd, rstd = 1/√(mean(x²)+eps) per
// row (per-head q/k norm is R = T·H, C = D), and its backward
// dx = rstd·w·dy − x·(Σ w·dy·x)·rstd³/C, dw[C] += Σ_rows dy·x·rstd.
// Layouts: row-major float32. out may alias x (each thread reads its
// elements before writing them).
// add_rmsnorm: x += res, then the forward (kernels.AddRMSNormer).
// Launch: forward, add_rmsnorm and dx: block 256, grid R (one block per row, threads
// strided over C, block_sum in a fixed tree). dw: block 256, grid
// ceil(C/256), one thread per column summing rows in order with the rstd
// the dx kernel stored in the scratch rstd[R]: deterministic, no atomics.
// Checked against: kerneltest.RMSNorm/RMSNormBackward on the SIMT host build.
#include "common.cuh"

namespace rmsnorm_impl {
// norm_row writes o = w·xr·rstd for one row whose per-thread partial sum
// of squares is ss (each thread's elements c = threadIdx.x + k·blockDim.x).
__device__ __forceinline__ void norm_row(float* o, const float* xr, const float* w, int C, float eps, float ss) {
  ss = block_sum(ss);
  float rstd = 1.f / sqrtf(ss / float(C) + eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = w[c] * (xr[c] * rstd);
}
}  // namespace rmsnorm_impl
using namespace rmsnorm_impl;

KERNEL void __launch_bounds__(256) rmsnorm_forward(float* out, const float* x, const float* w, int R, int C,
                                                   float eps) {
  int r = blockIdx.x;
  if (r >= R) return;
  const float* xr = x + long(r) * C;
  float ss = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) ss += xr[c] * xr[c];
  norm_row(out + long(r) * C, xr, w, C, eps, ss);
}

// add_rmsnorm is x += res, then rmsnorm_forward of x into out (the
// residual add fused into the next norm, kernels.AddRMSNormer): each
// thread adds its own elements and sums their squares in the order
// rmsnorm_forward does, so the result is bit for bit the two ops. out must
// not alias x or res.
KERNEL void __launch_bounds__(256) add_rmsnorm(float* out, float* x, const float* res, const float* w, int R, int C,
                                               float eps) {
  int r = blockIdx.x;
  if (r >= R) return;
  float* xr = x + long(r) * C;
  const float* rr = res + long(r) * C;
  float ss = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float v = xr[c] + rr[c];
    xr[c] = v;
    ss += v * v;
  }
  norm_row(out + long(r) * C, xr, w, C, eps, ss);
}

KERNEL void __launch_bounds__(256) rmsnorm_backward_dx(float* dx, float* rstd_out, const float* dout,
                                                       const float* x, const float* w, int R, int C, float eps) {
  int r = blockIdx.x;
  if (r >= R) return;
  const float* xr = x + long(r) * C;
  const float* dy = dout + long(r) * C;
  float ss = 0.f, dot = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    ss += xr[c] * xr[c];
    dot += w[c] * dy[c] * xr[c];
  }
  ss = block_sum(ss);
  dot = block_sum(dot);
  float rstd = 1.f / sqrtf(ss / float(C) + eps);
  float k = dot * rstd * rstd * rstd / float(C);
  float* d = dx + long(r) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) d[c] = rstd * w[c] * dy[c] - xr[c] * k;
  if (threadIdx.x == 0) rstd_out[r] = rstd;
}

KERNEL void __launch_bounds__(256) rmsnorm_backward_dw(float* dw, const float* dout, const float* x,
                                                       const float* rstd, int R, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.f;
  for (int r = 0; r < R; r++) acc += dout[long(r) * C + c] * x[long(r) * C + c] * rstd[r];
  dw[c] += acc;
}
