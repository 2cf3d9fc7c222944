// attention_fwd.cu: the attention forward on the tensor cores, for head
// dims D = 16, 32, ..., 128: one kernel for prefill, training and decode,
// batch-invariant by construction (kernels.AttentionInvariant).
//
// Layout: as attention.cu (kernels.AttentionBatch; keys and values through
// KVSrc, attention_kv.cuh). A warp owns a tile of 16 query rows of one
// sequence s and kv head g: row r = t·group + j is token t, query head
// g·group + j (group = H/KVH), so the K/V rows it loads serve the whole GQA
// group. Launch: attention_fwd1 has 1 warp per block (decode shapes),
// attention_fwd4 4 warps (64 rows, prefill and training); grid
// (ceil(maxT·group / (16·warps)), KVH, B·nsplit). Shared memory: each
// warp's Q tile, [16][D+8] float32, and its chunk's key offsets (static,
// 9 KB a warp).
//
// The arithmetic of a row (the same whatever tile, block shape or split it
// runs in, which is what makes rows batch-invariant):
//   - keys in chunks of 64 positions (chunk c: 64c .. 64c+63), each chunk
//     seen by the row (64c ≤ its position) computed on its own:
//     s_j = (q·k_j)·scale on the tensor cores, masked (−∞) past the row's
//     position; m_c = max_j s_j; p_j = exp(s_j − m_c); l_c = Σ p_j (each
//     lane's 16 values in order, then a shuffle tree over the 4 lanes of a
//     row); o_c = Σ_j p_j·v_j on the tensor cores (keys in order, 16 per
//     mma step);
//   - the chunks folded in order into (M, L, O) by merge: M' = max(M, m_c),
//     a = exp(M − M'), b = exp(m_c − M'), L' = fma(L, a, l_c·b),
//     O' = fma(O, a, o_c·b); out = O / L, LSE = M + log L.
// Float32 operands go through mma.sync.m16n8k16 bf16 as three bf16 terms
// each (hi + mid + lo = the float exactly; split3): six products (the ones
// down to 2⁻¹⁶ of the leading term) for f32 K or V, three for a bf16 pool
// (its values are bf16 already), the leading product and the others summed
// in two accumulators added once (Acc), so the result matches an f32 kernel
// (kerneltest's Attention tolerance) at 6× (3×) the mma count of plain
// bf16. Fully masked rows (past a sequence's tokens) are computed and
// dropped. A chunk's K/V rows past the tile's last position are read as
// zeros (memory there may hold anything, NaN included).
//
// Split-KV (flash-decoding): with nsplit > 1 the block z = s·nsplit + sp
// computes chunks [sp·cps, (sp+1)·cps) and writes each chunk's (m_c, l_c,
// o_c) unfolded to part_ml/part_o [N·H, max_chunks]; attention_combine
// then folds a row's chunks in order with the same merge. So decode at
// small batch spreads a row's keys over blocks and still gives exactly the
// bits of a prefill row. A block id outside the pool makes the whole tile
// NaN.
// Checked against: kerneltest.Attention, AttentionPaged (bit for bit paged
// vs contiguous) and AttentionInvariance (rows alone, in batches, as decode
// steps, chunked prefill; split and unsplit launches) on the SIMT host build.
#include "attention_mma.cuh"

