// kvcache.cu: the batched KV write (kernels.Backend.WriteKV) and its fused
// form with the keys' RoPE (kernels.RoPEKVWriter): every new row of a
// batch into its sequence's block of a paged pool in one launch per layer.
//
// Layout: k, v [N, KVH·D] float32; row i belongs to sequence s with
// qstart[s] ≤ i < qstart[s+1] (seq_of, a binary search) at position p =
// pos[i], and goes to row p mod block_size of block
// tables[s·table_stride + p/block_size] at koff (K) and voff (V) (KVSrc,
// attention_kv.cuh), cast to the pool's dtype (bf16: round to nearest
// even, as copy_cast). A block id outside the pool skips the row (the host
// checks host tables).
// write_kv: one thread per element of a row (N·KVH·D), block 256, grid
// ceil(N·KVH·D/256). write_kv_rope: one thread per rotated pair (N·KVH·D/2):
// it rotates k's pair in place with rope.cuh (the same arithmetic as
// rope_f32, so the fused op equals RoPE then WriteKV bit for bit) and
// writes the pair of k and of v into the pool.
// Checked against: kerneltest.WriteKV and kerneltest.Fused on the SIMT
// host build.
#include "attention_kv.cuh"
#include "rope.cuh"

namespace kvcache_impl {
// store writes x at element off of the pool, cast to its dtype.
__device__ __forceinline__ void store(void* pool, int dtype, long off, float x) {
  if (dtype == DT_F32) {
    static_cast<float*>(pool)[off] = x;
  } else {
    static_cast<uint16_t*>(pool)[off] = f32_to_bf16(x);
  }
}
}  // namespace kvcache_impl
using namespace kvcache_impl;

KERNEL void __launch_bounds__(256) write_kv(void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride,
             long koff, long voff, long pool_blocks, const int32_t* qstart, const int32_t* pos, int B, const float* k,
             const float* v, long N, int row_len) {
  long idx = blockIdx.x * long(blockDim.x) + threadIdx.x;
  if (idx >= N * row_len) return;
  long i = idx / row_len;
  int c = int(idx % row_len);
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks,
                 nullptr, nullptr, nullptr};
  int s = seq_of(qstart, B, i);
  long p = pos[i];
  long off = kv.offset(s, p, 0, 1, row_len, false);
  if (off < 0) return;
  off += c;
  store(pool, kv_dtype, off, k[idx]);
  store(pool, kv_dtype, off - koff + voff, v[idx]);
}

KERNEL void __launch_bounds__(256) write_kv_rope(void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride,
                  long koff, long voff, long pool_blocks, const int32_t* qstart, const int32_t* pos, int B, float* k,
                  const float* v, long N, int KVH, int D, double theta) {
  int half = D / 2;
  long idx = blockIdx.x * long(blockDim.x) + threadIdx.x;
  if (idx >= N * KVH * half) return;
  long i = idx / (KVH * half);
  int h = int(idx / half % KVH), e = int(idx % half);
  double s, c;
  rope_sincos(pos[i], e, D, theta, 1.0, s, c);
  float* x = k + (i * KVH + h) * D;
  rope_rotate(x, e, half, s, c);
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks,
                 nullptr, nullptr, nullptr};
  long off = kv.offset(seq_of(qstart, B, i), pos[i], h, KVH, D, false);
  if (off < 0) return;
  const float* y = v + (i * KVH + h) * D;
  store(pool, kv_dtype, off + e, x[e]);
  store(pool, kv_dtype, off + e + half, x[e + half]);
  store(pool, kv_dtype, off - koff + voff + e, y[e]);
  store(pool, kv_dtype, off - koff + voff + e + half, y[e + half]);
}
