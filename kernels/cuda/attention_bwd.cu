// attention_bwd.cu: the attention backward on the tensor cores
// (flash-attention-2 style), for head dims D = 16, 32, ..., 128; other head
// dims take attention.cu's attention_backward_dq/_dkdv.
//
// Layout: as attention.cu (kernels.AttentionGradBatch; K/V through KVSrc,
// dK/dV placed by kstart). Tiles of 16 rows: query rows r = t·group + j
// (token t, head g·group + j) or keys p; each warp owns one tile and
// accumulates its output in registers; blocks of 2 warps. Shared memory:
// per warp two f32 tiles [16][D+8] (Q and dOut, or K and V) and the key
// offsets of a chunk (static, 18 KB a warp).
//
// attention_bwd_dq: a warp per 16 query rows of sequence s (blockIdx.z),
// kv head g (blockIdx.y): Di = Σ dOut·Out per row (stored in di for the
// next kernel), then for each chunk of 64 keys the row sees:
// P = exp(scale·Q·Kᵀ − LSE) (causal mask), dP = dOut·Vᵀ,
// dS = P∘(dP − Di), dQ += dS·K; dQ·scale written. Grid
// (ceil(ceil(maxT·group/16)/2), KVH, B).
// attention_bwd_dkdv: a warp per 16 keys (positions p0 .. p0+15) of s and
// g: for each tile of 16 query rows that sees any of them, Pᵀ = exp(scale·
// K·Qᵀ − LSE), dV += Pᵀ·dOut, dPᵀ = V·dOutᵀ, dSᵀ = Pᵀ∘(dPᵀ − Di),
// dK += dSᵀ·Q; dK·scale and dV added to dk, dv once (no atomics: each key's
// rows belong to one warp, so the result is deterministic). Grid
// (ceil(ceil(maxLen/16)/2), KVH, B); run after attention_bwd_dq (di).
// Every product of float32 operands runs as the six products of their
// three-term bf16 splits (attention_mma.cuh; three for a bf16 pool's K or V),
// in one f32 accumulator (the backward's tolerance is 4× the forward's).
// A block id outside the pool makes the outputs that read it NaN.
// Checked against: kerneltest.AttentionBackward and AttentionBackwardPaged
// on the SIMT host build.
#include "attention_mma.cuh"

