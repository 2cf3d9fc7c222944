// adamw.cu: AdamW on float32 param[N], grad[N], moments m[N], v[N], in place:
// m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p = p·(1 − lr·wd) −
// step_size·m / (√v / bc2sqrt + eps), with step_size = lr/(1−β1^step) and
// bc2sqrt = √(1−β2^step) computed on the host in float64 and passed in.
// Launch: block 256, grid ceil(N/256) capped at 4096, grid-stride loop.
// Float32 arithmetic per element. Checked against: kerneltest.AdamW on the
// SIMT host build.
#include "common.cuh"

KERNEL void __launch_bounds__(256) adamw_f32(float* param, const float* grad, float* m, float* v, float beta1,
                                             float beta2, float eps, float decay, float step_size, float bc2sqrt,
                                             long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.f - beta1) * g;
    float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    float p = param[i] * decay;
    p -= step_size * mi / (sqrtf(vi) / bc2sqrt + eps);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
  }
}
