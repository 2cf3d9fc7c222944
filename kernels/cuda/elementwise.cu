// elementwise.cu: Add (dst[N] += src[N]) and Scale (x[N] *= s).
// Layout: flat float32 vectors. Launch: block 256, grid ceil(N/256) capped
// at 4096 with a grid-stride loop. One float32 add or multiply per element,
// the same rounding as the reference: bit-exact.
// Checked against: kerneltest.Add/Scale (bit-exact) on the SIMT host build.
#include "common.cuh"

KERNEL void __launch_bounds__(256) add_f32(float* dst, const float* src, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    dst[i] = dst[i] + src[i];
}

KERNEL void __launch_bounds__(256) scale_f32(float* x, float s, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    x[i] = x[i] * s;
}