namespace attn_bwd {
using namespace attn_mma;
constexpr int NW = 2;          // warps per block
constexpr int CH = attn_mma::CHUNK;  // keys per chunk
constexpr int MAXD = 128;      // largest head dim of this path
constexpr int TS = MAXD + 8;   // tile row stride (floats)
constexpr long PAST = -2;      // key offset of a position past the tile's last

// mma_f is d += a·b for three-term a and the f32 pairs b (b[0], b[1]),
// (b[2], b[3]) split into three terms: the six leading products, smallest
// first. mma_h is the same for an exact bf16 b (three products).
__device__ __forceinline__ void mma_f(float (&d)[4], const uint32_t (&a)[3][4], const float (&b)[4]) {
  uint32_t bf[3][2];
  frag3<2>(b, bf);
  mma_bf16_16816(d, a[2], bf[0]);
  mma_bf16_16816(d, a[1], bf[1]);
  mma_bf16_16816(d, a[0], bf[2]);
  mma_bf16_16816(d, a[1], bf[0]);
  mma_bf16_16816(d, a[0], bf[1]);
  mma_bf16_16816(d, a[0], bf[0]);
}

__device__ __forceinline__ void mma_h(float (&d)[4], const uint32_t (&a)[3][4], const uint32_t (&b)[2]) {
  mma_bf16_16816(d, a[2], b);
  mma_bf16_16816(d, a[1], b);
  mma_bf16_16816(d, a[0], b);
}

// afrag loads the A fragment of rows (g, g+8) and columns k0 + 2t, +1, +8,
// +9 of a [16][TS] shared tile, split into three terms.
__device__ __forceinline__ void afrag(const float (*tile)[TS], int k0, int g, int t, uint32_t (&a)[3][4]) {
  const float* ra = &tile[g][k0 + 2 * t];
  const float* rb = &tile[g + 8][k0 + 2 * t];
  float x[8] = {ra[0], ra[1], rb[0], rb[1], ra[8], ra[9], rb[8], rb[9]};
  frag3<4>(x, a);
}

// pfrag is afrag from the accumulators of two n-tiles (lo, hi) that hold
// columns 16kk .. 16kk+15: the register reuse of flash-attention.
__device__ __forceinline__ void pfrag(const float (&lo)[4], const float (&hi)[4], uint32_t (&a)[3][4]) {
  float x[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
  frag3<4>(x, a);
}

// KVRef reads K or V rows at element offsets (kv.offset) of a batch's
// f32 or bf16 storage.
struct KVRef {
  const float* f;
  const uint16_t* h;
  __device__ __forceinline__ float at(long off) const { return f ? f[off] : bf16_to_f32(h[off]); }
};

__device__ __forceinline__ KVRef kvref(const KVSrc& kv, bool isv) {
  if (kv.block_size == 0) return KVRef{isv ? kv.v : kv.k, nullptr};
  if (kv.dtype == DT_F32) return KVRef{static_cast<const float*>(kv.pool), nullptr};
  return KVRef{nullptr, static_cast<const uint16_t*>(kv.pool)};
}

}  // namespace attn_bwd
using namespace attn_bwd;

KERNEL void __launch_bounds__(64) attention_bwd_dq(const float* dout, const float* q, const float* out,
                                                   const float* lse, float* dq, float* di, const int32_t* qstart,
                                                   const int32_t* pos, const void* pool, int kv_dtype,
                                                   const int32_t* tables, int table_stride, int block_size,
                                                   long block_stride, long koff, long voff, long pool_blocks,
                                                   const float* kc, const float* vc, const int32_t* kstart, int H,
                                                   int KVH, int D, float scale) {
  __shared__ float Qs[NW][16][TS], Ds[NW][16][TS];
  __shared__ long Koff[NW][CH];
  __shared__ float Di[NW][16];
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int s = blockIdx.z, kvh = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  const int group = H / KVH;
  const long rows = T * group;
  const long r0 = (long(blockIdx.x) * NW + warp) * 16;
  if (r0 >= rows) return;
  const long start = pos[q0];
  const long last = start + (min(rows, r0 + 16) - 1) / group;
  auto grow = [&](long r) { return (q0 + r / group) * H + kvh * group + r % group; };  // row of [N, H]
  for (int e = lane; e < 16 * D; e += 32) {
    int i = e / D, d = e % D;
    long r = r0 + i;
    bool in = r < rows;
    Qs[warp][i][d] = in ? q[grow(r) * D + d] : 0.f;
    Ds[warp][i][d] = in ? dout[grow(r) * D + d] : 0.f;
  }
  for (int i = 0; i < 16; i++) {  // Di = Σ dOut·Out of row i, a fixed lane order and tree
    long r = r0 + i;
    float x = 0.f;
    if (r < rows) {
      for (int d = lane; d < D; d += 32) x += dout[grow(r) * D + d] * out[grow(r) * D + d];
    }
    x = warp_sum(x);
    if (lane == 0) {
      Di[warp][i] = x;
      if (r < rows) di[grow(r)] = x;
    }
  }
  __syncwarp();
  long lim[2];
  float ls[2], dis[2];
  ATTN_UNROLL
  for (int h = 0; h < 2; h++) {
    long r = r0 + g + 8 * h;
    lim[h] = r < rows ? start + r / group : -1;
    ls[h] = r < rows ? lse[grow(r)] : 0.f;
    dis[h] = Di[warp][g + 8 * h];
  }
  const KVRef kr = kvref(kv, false), vr = kvref(kv, true);
  const bool f32kv = kv.block_size == 0 || kv.dtype == DT_F32;
  const uint16_t* kh = static_cast<const uint16_t*>(kv.pool);
  const long vshift = kv.block_size == 0 ? 0 : kv.voff - kv.koff;
  float dQ[MAXD / 8][4];
  ATTN_UNROLL
  for (int n = 0; n < MAXD / 8; n++) dQ[n][0] = dQ[n][1] = dQ[n][2] = dQ[n][3] = 0.f;
  bool bad = false;
  for (int c = 0; c <= int(last / CH); c++) {
    bad = chunk_offsets(kv, s, c, last, kvh, KVH, D, Koff[warp], lane) || bad;
    float S[8][4], dP[8][4];
    ATTN_UNROLL
    for (int n = 0; n < 8; n++)
      for (int e = 0; e < 4; e++) S[n][e] = dP[n][e] = 0.f;
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t aq[3][4], ad[3][4];
      afrag(Qs[warp], k0, g, t, aq);
      afrag(Ds[warp], k0, g, t, ad);
      ATTN_UNROLL
      for (int n = 0; n < 8; n++) {
        long off = Koff[warp][8 * n + g];
        long e = off + k0 + 2 * t;
        if (f32kv) {
          float kb[4] = {0.f, 0.f, 0.f, 0.f}, vb[4] = {0.f, 0.f, 0.f, 0.f};
          if (off >= 0) {
            kb[0] = kr.f[e], kb[1] = kr.f[e + 1], kb[2] = kr.f[e + 8], kb[3] = kr.f[e + 9];
            vb[0] = vr.f[e + vshift], vb[1] = vr.f[e + vshift + 1], vb[2] = vr.f[e + vshift + 8], vb[3] = vr.f[e + vshift + 9];
          }
          mma_f(S[n], aq, kb);
          mma_f(dP[n], ad, vb);
        } else {
          uint32_t kb[2] = {0u, 0u}, vb[2] = {0u, 0u};
          if (off >= 0) {
            kb[0] = pack_bf16(kh[e], kh[e + 1]), kb[1] = pack_bf16(kh[e + 8], kh[e + 9]);
            vb[0] = pack_bf16(kh[e + vshift], kh[e + vshift + 1]), vb[1] = pack_bf16(kh[e + vshift + 8], kh[e + vshift + 9]);
          }
          mma_h(S[n], aq, kb);
          mma_h(dP[n], ad, vb);
        }
      }
    }
    // dS = P∘(dP − Di), into S.
    ATTN_UNROLL
    for (int n = 0; n < 8; n++) {
      ATTN_UNROLL
      for (int e = 0; e < 4; e++) {
        long key = long(c) * CH + 8 * n + 2 * t + (e & 1);
        float p = key <= lim[e >> 1] ? expf(S[n][e] * scale - ls[e >> 1]) : 0.f;
        S[n][e] = p * (dP[n][e] - dis[e >> 1]);
      }
    }
    // dQ += dS·K: keys are the k index, head dims the n index.
    ATTN_UNROLL
    for (int kk = 0; kk < 4; kk++) {
      uint32_t as[3][4];
      pfrag(S[2 * kk], S[2 * kk + 1], as);
      const long o0 = Koff[warp][16 * kk + 2 * t], o1 = Koff[warp][16 * kk + 2 * t + 1];
      const long o8 = Koff[warp][16 * kk + 2 * t + 8], o9 = Koff[warp][16 * kk + 2 * t + 9];
      ATTN_UNROLL
      for (int n = 0; n < MAXD / 8; n++) {
        if (8 * n >= D) continue;
        int d = 8 * n + g;
        if (f32kv) {
          float kb[4] = {o0 >= 0 ? kr.f[o0 + d] : 0.f, o1 >= 0 ? kr.f[o1 + d] : 0.f, o8 >= 0 ? kr.f[o8 + d] : 0.f,
                         o9 >= 0 ? kr.f[o9 + d] : 0.f};
          mma_f(dQ[n], as, kb);
        } else {
          uint32_t kb[2] = {pack_bf16(o0 >= 0 ? kh[o0 + d] : 0, o1 >= 0 ? kh[o1 + d] : 0),
                            pack_bf16(o8 >= 0 ? kh[o8 + d] : 0, o9 >= 0 ? kh[o9 + d] : 0)};
          mma_h(dQ[n], as, kb);
        }
      }
    }
    __syncwarp();  // Koff is rewritten by the next chunk
  }
  ATTN_UNROLL
  for (int h = 0; h < 2; h++) {
    long r = r0 + g + 8 * h;
    if (r >= rows) continue;
    float* o = dq + grow(r) * D;
    ATTN_UNROLL
    for (int n = 0; n < MAXD / 8; n++) {
      if (8 * n >= D) continue;
      o[8 * n + 2 * t] = bad ? NAN : dQ[n][2 * h] * scale;
      o[8 * n + 2 * t + 1] = bad ? NAN : dQ[n][2 * h + 1] * scale;
    }
  }
}

