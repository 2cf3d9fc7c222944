// common.cuh: helpers shared by every kernel of this package, for both
// builds: nvcc (device code for sm_90) and the SIMT host build (simt.h).
// Weight dtypes use kernels.DType's codes (0 F32, 1 BF16, 2 F16); bf16/f16
// are handled as raw uint16 bits with exact bitwise widening, so both
// builds read identical values. Reductions are fixed trees (warp shuffles,
// then one warp over the per-warp partials): results are deterministic for
// a given launch configuration.
#pragma once

#if defined(__CUDACC__)
#include <stdint.h>
#else
#include "simt.h"
#endif

#define KERNEL extern "C" __global__

// UNROLL asks nvcc to unroll the next loop fully (register arrays indexed
// by its counter then stay in registers); the host build ignores it.
#if defined(__CUDACC__)
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// f32_to_bf16 rounds to nearest even (NaN stays NaN), like kernels.F32ToBF16.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// f16_to_f32 widens IEEE half bits exactly.
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man · 2^-24, exact
    float v = float(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// load_w reads element i of a weight of dtype dt as float32.
__device__ __forceinline__ float load_w(const void* w, int dt, long i) {
  if (dt == DT_F32) return static_cast<const float*>(w)[i];
  uint16_t h = static_cast<const uint16_t*>(w)[i];
  return dt == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// block_sum returns the sum of v over the block to every thread. The block
// size must be a multiple of 32 (every launch of this package uses 32..1024).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[wid] = v;
  __syncthreads();
  float r = lane < nw ? part[lane] : 0.f;
  return warp_sum(r);
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[wid] = v;
  __syncthreads();
  float r = lane < nw ? part[lane] : -INFINITY;
  return warp_max(r);
}

__device__ __forceinline__ double block_sum_d(double v) {
  __shared__ double part[32];
  int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_sum_d(v);
  __syncthreads();
  if (lane == 0) part[wid] = v;
  __syncthreads();
  double r = lane < nw ? part[lane] : 0.0;
  return warp_sum_d(r);
}

__device__ __forceinline__ int block_min_i(int v) {
  __shared__ int part[32];
  int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) part[wid] = v;
  __syncthreads();
  int r = lane < nw ? part[lane] : 0x7fffffff;
  for (int o = 16; o > 0; o >>= 1) r = min(r, __shfl_xor_sync(0xffffffffu, r, o));
  return r;
}

__device__ __forceinline__ int block_max_i(int v) { return -block_min_i(-v); }

// report_bad_index records an index a kernel found outside [0, bound)
// in its op's status slot, four ints (flag, position, value, bound): the
// first one wins. Kernels that index with data call it and skip the index
// instead of reading or writing out of bounds; the host reads the slots at
// its next sync point and turns a raised flag into the sticky error
// (status.go), so no index crosses to the host before a launch.
__device__ __forceinline__ void report_bad_index(int* status, long pos, long value, long bound) {
  if (atomicCAS(status, 0, 1) == 0) {
    status[1] = int(pos);
    status[2] = int(value);
    status[3] = int(bound);
  }
}

// mma_bf16_16816 is d += A·B with mma.sync.aligned.m16n8k16.row.col
// f32.bf16.bf16.f32 (fragment layout in simt.h and the PTX ISA).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif !defined(__CUDACC__)
  simt::mma_m16n8k16_bf16(d, a, b, d);
#endif
}

// split3 writes the bf16 terms hi, mid, lo with hi + mid + lo == f for
// every finite f whose hi does not overflow (each term rounds the rest to
// nearest: 8 significant bits each, 24 in all, and bf16 has f32's exponent
// range; a rest is exact in f32). For ±Inf and NaN, mid and lo are 0.
__device__ __forceinline__ void split3(float f, uint16_t& hi, uint16_t& mid, uint16_t& lo) {
  hi = f32_to_bf16(f);
  float r = f - bf16_to_f32(hi);  // exact: the bits of f below hi's
  if (!(r - r == 0.f)) r = 0.f;   // f (or hi) is ±Inf or NaN
  mid = f32_to_bf16(r);
  lo = f32_to_bf16(r - bf16_to_f32(mid));
}

// pack_bf16 puts lo in the low half and hi in the high half of a register,
// the order mma fragments use (lower k / column index in the low half).
__device__ __forceinline__ uint32_t pack_bf16(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// Asynchronous copies and fragment loads (sm_80+), for both builds: inline
// PTX on the device, the SIMT shim's emulation on the host (simt.h states
// the semantics it emulates and what a wrong use produces there).

// smem_addr is p's address in the shared state space (PTX's 32-bit
// .shared addresses).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
#if defined(__CUDA_ARCH__)
  return uint32_t(__cvta_generic_to_shared(p));
#else
  return 0;
#endif
}

// cp_async16 copies 16 bytes from global src to shared dst (both 16-byte
// aligned) asynchronously, reading only src_bytes ≤ 16 of them and
// zero-filling the rest (src_bytes 0: src is not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
#elif !defined(__CUDACC__)
  simt::cp_async(dst, src, 16, src_bytes);
#endif
}

// cp_async4 is cp_async16 for 4 bytes (4-byte aligned).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
#elif !defined(__CUDACC__)
  simt::cp_async(dst, src, 4, src_bytes);
#endif
}

// cp_async_commit closes this thread's group of copies issued since the
// last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#elif !defined(__CUDACC__)
  simt::cp_async_commit();
#endif
}

// cp_async_wait waits until at most the newest N of this thread's
// committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#elif !defined(__CUDACC__)
  simt::cp_async_wait(N);
#endif
}

// ldmatrix_x4 loads four 8×8 b16 matrices: lanes 8i..8i+7 pass the rows of
// matrix i (16 bytes each, 16-byte aligned); r[i] gets the lane's pair of
// matrix i as mma fragments place it (row lane/4, columns 2(lane%4)+0,1;
// TRANS: the transpose's).
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__)
  if (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
  }
#elif !defined(__CUDACC__)
  simt::ldmatrix(r, 4, TRANS, row);
#endif
}

// ldmatrix_x2 loads two matrices (lanes 0..15 pass the rows).
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
#if defined(__CUDA_ARCH__)
  if (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row)));
  }
#elif !defined(__CUDACC__)
  simt::ldmatrix(r, 2, TRANS, row);
#endif
}

// dynamic_smem_size is the bytes of dynamic shared memory the block was
// launched with (PTX's %dynamic_smem_size).
__device__ __forceinline__ unsigned dynamic_smem_size() {
#if defined(__CUDA_ARCH__)
  unsigned r;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
#elif !defined(__CUDACC__)
  return unsigned(simt::cur().dyn_bytes);
#else
  return 0;
#endif
}

// launch_error stops the kernel on a launch that breaks its contract: a
// trap on the GPU (the launch fails with an error the Device reports), a
// launch error naming msg on the host build.
__device__ __forceinline__ void launch_error(const char* msg) {
#if defined(__CUDA_ARCH__)
  __trap();
#elif !defined(__CUDACC__)
  simt::fail(msg);
#endif
}

// DYNAMIC_SHARED declares name as the block's dynamic shared memory
// (extern __shared__, 16-byte aligned), an array of type.
#if defined(__CUDACC__)
#define DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#else
#define DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(simt::dynamic_shared())
#endif
