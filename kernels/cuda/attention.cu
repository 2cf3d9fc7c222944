// attention.cu: causal grouped-query attention for a batch of sequences of
// different lengths, forward and backward, flash-style: scores are never
// stored; every (query, head) row runs an online softmax over its keys.
//
// Layouts per sequence (AttnSeq / AttnGradSeq, arrays of descriptors in
// device memory): Q, Out, dOut, dQ [T,H,D]; K, V, dK, dV [S,KVH,D] with
// S ≥ Start+T; LSE and the scratch Di [T,H]. Forward and backward also read
// K, V from a paged KV cache: block tables of pointers to [block_size, KVH,
// D] blocks in float32 or bf16 (kernels.PagedKV), the same values in the
// same order as the contiguous layout, so both give bit-identical outputs
// (dK, dV stay contiguous). Query t (position Start+t) of
// head h attends to positions 0..Start+t of kv head h/(H/KVH), scores
// q·k·scale; LSE = max + log Σ exp(score − max).
//
// attention_forward: one warp per (t, h); block 128 = 4 warps; grid
// (ceil(maxT·H/4), nseq). Lane l holds elements d = l + 32j (D ≤ 256) of
// q and of the output accumulator; scores are warp sums (fixed tree).
// attention_backward_dq: one warp per (t, h), same grid; recomputes
// p = exp(s − LSE), Di = Σ dOut·Out (stored for the next kernel),
// dQ = scale·Σ p·(dOut·v − Di)·k (written).
// attention_backward_dkdv: one warp per (key position j, kv head g); block
// 128; grid (ceil(maxS·KVH/4), nseq); walks the queries t ≥ j − Start and
// the heads of the group in order, dV[j] += Σ p·dOut, dK[j] += scale·Σ
// p·(dOut·v − Di)·q (accumulated once per element: deterministic, no
// atomics). This is the simple decode-shaped scheme (no shared-memory K/V
// tiles across queries); prefill tiling is the next step.
// Assumes D ≤ 256, H % KVH == 0 (checked by the caller).
// Checked against: kerneltest.Attention (GQA 1..8, D 16/24/64/128, Start >
// 0, batches of mixed lengths, logits in the hundreds) and
// kerneltest.AttentionBackward and AttentionBackwardPaged on the SIMT host build.
#include "common.cuh"

struct AttnSeq {
  const float* q;
  const float* k;  // contiguous K, V (block_size == 0)
  const float* v;
  float* out;
  float* lse;  // may be null
  long t, start;
  // Paged K, V (block_size > 0): position p is row p % block_size of block
  // p / block_size; kb[b], vb[b] point at [block_size, KVH, D] blocks of
  // dtype kv_dtype (DT_F32 or DT_BF16, widened exactly).
  const void* const* kb;
  const void* const* vb;
  long block_size;
  long kv_dtype;
};

struct AttnGradSeq {
  const float* dout;
  const float* q;
  const float* k;
  const float* v;
  const float* out;
  const float* lse;
  float* dq;
  float* dk;
  float* dv;
  float* di;  // scratch [T,H]
  long t, start;
  // Paged K, V (block_size > 0; k and v are then unused), as in AttnSeq.
  const void* const* kb;
  const void* const* vb;
  long block_size;
  long kv_dtype;
};

namespace attention_impl {
constexpr int MAXJ = 8;  // D ≤ 32·MAXJ

__device__ __forceinline__ float dot_row(const float (&a)[MAXJ], const float* b, int D, int lane) {
  float s = 0.f;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) s += a[j] * b[d];
  }
  return warp_sum(s);
}

// KVRow is one row [D] of K or V: float32 (f) or bf16 bits (h).
struct KVRow {
  const float* f;
  const uint16_t* h;
  __device__ __forceinline__ float at(int d) const { return f ? f[d] : bf16_to_f32(h[d]); }
};

// kv_row returns position p of kv head g from K (v false) or V of sq (an
// AttnSeq or AttnGradSeq), contiguous or paged.
template <class Seq>
__device__ __forceinline__ KVRow kv_row(const Seq& sq, bool v, long p, int g, int KVH, int D) {
  if (sq.block_size == 0) return KVRow{(v ? sq.v : sq.k) + (p * KVH + g) * D, nullptr};
  const void* blk = (v ? sq.vb : sq.kb)[p / sq.block_size];
  long off = ((p % sq.block_size) * KVH + g) * D;
  if (sq.kv_dtype == DT_F32) return KVRow{static_cast<const float*>(blk) + off, nullptr};
  return KVRow{nullptr, static_cast<const uint16_t*>(blk) + off};
}