KERNEL void __launch_bounds__(64) attention_bwd_dkdv(const float* dout, const float* q, const float* lse,
                                                     const float* di, float* dk, float* dv, const int32_t* qstart,
                                                     const int32_t* pos, const void* pool, int kv_dtype,
                                                     const int32_t* tables, int table_stride, int block_size,
                                                     long block_stride, long koff, long voff, long pool_blocks,
                                                     const float* kc, const float* vc, const int32_t* kstart, int H,
                                                     int KVH, int D, float scale) {
  __shared__ float Ks[NW][16][TS], Vs[NW][16][TS];
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int s = blockIdx.z, kvh = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  if (T == 0) return;
  const int group = H / KVH;
  const long rows = T * group, start = pos[q0], n = start + T;
  const long p0 = (long(blockIdx.x) * NW + warp) * 16;  // the warp's first key
  if (p0 >= n) return;
  auto grow = [&](long r) { return (q0 + r / group) * H + kvh * group + r % group; };
  const KVRef kr = kvref(kv, false), vr = kvref(kv, true);
  bool bad = false;
  for (int i = 0; i < 16; i++) {  // the tile's K and V rows (zero past the keys)
    long p = p0 + i, off = p < n ? kv.offset(s, p, kvh, KVH, D, false) : PAST;
    bad = bad || off == -1;
    const long vshift = kv.block_size == 0 ? 0 : kv.voff - kv.koff;
    for (int d = lane; d < D; d += 32) {
      Ks[warp][i][d] = off >= 0 ? kr.at(off + d) : 0.f;
      Vs[warp][i][d] = off >= 0 ? vr.at(off + vshift + d) : 0.f;
    }
  }
  __syncwarp();
  float dK[MAXD / 8][4], dV[MAXD / 8][4];
  ATTN_UNROLL
  for (int nn = 0; nn < MAXD / 8; nn++)
    for (int e = 0; e < 4; e++) dK[nn][e] = dV[nn][e] = 0.f;
  // Query rows that see key p0 or a later one: tokens t ≥ p0 − start.
  const long rfirst = max(0L, p0 - start) * group;
  for (long rb = rfirst; rb < rows; rb += 16) {
    // Sᵀ = K·Qᵀ and dPᵀ = V·dOutᵀ: keys are the m index, the 16 rows the n
    // index (two n-tiles); lane holds rows rb + 8n + 2t (+1).
    Acc sa[2], da[2];  // Sᵀ and dPᵀ, leading products apart (the recomputed P is sensitive to S)
    sa[0].zero(), sa[1].zero(), da[0].zero(), da[1].zero();
    long off[2];
    ATTN_UNROLL
    for (int nt = 0; nt < 2; nt++) {
      long r = rb + 8 * nt + g;  // the row this lane loads for B fragments
      off[nt] = r < rows ? grow(r) * D : -1;
    }
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t ak[3][4], av[3][4];
      afrag(Ks[warp], k0, g, t, ak);
      afrag(Vs[warp], k0, g, t, av);
      ATTN_UNROLL
      for (int nt = 0; nt < 2; nt++) {
        float qb[4] = {0.f, 0.f, 0.f, 0.f}, db[4] = {0.f, 0.f, 0.f, 0.f};
        if (off[nt] >= 0) {
          long e = off[nt] + k0 + 2 * t;
          qb[0] = q[e], qb[1] = q[e + 1], qb[2] = q[e + 8], qb[3] = q[e + 9];
          db[0] = dout[e], db[1] = dout[e + 1], db[2] = dout[e + 8], db[3] = dout[e + 9];
        }
        uint32_t qf[3][2], df[3][2];
        frag3<2>(qb, qf);
        frag3<2>(db, df);
        mma6(sa[nt], ak, qf);
        mma6(da[nt], av, df);
      }
    }
    // Pᵀ and dSᵀ: element e of n-tile nt is key p0 + g (+8 for e ≥ 2), row
    // rb + 8nt + 2t + (e & 1).
    float Pt[2][4], St[2][4];
    ATTN_UNROLL
    for (int nt = 0; nt < 2; nt++) {
      ATTN_UNROLL
      for (int e = 0; e < 4; e++) {
        long r = rb + 8 * nt + 2 * t + (e & 1), p = p0 + g + 8 * (e >> 1);
        bool vis = r < rows && p < n && p <= start + r / group;
        float pr = vis ? expf(sa[nt].value(e) * scale - lse[grow(r)]) : 0.f;
        Pt[nt][e] = pr;
        St[nt][e] = vis ? pr * (da[nt].value(e) - di[grow(r)]) : 0.f;
      }
    }
    // dV += Pᵀ·dOut and dK += dSᵀ·Q: rows are the k index (16), head dims n.
    uint32_t ap[3][4], as[3][4];
    pfrag(Pt[0], Pt[1], ap);
    pfrag(St[0], St[1], as);
    long ro[4];
    ATTN_UNROLL
    for (int j = 0; j < 4; j++) {
      long r = rb + 2 * t + (j & 1) + 8 * (j >> 1);
      ro[j] = r < rows ? grow(r) * D : -1;
    }
    ATTN_UNROLL
    for (int nn = 0; nn < MAXD / 8; nn++) {
      if (8 * nn >= D) continue;
      int d = 8 * nn + g;
      float db[4], qb[4];
      ATTN_UNROLL
      for (int j = 0; j < 4; j++) {
        db[j] = ro[j] >= 0 ? dout[ro[j] + d] : 0.f;
        qb[j] = ro[j] >= 0 ? q[ro[j] + d] : 0.f;
      }
      mma_f(dV[nn], ap, db);
      mma_f(dK[nn], as, qb);
    }
  }
  ATTN_UNROLL
  for (int h = 0; h < 2; h++) {
    long p = p0 + g + 8 * h;
    if (p >= n) continue;
    long o = ((long(kstart[s]) + p) * KVH + kvh) * D;
    ATTN_UNROLL
    for (int nn = 0; nn < MAXD / 8; nn++) {
      if (8 * nn >= D) continue;
      for (int e = 0; e < 2; e++) {
        long x = o + 8 * nn + 2 * t + e;
        dk[x] = bad ? NAN : dk[x] + dK[nn][2 * h + e] * scale;
        dv[x] = bad ? NAN : dv[x] + dV[nn][2 * h + e];
      }
    }
  }
}
