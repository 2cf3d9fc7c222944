// rmsnorm.cu: RMSNorm out[R,C] = w[C]·x·rstd, rstd = 1/√(mean(x²)+eps) per
// row (per-head q/k norm is R = T·H, C = D), and its backward
// dx = rstd·w·dy − x·(Σ w·dy·x)·rstd³/C, dw[C] += Σ_rows dy·x·rstd.
// Layouts: row-major float32. out may alias x (each thread reads its
// elements before writing them).
// Launch: forward and dx: block 256, grid R (one block per row, threads
// strided over C, block_sum in a fixed tree). dw: block 256, grid
// ceil(C/256), one thread per column summing rows in order with the rstd
// the dx kernel stored in the scratch rstd[R]: deterministic, no atomics.
// Checked against: kerneltest.RMSNorm/RMSNormBackward on the SIMT host build.
#include "common.cuh"

KERNEL void __launch_bounds__(256) rmsnorm_forward(float* out, const float* x, const float* w, int R, int C,
                                                   float eps) {
  int r = blockIdx.x;
  if (r >= R) return;
  const float* xr = x + long(r) * C;
  float ss = 0.f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_sum(ss);
  float rstd = 1.f / sqrtf(ss / float(C) + eps);
  float* o = out + long(r) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = w[c] * (xr[c] * rstd);
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