__device__ __forceinline__ float dot_kv(const float (&a)[MAXJ], const KVRow& b, int D, int lane) {
  float s = 0.f;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) s += a[j] * b.at(d);
  }
  return warp_sum(s);
}
}  // namespace attention_impl
using namespace attention_impl;

KERNEL void __launch_bounds__(128) attention_forward(const AttnSeq* seqs, int H, int KVH, int D, float scale) {
  const AttnSeq sq = seqs[blockIdx.y];
  int lane = threadIdx.x % 32;
  long row = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= sq.t * H) return;
  int t = int(row / H), h = int(row % H), g = h / (H / KVH);
  const float* q = sq.q + row * D;
  float qr[MAXJ], acc[MAXJ];
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    qr[j] = d < D ? q[d] : 0.f;
    acc[j] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  long n = sq.start + t + 1;
  for (long p = 0; p < n; p++) {
    const KVRow kp = kv_row(sq, false, p, g, KVH, D), vp = kv_row(sq, true, p, g, KVH, D);
    float s = dot_kv(qr, kp, D, lane) * scale;
    float mn = fmaxf(m, s);
    float corr = expf(m - mn), e = expf(s - mn);
    l = l * corr + e;
    for (int j = 0; j < MAXJ; j++) {
      int d = lane + 32 * j;
      if (d < D) acc[j] = acc[j] * corr + e * vp.at(d);
    }
    m = mn;
  }
  float inv = 1.f / l;
  float* o = sq.out + row * D;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) o[d] = acc[j] * inv;
  }
  if (sq.lse != nullptr && lane == 0) sq.lse[row] = m + logf(l);
}

KERNEL void __launch_bounds__(128) attention_backward_dq(const AttnGradSeq* seqs, int H, int KVH, int D,
                                                         float scale) {
  const AttnGradSeq sq = seqs[blockIdx.y];
  int lane = threadIdx.x % 32;
  long row = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= sq.t * H) return;
  int t = int(row / H), h = int(row % H), g = h / (H / KVH);
  float qr[MAXJ], dor[MAXJ], dq[MAXJ];
  float di = 0.f;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    qr[j] = d < D ? sq.q[row * D + d] : 0.f;
    dor[j] = d < D ? sq.dout[row * D + d] : 0.f;
    dq[j] = 0.f;
    if (d < D) di += dor[j] * sq.out[row * D + d];
  }
  di = warp_sum(di);
  float lse = sq.lse[row];
  long n = sq.start + t + 1;
  for (long p = 0; p < n; p++) {
    const KVRow kp = kv_row(sq, false, p, g, KVH, D), vp = kv_row(sq, true, p, g, KVH, D);
    float pr = expf(dot_kv(qr, kp, D, lane) * scale - lse);
    float ds = pr * (dot_kv(dor, vp, D, lane) - di);
    for (int j = 0; j < MAXJ; j++) {
      int d = lane + 32 * j;
      if (d < D) dq[j] += ds * kp.at(d);
    }
  }
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) sq.dq[row * D + d] = dq[j] * scale;
  }
  if (lane == 0) sq.di[row] = di;
}

KERNEL void __launch_bounds__(128) attention_backward_dkdv(const AttnGradSeq* seqs, int H, int KVH, int D,
                                                           float scale) {
  const AttnGradSeq sq = seqs[blockIdx.y];
  int lane = threadIdx.x % 32;
  long item = long(blockIdx.x) * 4 + threadIdx.x / 32;
  long S = sq.start + sq.t;
  if (item >= S * KVH) return;
  long p = item / KVH;
  int g = int(item % KVH), group = H / KVH;
  float kr[MAXJ], vr[MAXJ], dk[MAXJ], dv[MAXJ];
  const KVRow kp = kv_row(sq, false, p, g, KVH, D), vp = kv_row(sq, true, p, g, KVH, D);
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    kr[j] = d < D ? kp.at(d) : 0.f;
    vr[j] = d < D ? vp.at(d) : 0.f;
    dk[j] = dv[j] = 0.f;
  }
  long t0 = p - sq.start;
  if (t0 < 0) t0 = 0;
  for (long t = t0; t < sq.t; t++) {
    for (int h = g * group; h < (g + 1) * group; h++) {
      long row = t * H + h;
      const float* q = sq.q + row * D;
      const float* dout = sq.dout + row * D;
      float pr = expf(dot_row(kr, q, D, lane) * scale - sq.lse[row]);
      float ds = pr * (dot_row(vr, dout, D, lane) - sq.di[row]);
      for (int j = 0; j < MAXJ; j++) {
        int d = lane + 32 * j;
        if (d < D) {
          dv[j] += pr * dout[d];
          dk[j] += ds * q[d];
        }
      }
    }
  }
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) {
      sq.dk[item * D + d] += dk[j] * scale;
      sq.dv[item * D + d] += dv[j];
    }
  }
}