namespace attn_fwd {
constexpr int CH = attn_mma::CHUNK;  // keys per chunk
constexpr int MAXD = 128;     // largest head dim of this path
constexpr int QS = MAXD + 8;  // Q tile row stride (floats): rows g and g+8 in different banks
using namespace attn_mma;

// Body of attention_fwd1/attention_fwd4: NW warps, each a 16-row tile.
template <int NW>
__device__ __forceinline__ void fwd_tiles(const float* q, float* out, float* lse, const int32_t* qstart,
                                          const int32_t* pos, const KVSrc& kv, int H, int KVH, int D, float scale,
                                          int nsplit, int cps, float* part_o, float* part_ml, int max_chunks) {
  __shared__ float Qs[NW][16][QS];
  __shared__ long Koff[NW][CH];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int s = blockIdx.z / nsplit, sp = blockIdx.z % nsplit, kvh = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  const int group = H / KVH;
  const long rows = T * group;
  const long r0 = (long(blockIdx.x) * NW + warp) * 16;
  if (r0 >= rows) return;  // the warp's tile is past the sequence (no block-wide barrier follows)
  const long start = pos[q0];
  const long last = start + (min(rows, r0 + 16) - 1) / group;  // the tile's last position
  const int c0 = sp * cps, c1 = min(int(last / CH) + 1, c0 + cps);
  if (c0 >= c1) return;
  for (int e = lane; e < 16 * D; e += 32) {
    int i = e / D, d = e % D;
    long r = r0 + i;
    float v = 0.f;
    if (r < rows) v = q[((q0 + r / group) * H + kvh * group + r % group) * D + d];
    Qs[warp][i][d] = v;
  }
  __syncwarp();
  // The lane's rows g and g+8: their position (−1: no such row).
  long lim[2];
  for (int h = 0; h < 2; h++) {
    long r = r0 + g + 8 * h;
    lim[h] = r < rows ? start + r / group : -1;
  }
  const bool f32kv = kv.block_size == 0 || kv.dtype == DT_F32;
  const float* kf = kv.block_size == 0 ? kv.k : static_cast<const float*>(kv.pool);
  const float* vf = kv.block_size == 0 ? kv.v : static_cast<const float*>(kv.pool);
  const uint16_t* kh = static_cast<const uint16_t*>(kv.pool);
  const long vshift = kv.block_size == 0 ? 0 : kv.voff - kv.koff;  // V offset − K offset
  const bool split = nsplit > 1;
  float O[MAXD / 8][4], M[2] = {-INFINITY, -INFINITY}, L[2] = {0.f, 0.f};
ATTN_UNROLL
  for (int n = 0; n < MAXD / 8; n++) O[n][0] = O[n][1] = O[n][2] = O[n][3] = 0.f;
  bool bad = false;
  for (int c = c0; c < c1; c++) {
    bad = chunk_offsets(kv, s, c, last, kvh, KVH, D, Koff[warp], lane) || bad;
    // S = Q·Kᵀ for the chunk's 64 keys: 8 n-tiles of 8 keys.
    Acc sa[8];
    ATTN_UNROLL
    for (int n = 0; n < 8; n++) sa[n].zero();
    for (int k0 = 0; k0 < D; k0 += 16) {
      float qa[8];
      const float* ra = &Qs[warp][g][k0 + 2 * t];
      const float* rb = &Qs[warp][g + 8][k0 + 2 * t];
      qa[0] = ra[0], qa[1] = ra[1], qa[2] = rb[0], qa[3] = rb[1];
      qa[4] = ra[8], qa[5] = ra[9], qa[6] = rb[8], qa[7] = rb[9];
      uint32_t af[3][4];
      frag3<4>(qa, af);
      ATTN_UNROLL
      for (int n = 0; n < 8; n++) {
        long off = Koff[warp][8 * n + g];
        long e = off + k0 + 2 * t;
        if (f32kv) {
          float kb[4] = {0.f, 0.f, 0.f, 0.f};
          if (off >= 0) kb[0] = kf[e], kb[1] = kf[e + 1], kb[2] = kf[e + 8], kb[3] = kf[e + 9];
          uint32_t bf[3][2];
          frag3<2>(kb, bf);
          mma6(sa[n], af, bf);
        } else {
          uint32_t bf[2] = {0u, 0u};
          if (off >= 0) bf[0] = pack_bf16(kh[e], kh[e + 1]), bf[1] = pack_bf16(kh[e + 8], kh[e + 9]);
          mma3(sa[n], af, bf);
        }
      }
    }
    // Scale, mask, the row max m_c and p = exp(s − m_c), l_c.
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, S[8][4];
    ATTN_UNROLL
    for (int n = 0; n < 8; n++) {
      for (int e = 0; e < 4; e++) {
        long key = long(c) * CH + 8 * n + 2 * t + (e & 1);
        float v = sa[n].value(e) * scale;
        S[n][e] = key <= lim[e >> 1] ? v : -INFINITY;
        m[e >> 1] = fmaxf(m[e >> 1], S[n][e]);
      }
    }
    for (int h = 0; h < 2; h++) {
      m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 1));
      m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 2));
    }
    ATTN_UNROLL
    for (int n = 0; n < 8; n++) {
      for (int e = 0; e < 4; e++) {
        float mh = m[e >> 1];
        S[n][e] = mh == -INFINITY ? 0.f : expf(S[n][e] - mh);
        l[e >> 1] += S[n][e];
      }
    }
    for (int h = 0; h < 2; h++) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    float Mn[2], a[2], b[2];
    for (int h = 0; h < 2; h++) merge_scales(M[h], m[h], Mn[h], a[h], b[h]);
    // o_c = P·V, 32 head dims (4 n-tiles) at a time; folded into O or written.
