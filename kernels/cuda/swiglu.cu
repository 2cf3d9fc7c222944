// swiglu.cu: SwiGLU out[N] = silu(gate)·up, silu(z) = z·sigmoid(z), and its
// backward dgate = dout·up·s·(1 + g·(1−s)), dup = dout·g·s with s = sigmoid(g).
// Layout: flat float32 vectors; out may alias gate or up (each element is
// read before it is written by the same thread). Launch: block 256, grid
// ceil(N/256) capped at 4096, grid-stride loop. Float32 math with expf.
// Checked against: kerneltest.SwiGLU/SwiGLUBackward on the SIMT host build.
#include "common.cuh"

KERNEL void __launch_bounds__(256) swiglu_forward(float* out, const float* gate, const float* up, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    float g = gate[i], u = up[i];
    out[i] = g / (1.f + expf(-g)) * u;
  }
}

KERNEL void __launch_bounds__(256) swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                                                   const float* up, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    float g = gate[i], u = up[i], d = dout[i];
    float s = 1.f / (1.f + expf(-g));
    dgate[i] = d * u * s * (1.f + g * (1.f - s));
    dup[i] = d * g * s;
  }
}
