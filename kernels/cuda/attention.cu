// attention.cu: causal grouped-query attention for a batch of sequences of
// different lengths (kernels.AttentionBatch), forward and backward, on CUDA
// cores, one warp per query row: the general path, for the head dims the
// tensor-core kernels (attention_fwd.cu, attention_bwd.cu: multiples of 16
// up to 128) do not take; any head dim up to 256. The launcher picks the
// path by head dim alone, so all of a model's rows run one of them.
//
// Layout of a batch, read from device memory in the kernels (nothing is
// uploaded per call, so a decode step's launches have fixed arguments):
// sequence s = blockIdx.y has rows qstart[s] .. qstart[s+1]−1 of Q, Out,
// dOut, dQ [N,H,D] and LSE, Di [N,H], at positions start .. start+T−1 with
// start = pos[qstart[s]]; its keys and values (positions 0 .. start+T−1) are
// read through KVSrc (attention_kv.cuh): a paged pool (block_size > 0) or
// contiguous K, V [rows,KVH,D] placed by kstart. dK, dV [rows,KVH,D] are
// placed by kstart too. Query t of head h attends to positions 0 .. start+t
// of kv head h/(H/KVH), scores q·k·scale; LSE = max + log Σ exp(score − max).
//
// attention_forward: one warp per (t, h); block 128 = 4 warps; grid
// (ceil(maxT·H/4), B). Lane l holds elements d = l + 32j (D ≤ 256) of q and
// of the output accumulator; scores are warp sums (fixed tree).
// attention_backward_dq: one warp per (t, h), same grid; recomputes
// p = exp(s − LSE), Di = Σ dOut·Out (stored for the next kernel),
// dQ = scale·Σ p·(dOut·v − Di)·k (written).
// attention_backward_dkdv: one warp per (key position j, kv head g); block
// 128; grid (ceil(maxLen·KVH/4), B); walks the queries t ≥ j − start and the
// heads of the group in order, dV[j] += Σ p·dOut, dK[j] += scale·Σ
// p·(dOut·v − Di)·q (accumulated once per element: deterministic, no
// atomics). A block id outside the pool makes the rows that read it NaN
// (the host checks host tables; device ones are guarded here).
// Assumes D ≤ 256, H % KVH == 0 (checked by the caller).
// Checked against: kerneltest.Attention, AttentionPaged, AttentionBackward,
// AttentionBackwardPaged on the SIMT host build.
#include "attention_kv.cuh"

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

KERNEL void __launch_bounds__(128) attention_forward(const float* q, float* out, float* lse, const int32_t* qstart, const int32_t* pos, const void* pool,
                      int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff,
                      long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H, int KVH,
                      int D, float scale) {
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  const int s = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  int lane = threadIdx.x % 32;
  long row = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= T * H) return;
  const long start = pos[q0];
  int t = int(row / H), h = int(row % H), g = h / (H / KVH);
  const long gr = q0 * H + row;  // the row in the batch's [N,H] arrays
  float qr[MAXJ], acc[MAXJ];
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    qr[j] = d < D ? q[gr * D + d] : 0.f;
    acc[j] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  bool bad = false;
  long n = start + t + 1;
  for (long p = 0; p < n; p++) {
    const KVRow kp = kv.row(s, p, g, KVH, D, false), vp = kv.row(s, p, g, KVH, D, true);
    if (!kp.ok()) {
      bad = true;
      break;
    }
    float sc = dot_kv(qr, kp, D, lane) * scale;
    float mn = fmaxf(m, sc);
    float corr = expf(m - mn), e = expf(sc - mn);
    l = l * corr + e;
    for (int j = 0; j < MAXJ; j++) {
      int d = lane + 32 * j;
      if (d < D) acc[j] = acc[j] * corr + e * vp.at(d);
    }
    m = mn;
  }
  float inv = bad ? NAN : 1.f / l;
  float* o = out + gr * D;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) o[d] = acc[j] * inv;
  }
  if (lse != nullptr && lane == 0) lse[gr] = bad ? NAN : m + logf(l);
}