ATTN_UNROLL
    for (int n0 = 0; n0 < MAXD / 8; n0 += 4) {
      if (8 * n0 >= D) continue;
      Acc oc[4];
      ATTN_UNROLL
      for (int nn = 0; nn < 4; nn++) oc[nn].zero();
      ATTN_UNROLL
      for (int kk = 0; kk < 4; kk++) {  // keys 16kk .. 16kk+15 of the chunk
        float pa[8] = {S[2 * kk][0], S[2 * kk][1],     S[2 * kk][2],     S[2 * kk][3],
                       S[2 * kk + 1][0], S[2 * kk + 1][1], S[2 * kk + 1][2], S[2 * kk + 1][3]};
        uint32_t af[3][4];
        frag3<4>(pa, af);
        const long o0 = Koff[warp][16 * kk + 2 * t], o1 = Koff[warp][16 * kk + 2 * t + 1];
        const long o8 = Koff[warp][16 * kk + 2 * t + 8], o9 = Koff[warp][16 * kk + 2 * t + 9];
ATTN_UNROLL
        for (int nn = 0; nn < 4; nn++) {
          int d = 8 * (n0 + nn) + g;
          if (8 * (n0 + nn) >= D) continue;
          if (f32kv) {
            float vb[4];
            vb[0] = o0 >= 0 ? vf[o0 + vshift + d] : 0.f;
            vb[1] = o1 >= 0 ? vf[o1 + vshift + d] : 0.f;
            vb[2] = o8 >= 0 ? vf[o8 + vshift + d] : 0.f;
            vb[3] = o9 >= 0 ? vf[o9 + vshift + d] : 0.f;
            uint32_t bf[3][2];
            frag3<2>(vb, bf);
            mma6(oc[nn], af, bf);
          } else {
            uint16_t v0 = o0 >= 0 ? kh[o0 + vshift + d] : 0, v1 = o1 >= 0 ? kh[o1 + vshift + d] : 0;
            uint16_t v8 = o8 >= 0 ? kh[o8 + vshift + d] : 0, v9 = o9 >= 0 ? kh[o9 + vshift + d] : 0;
            uint32_t bf[2] = {pack_bf16(v0, v1), pack_bf16(v8, v9)};
            mma3(oc[nn], af, bf);
          }
        }
      }
ATTN_UNROLL
      for (int nn = 0; nn < 4; nn++) {
        int n = n0 + nn;
        if (8 * n >= D) continue;
        if (split) {
          for (int h = 0; h < 2; h++) {
            long r = r0 + g + 8 * h;
            if (r >= rows) continue;
            long gr = (q0 + r / group) * H + kvh * group + r % group;
            float* po = part_o + (gr * max_chunks + c) * D + 8 * n + 2 * t;
            po[0] = oc[nn].value(2 * h), po[1] = oc[nn].value(2 * h + 1);
          }
        } else {
          for (int e = 0; e < 4; e++) O[n][e] = merge(O[n][e], a[e >> 1], oc[nn].value(e), b[e >> 1]);
        }
      }
    }
    for (int h = 0; h < 2; h++) {
      if (split) {
        long r = r0 + g + 8 * h;
        if (t == 0 && r < rows) {
          long gr = (q0 + r / group) * H + kvh * group + r % group;
          part_ml[(gr * max_chunks + c) * 2] = bad ? NAN : m[h];
          part_ml[(gr * max_chunks + c) * 2 + 1] = l[h];
        }
      } else {
        L[h] = merge(L[h], a[h], l[h], b[h]);
        M[h] = Mn[h];
      }
    }
    __syncwarp();  // Koff is rewritten by the next chunk
  }
  if (split) return;
  for (int h = 0; h < 2; h++) {
    long r = r0 + g + 8 * h;
    if (r >= rows) continue;
    long gr = (q0 + r / group) * H + kvh * group + r % group;
    float* o = out + gr * D;
ATTN_UNROLL
    for (int n = 0; n < MAXD / 8; n++) {
      if (8 * n >= D) continue;
      o[8 * n + 2 * t] = bad ? NAN : O[n][2 * h] / L[h];
      o[8 * n + 2 * t + 1] = bad ? NAN : O[n][2 * h + 1] / L[h];
    }
    if (lse != nullptr && t == 0) lse[gr] = bad ? NAN : M[h] + logf(L[h]);
  }
}
}  // namespace attn_fwd

