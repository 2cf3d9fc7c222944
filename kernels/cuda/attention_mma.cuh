// attention_mma.cuh: tensor-core helpers of the attention kernels
// (attention_fwd.cu, attention_bwd.cu): float32 operands of
// mma.sync.m16n8k16 bf16 as three exact bf16 terms, an accumulator that
// keeps the leading product apart from the small ones, and the fold of a
// key chunk's softmax sums into a running one (merge), shared by every
// kernel that must give the same bits.
#pragma once
#include "attention_kv.cuh"

namespace attn_mma {
constexpr int CHUNK = 64;  // keys per chunk of the attention kernels (plan.go's attnChunk)

// split3 writes the bf16 terms hi, mid, lo with hi + mid + lo == f.
__device__ __forceinline__ void split3(float f, uint16_t (&h)[3]) {
  h[0] = f32_to_bf16(f);
  float r = f - bf16_to_f32(h[0]);  // exact: the bits of f below hi's
  h[1] = f32_to_bf16(r);
  h[2] = f32_to_bf16(r - bf16_to_f32(h[1]));
}

// frag3 packs the three bf16 terms of the float pairs (x0, x1), (x2, x3),
// ... into n registers per term: reg i of term k = (term k of x[2i],
// term k of x[2i+1]).
template <int N>
__device__ __forceinline__ void frag3(const float (&x)[2 * N], uint32_t (&f)[3][N]) {
  for (int i = 0; i < N; i++) {
    uint16_t lo[3], hi[3];
    split3(x[2 * i], lo);
    split3(x[2 * i + 1], hi);
    for (int k = 0; k < 3; k++) f[k][i] = pack_bf16(lo[k], hi[k]);
  }
}

// Acc is an mma accumulator of a product of three-term splits, kept as two:
// big, the product of the leading terms, and small, the other products
// (2⁻⁸ of it and below), so the small terms do not round away against a
// large running sum; value() adds them once at the end, which leaves the
// rounding of an f32 dot product.
struct Acc {
  float big[4], small[4];
  __device__ __forceinline__ void zero() {
    for (int e = 0; e < 4; e++) big[e] = small[e] = 0.f;
  }
  __device__ __forceinline__ float value(int e) const { return big[e] + small[e]; }
};

// mma6 is d += a·b over the three-term splits of both operands: the six
// products down to 2⁻¹⁶ of the leading one, the small ones from the
// smallest up.
__device__ __forceinline__ void mma6(Acc& d, const uint32_t (&a)[3][4], const uint32_t (&b)[3][2]) {
  mma_bf16_16816(d.small, a[2], b[0]);
  mma_bf16_16816(d.small, a[1], b[1]);
  mma_bf16_16816(d.small, a[0], b[2]);
  mma_bf16_16816(d.small, a[1], b[0]);
  mma_bf16_16816(d.small, a[0], b[1]);
  mma_bf16_16816(d.big, a[0], b[0]);
}

// mma3 is d += a·b over the three-term split of a and an exact bf16 b.
__device__ __forceinline__ void mma3(Acc& d, const uint32_t (&a)[3][4], const uint32_t (&b)[2]) {
  mma_bf16_16816(d.small, a[2], b);
  mma_bf16_16816(d.small, a[1], b);
  mma_bf16_16816(d.big, a[0], b);
}

// merge_scales gives the fold of a chunk with max m into a running max M:
// the new max and the scales of the running sums (a) and of the chunk's
// (b). A chunk a row does not see (m = −∞) leaves the state as it is.
__device__ __forceinline__ void merge_scales(float M, float m, float& Mn, float& a, float& b) {
  if (m == -INFINITY) {
    Mn = M, a = 1.f, b = 0.f;
    return;
  }
  Mn = fmaxf(M, m);
  a = expf(M - Mn);
  b = expf(m - Mn);
}

// merge folds x (a chunk's sum, scaled by b) into acc (scaled by a): the one
// expression both the tile kernel and attention_combine use.
__device__ __forceinline__ float merge(float acc, float a, float x, float b) { return fmaf(acc, a, x * b); }

// chunk_offsets writes into koff[CHUNK] the element offsets (kv.offset) of
// the K rows of positions CHUNK·c .. CHUNK·c+CHUNK−1 of sequence s, kv head g, −2 for
// positions past last (read as zeros), and returns whether the warp met a
// block id outside the pool (kv.offset −1). A warp collective.
__device__ __forceinline__ bool chunk_offsets(const KVSrc& kv, int s, int c, long last, int g, int KVH, int D,
                                              long* koff, int lane) {
  bool bad = false;
  for (int j = lane; j < CHUNK; j += 32) {
    long key = long(c) * CHUNK + j, off = -2;
    if (key <= last) {
      off = kv.offset(s, key, g, KVH, D, false);
      bad = bad || off < 0;
    }
    koff[j] = off;
  }
  bad = __any_sync(0xffffffffu, bad);
  __syncwarp();
  return bad;
}

}  // namespace attn_mma
