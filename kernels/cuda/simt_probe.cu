// simt_probe.cu: probes of the SIMT shim's emulation, built for both the
// GPU and the host, so the same probe can confirm on a device what the
// host build assumes.
//
// simt_probe_mma: one warp (block 32, grid 1) runs one
// mma.sync.m16n8k16 bf16 → f32: lane l loads its A (16×16 row-major bf16
// bits, a[16·16]), B (16×8, b[k·8 + n]) and C (16×8 f32) elements by the
// PTX ISA fragment tables (written out here independently of matmul.cu)
// and stores its D elements to d[16·8] by the same tables. A test compares
// d with A·B + C computed directly.
// simt_probe_barrier: one block of n ≤ 1024 threads (multiple of 32);
// thread i writes i+1 to shared memory, __syncthreads, then out[i] = the
// value of thread (i+1) % n plus a warp sum of (i+1) over its warp
// (__shfl_xor_sync) and the warp's ballot of odd i: it is right only if the
// barrier, the shared storage and the shuffles behave as on the GPU.
#include "common.cuh"

KERNEL void __launch_bounds__(32) simt_probe_mma(float* d, const uint16_t* a, const uint16_t* b, const float* c) {
  int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  uint16_t ae[8], be[4];
  for (int i = 0; i < 8; i++) {
    int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
    int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
    ae[i] = a[row * 16 + col];
  }
  for (int i = 0; i < 4; i++) {
    int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
    be[i] = b[row * 8 + g];
  }
  uint32_t af[4] = {pack_bf16(ae[0], ae[1]), pack_bf16(ae[2], ae[3]), pack_bf16(ae[4], ae[5]), pack_bf16(ae[6], ae[7])};
  uint32_t bf[2] = {pack_bf16(be[0], be[1]), pack_bf16(be[2], be[3])};
  float acc[4];
  for (int i = 0; i < 4; i++) acc[i] = c[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)];
  mma_bf16_16816(acc, af, bf);
  for (int i = 0; i < 4; i++) d[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = acc[i];
}

KERNEL void __launch_bounds__(1024) simt_probe_barrier(int* out) {
  __shared__ int vals[1024];
  int i = threadIdx.x, n = blockDim.x;
  vals[i] = i + 1;
  __syncthreads();
  int v = vals[(i + 1) % n];
  int s = i + 1;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  unsigned odd = __ballot_sync(0xffffffffu, i & 1);
  out[i] = v + s + int(odd == 0xaaaaaaaau);
}
