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

// simt_probe_ldmatrix: one warp (block 32, grid 1) loads four 8×8 b16
// matrices with ldmatrix .x4, .x4.trans, .x2 and .x2.trans. m[32·8] holds
// the matrices' rows in order (row r of matrix i is m[(8i + r)·8 ..]);
// the kernel scatters them in shared memory (row l at 16-element slot
// (5l + 3) mod 32, in its second half when l is odd) and lane l passes the
// address of row l. out[l·12 + q] receives register q of lane l: q 0..3
// of .x4, 4..7 of .x4.trans, 8..9 of .x2, 10..11 of .x2.trans. A test
// compares them with the PTX ISA's fragment table.
KERNEL void __launch_bounds__(32) simt_probe_ldmatrix(uint32_t* out, const uint16_t* m) {
  __shared__ __align__(16) uint16_t s[32 * 16];
  int l = threadIdx.x;
  uint16_t* row = &s[((5 * l + 3) % 32) * 16 + 8 * (l & 1)];
  for (int e = 0; e < 8; e++) row[e] = m[l * 8 + e];
  __syncwarp();
  uint32_t r4[4], t4[4], r2[2], t2[2];
  ldmatrix_x4<false>(r4, row);
  ldmatrix_x4<true>(t4, row);
  ldmatrix_x2<false>(r2, row);
  ldmatrix_x2<true>(t2, row);
  for (int q = 0; q < 4; q++) out[l * 12 + q] = r4[q], out[l * 12 + 4 + q] = t4[q];
  for (int q = 0; q < 2; q++) out[l * 12 + 8 + q] = r2[q], out[l * 12 + 10 + q] = t2[q];
}

// simt_probe_cp_async: one block of 32 threads. Thread l copies three
// 16-byte pieces of src (l·12 floats on) into shared memory with
// cp.async, one commit group each, the second reading only 4·(l % 5)
// bytes (the rest zero-filled), the third 4-byte copies; after
// wait_group 2 it records the first piece, after wait_group 0 all three
// (out[l·12 ..], out[384 + l·12 ..]: the first piece, then all twelve
// floats). Only what the PTX ISA guarantees is recorded: a group is
// complete after a wait that covers it.
KERNEL void __launch_bounds__(32) simt_probe_cp_async(float* out, const float* src) {
  __shared__ __align__(16) float s[32 * 12];
  int l = threadIdx.x;
  float* d = &s[l * 12];
  cp_async16(d, src + l * 12, 16);
  cp_async_commit();
  cp_async16(d + 4, src + l * 12 + 4, 4 * (l % 5));
  cp_async_commit();
  for (int e = 0; e < 4; e++) cp_async4(d + 8 + e, src + l * 12 + 8 + e, 4);
  cp_async_commit();
  cp_async_wait<2>();
  for (int e = 0; e < 4; e++) out[l * 12 + e] = d[e];
  cp_async_wait<0>();
  for (int e = 0; e < 12; e++) out[384 + l * 12 + e] = d[e];
}

// simt_probe_mma_chain: one warp computes D[16,8] = Σ over R (a multiple
// of 16) of A[16,R]·B[R,8], A f32 split exactly into three bf16 terms and
// B bf16, as one chain of mma.sync on one accumulator: per 16 columns of
// A, the lo, mid and hi terms in that order (the arithmetic of the first
// gemm_bf16 kernels, which the H200 ran on 2026-12-04). a is [16,R]
// row-major, b [R,8] row-major, d [16,8]. A test feeds it the inputs of
// the conformance case the H200 failed and compares with the values that
// run printed: the check that simt.h's tensor-core model is the
// hardware's arithmetic.
KERNEL void __launch_bounds__(32) simt_probe_mma_chain(float* d, const float* a, const uint16_t* b, int R) {
  int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < R; k0 += 16) {
    uint16_t at[3][8];
    for (int i = 0; i < 8; i++) {
      int row = g + 8 * ((i >> 1) & 1), col = k0 + 2 * t + (i & 1) + 8 * (i >= 4);
      split3(a[long(row) * R + col], at[0][i], at[1][i], at[2][i]);
    }
    uint16_t be[4];
    for (int i = 0; i < 4; i++) be[i] = b[long(k0 + 2 * t + (i & 1) + 8 * (i >= 2)) * 8 + g];
    uint32_t bf[2] = {pack_bf16(be[0], be[1]), pack_bf16(be[2], be[3])};
    for (int s = 2; s >= 0; s--) {
      uint32_t af[4] = {pack_bf16(at[s][0], at[s][1]), pack_bf16(at[s][2], at[s][3]), pack_bf16(at[s][4], at[s][5]),
                        pack_bf16(at[s][6], at[s][7])};
      mma_bf16_16816(acc, af, bf);
    }
  }
  for (int i = 0; i < 4; i++) d[(g + 8 * (i >= 2)) * 8 + 2 * t + (i & 1)] = acc[i];
}
