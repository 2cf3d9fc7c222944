// rope.cu: RoPE on x[T,H,D] in place, rotate-half (NeoX / Hugging Face)
// convention: for i < D/2, angle = sign·pos[t]/theta^(2i/D), and
// (x[i], x[i+D/2]) → (x[i]·cos − x[i+D/2]·sin, x[i+D/2]·cos + x[i]·sin);
// sign = −1 is the backward (inverse) rotation.
// Angles, sin/cos and the rotation are in float64 like the reference (one
// float32 rounding per output; rope.cuh, shared with the fused KV write).
// Launch: block 256, grid ceil(T·D/2 / 256); thread (t, i) rotates pair i
// of every head of token t. D must be even (checked by the caller).
// Checked against: kerneltest.RoPE/RoPEBackward on the SIMT host build.
#include "rope.cuh"

KERNEL void __launch_bounds__(256) rope_f32(float* x, const int32_t* pos, int T, int H, int D, double theta,
                                            double sign) {
  int half = D / 2;
  long idx = blockIdx.x * long(blockDim.x) + threadIdx.x;
  if (idx >= long(T) * half) return;
  int t = int(idx / half), i = int(idx % half);
  double s, c;
  rope_sincos(pos[t], i, D, theta, sign, s, c);
  for (int h = 0; h < H; h++) rope_rotate(x + (long(t) * H + h) * D, i, half, s, c);
}