KERNEL void __launch_bounds__(32) attention_fwd1(const float* q, float* out, float* lse, const int32_t* qstart,
                                                 const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables,
                                                 int table_stride, int block_size, long block_stride, long koff, long voff,
                                                 long pool_blocks, const float* kc, const float* vc, const int32_t* kstart,
                                                 int H, int KVH, int D, float scale, int nsplit, int cps, float* part_o,
                                                 float* part_ml, int max_chunks) {
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  attn_fwd::fwd_tiles<1>(q, out, lse, qstart, pos, kv, H, KVH, D, scale, nsplit, cps, part_o, part_ml, max_chunks);
}

KERNEL void __launch_bounds__(128) attention_fwd4(const float* q, float* out, float* lse, const int32_t* qstart,
                                                 const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables,
                                                 int table_stride, int block_size, long block_stride, long koff, long voff,
                                                 long pool_blocks, const float* kc, const float* vc, const int32_t* kstart,
                                                 int H, int KVH, int D, float scale, int nsplit, int cps, float* part_o,
                                                 float* part_ml, int max_chunks) {
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  attn_fwd::fwd_tiles<4>(q, out, lse, qstart, pos, kv, H, KVH, D, scale, nsplit, cps, part_o, part_ml, max_chunks);
}

// attention_combine folds each row's chunk partials (written by a split
// launch) in order with merge, as the tile kernel folds them itself: one
// warp per (token, head), lane l holding head dims l + 32j; block 128, grid
// (ceil(maxT·H/4), B) (warpRowsPlan).
KERNEL void __launch_bounds__(128) attention_combine(float* out, float* lse, const int32_t* qstart, const int32_t* pos,
                                                    const float* part_o, const float* part_ml, int H, int D,
                                                    int max_chunks) {
  const int s = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  const int lane = threadIdx.x % 32;
  const long row = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= T * H) return;
  const long gr = q0 * H + row;
  const int nc = int(pos[q0 + row / H] / attn_fwd::CH) + 1;
  float O[attn_fwd::MAXD / 32], M = -INFINITY, L = 0.f;
  for (int j = 0; j < attn_fwd::MAXD / 32; j++) O[j] = 0.f;
  for (int c = 0; c < nc; c++) {
    const long at = gr * max_chunks + c;
    float m = part_ml[2 * at], l = part_ml[2 * at + 1];
    float Mn, a, b;
    attn_mma::merge_scales(M, m, Mn, a, b);
    for (int j = 0; j < attn_fwd::MAXD / 32; j++) {
      int d = lane + 32 * j;
      if (d < D) O[j] = attn_mma::merge(O[j], a, part_o[at * D + d], b);
    }
    L = attn_mma::merge(L, a, l, b);
    M = Mn;
  }
  for (int j = 0; j < attn_fwd::MAXD / 32; j++) {
    int d = lane + 32 * j;
    if (d < D) out[gr * D + d] = O[j] / L;
  }
  if (lse != nullptr && lane == 0) lse[gr] = M + logf(L);
}