KERNEL void __launch_bounds__(128) attention_backward_dq(const float* dout, const float* q, const float* out, const float* lse, float* dq, float* di,
                          const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables,
                          int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks,
                          const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale) {
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  const int s = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  int lane = threadIdx.x % 32;
  long row = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= T * H) return;
  const long start = pos[q0];
  int t = int(row / H), h = int(row % H), g = h / (H / KVH);
  const long gr = q0 * H + row;
  float qr[MAXJ], dor[MAXJ], acc[MAXJ];
  float dsum = 0.f;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    qr[j] = d < D ? q[gr * D + d] : 0.f;
    dor[j] = d < D ? dout[gr * D + d] : 0.f;
    acc[j] = 0.f;
    if (d < D) dsum += dor[j] * out[gr * D + d];
  }
  dsum = warp_sum(dsum);
  float l = lse[gr];
  bool bad = false;
  long n = start + t + 1;
  for (long p = 0; p < n; p++) {
    const KVRow kp = kv.row(s, p, g, KVH, D, false), vp = kv.row(s, p, g, KVH, D, true);
    if (!kp.ok()) {
      bad = true;
      break;
    }
    float pr = expf(dot_kv(qr, kp, D, lane) * scale - l);
    float ds = pr * (dot_kv(dor, vp, D, lane) - dsum);
    for (int j = 0; j < MAXJ; j++) {
      int d = lane + 32 * j;
      if (d < D) acc[j] += ds * kp.at(d);
    }
  }
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) dq[gr * D + d] = bad ? NAN : acc[j] * scale;
  }
  if (lane == 0) di[gr] = dsum;
}

KERNEL void __launch_bounds__(128) attention_backward_dkdv(const float* dout, const float* q, const float* lse, const float* di, float* dk, float* dv,
                            const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype,
                            const int32_t* tables, int table_stride, int block_size, long block_stride, long koff,
                            long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H,
                            int KVH, int D, float scale) {
  const KVSrc kv{pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart};
  const int s = blockIdx.y;
  const long q0 = qstart[s], T = qstart[s + 1] - q0;
  if (T == 0) return;
  const long start = pos[q0], S = start + T;
  int lane = threadIdx.x % 32;
  long item = long(blockIdx.x) * 4 + threadIdx.x / 32;
  if (item >= S * KVH) return;
  long p = item / KVH;
  int g = int(item % KVH), group = H / KVH;
  const KVRow kp = kv.row(s, p, g, KVH, D, false), vp = kv.row(s, p, g, KVH, D, true);
  const bool bad = !kp.ok();
  float kr[MAXJ], vr[MAXJ], dkr[MAXJ], dvr[MAXJ];
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    kr[j] = d < D && !bad ? kp.at(d) : 0.f;
    vr[j] = d < D && !bad ? vp.at(d) : 0.f;
    dkr[j] = dvr[j] = 0.f;
  }
  long t0 = p - start;
  if (t0 < 0) t0 = 0;
  for (long t = t0; t < T; t++) {
    for (int h = g * group; h < (g + 1) * group; h++) {
      long gr = (q0 + t) * H + h;
      const float* qq = q + gr * D;
      const float* dd = dout + gr * D;
      float pr = expf(dot_row(kr, qq, D, lane) * scale - lse[gr]);
      float ds = pr * (dot_row(vr, dd, D, lane) - di[gr]);
      for (int j = 0; j < MAXJ; j++) {
        int d = lane + 32 * j;
        if (d < D) {
          dvr[j] += pr * dd[d];
          dkr[j] += ds * qq[d];
        }
      }
    }
  }
  long o = ((long(kstart[s]) + p) * KVH + g) * D;
  for (int j = 0; j < MAXJ; j++) {
    int d = lane + 32 * j;
    if (d < D) {
      dk[o + d] = bad ? NAN : dk[o + d] + dkr[j] * scale;
      dv[o + d] = bad ? NAN : dv[o + d] + dvr[j];
    }
  }
}
