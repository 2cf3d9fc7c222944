// attention_kv.cuh: how the attention kernels and the KV write find a
// sequence's keys and values (kernels.PagedKV, or contiguous K/V), shared
// by attention.cu and kvcache.cu.
//
// KVSrc is the kernel arguments that describe the keys and values of a
// batch: a paged pool (block_size > 0) of pool_blocks blocks of
// block_stride elements, F32 or BF16 (dtype), whose layer K sits at koff
// and V at voff of each block, [block_size, KVH, D], found through the
// I32 block tables [B, table_stride]; or (block_size == 0) contiguous
// float32 K and V [rows, KVH, D], sequence s's positions from row
// kstart[s]. A block id outside [0, pool_blocks) is reported by
// KVRow::ok() (device tables are not checked on the host).
#pragma once
#include "common.cuh"

// ATTN_UNROLL unrolls the loop it precedes under nvcc (so register arrays
// indexed by the loop stay in registers); the host build has no such pragma.
#if defined(__CUDACC__)
#define ATTN_UNROLL _Pragma("unroll")
#else
#define ATTN_UNROLL
#endif

// KVRow is one row [D] of K or V: float32 (f) or bf16 bits (h), or
// neither for a bad block id.
struct KVRow {
  const float* f;
  const uint16_t* h;
  __device__ __forceinline__ float at(int d) const { return f ? f[d] : bf16_to_f32(h[d]); }
  __device__ __forceinline__ bool ok() const { return f != nullptr || h != nullptr; }
};

struct KVSrc {
  const void* pool;
  int dtype;
  const int32_t* tables;
  int table_stride;
  int block_size;
  long block_stride, koff, voff, pool_blocks;
  const float* k;
  const float* v;
  const int32_t* kstart;

  // block returns the pool block holding position p of sequence s, or −1
  // for an id outside the pool.
  __device__ __forceinline__ long block(int s, long p) const {
    long id = tables[long(s) * table_stride + p / block_size];
    return id >= 0 && id < pool_blocks ? id : -1;
  }

  // offset returns the element offset of position p, kv head g, of K (v
  // false) or V in the pool (paged; −1 for a bad block id) or in k/v.
  __device__ __forceinline__ long offset(int s, long p, int g, int KVH, int D, bool isv) const {
    if (block_size == 0) return ((long(kstart[s]) + p) * KVH + g) * D;
    long b = block(s, p);
    if (b < 0) return -1;
    return b * block_stride + (isv ? voff : koff) + ((p % block_size) * KVH + g) * D;
  }

  // row returns position p of kv head g of sequence s from K (isv false) or V.
  __device__ __forceinline__ KVRow row(int s, long p, int g, int KVH, int D, bool isv) const {
    long off = offset(s, p, g, KVH, D, isv);
    if (block_size == 0) return KVRow{(isv ? v : k) + off, nullptr};
    if (off < 0) return KVRow{nullptr, nullptr};
    if (dtype == DT_F32) return KVRow{static_cast<const float*>(pool) + off, nullptr};
    return KVRow{nullptr, static_cast<const uint16_t*>(pool) + off};
  }
};

// seq_of returns the sequence s with qstart[s] ≤ i < qstart[s+1] (binary
// search over qstart[0..B]; qstart is nondecreasing).
__device__ __forceinline__ int seq_of(const int32_t* qstart, int B, long i) {
  int lo = 0, hi = B;  // qstart[lo] ≤ i < qstart[hi]
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (qstart[mid] <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}
