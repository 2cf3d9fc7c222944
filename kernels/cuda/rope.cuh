// rope.cuh: the rotation of RoPE, shared by rope_f32 (rope.cu) and the
// KV write with RoPE fused in (kvcache.cu), so both round identically.
// Angles, sin/cos and the rotation are in float64 like the reference (one
// float32 rounding per output).
#pragma once
#include "common.cuh"

// rope_sincos returns sign·sin and cos of pair i's angle at position p:
// p / theta^(2i/D).
__device__ __forceinline__ void rope_sincos(int p, int i, int D, double theta, double sign, double& s, double& c) {
  double angle = double(p) / pow(theta, double(2 * i) / double(D));
  s = sin(angle) * sign;
  c = cos(angle);
}

// rope_rotate rotates the pair (x[i], x[i+D/2]) of one head by (s, c).
__device__ __forceinline__ void rope_rotate(float* x, int i, int half, double s, double c) {
  double a = x[i], b = x[i + half];
  x[i] = float(a * c - b * s);
  x[i + half] = float(b * c + a * s);
}
