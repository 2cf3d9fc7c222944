// logsoftmax.cu: per-row log-softmax ops over logits[R,V], chunked over V
// (threads stride the row; no [R,V] intermediate besides the in-place ops):
//   logsoftmax_gather: logp[r] = x[tg] − max − log S, S = Σ exp(x − max);
//     if entropy != nullptr, entropy[r] = log S − Σ e·(x − max)/S
//     (−Inf logits contribute nothing). logp never depends on entropy.
//   softmax_rows: x ← exp(x − max)·(1/S), in place.
//   logsoftmax_gather_backward: dlogits = dlogp[r]·(onehot(tg) − p)
//     − dentropy[r]·p·(log p + H) with p = softmax(x), H the row's entropy
//     (the entropy term only when dentropy != nullptr, then with the row's
//     sums and p in float64); dlogits may alias logits (each element is
//     read then written by the same thread).
// Launch: block 512, grid R (one block per row); max and sums are float32
// with a fixed reduction tree (block_max, block_sum): deterministic. The
// gather's arithmetic is logsoftmax.cuh's, which sample_rows' full
// log-prob shares (the same bits on the same logits).
// A target outside [0,V) skips its row (outputs left alone) and is
// reported in the status slot (common.cuh, report_bad_index). Assumes a
// finite max.
// Checked against: kerneltest.LogSoftmaxGather (V up to 151,936, ±Inf,
// offsets 5e4), Softmax and LogSoftmaxGatherBackward on the SIMT host build.
#include "logsoftmax.cuh"

namespace logsoftmax_impl {
__device__ __forceinline__ float row_max(const float* x, int V) { return logsoftmax_row::row_max(x, V, 1.f); }
__device__ __forceinline__ float row_sumexp(const float* x, int V, float m) {
  return logsoftmax_row::row_sumexp(x, V, m, 1.f);
}
}  // namespace logsoftmax_impl
using namespace logsoftmax_impl;

KERNEL void __launch_bounds__(512) logsoftmax_gather(float* logp, float* entropy, const float* logits,
                                                     const int32_t* targets, int R, int V, int* status) {
  int r = blockIdx.x;
  if (r >= R) return;
  int tg = targets[r];
  if (tg < 0 || tg >= V) {  // the whole block returns, before any collective
    if (threadIdx.x == 0) report_bad_index(status, r, tg, V);
    return;
  }
  const float* x = logits + long(r) * V;
  float m = row_max(x, V);
  float s = row_sumexp(x, V, m);
  float lse = logf(s);
  if (entropy != nullptr) {
    float se = 0.f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      float d = x[i] - m;
      if (d > -INFINITY) se += expf(d) * d;
    }
    se = block_sum(se);
    if (threadIdx.x == 0) entropy[r] = lse - se / s;
  }
  if (threadIdx.x == 0) logp[r] = logsoftmax_row::row_logprob(x, tg, m, lse, 1.f);
}

KERNEL void __launch_bounds__(512) softmax_rows(float* logits, int R, int V) {
  int r = blockIdx.x;
  if (r >= R) return;
  float* x = logits + long(r) * V;
  float m = row_max(x, V);
  float inv = 1.f / row_sumexp(x, V, m);
  for (int i = threadIdx.x; i < V; i += blockDim.x) x[i] = expf(x[i] - m) * inv;
}

KERNEL void __launch_bounds__(512) logsoftmax_gather_backward(float* dlogits, const float* logits,
                                                              const int32_t* targets, const float* dlogp,
                                                              const float* dentropy, int R, int V, int* status) {
  int r = blockIdx.x;
  if (r >= R) return;
  int tg = targets[r];
  if (tg < 0 || tg >= V) {  // the whole block returns, before any collective
    if (threadIdx.x == 0) report_bad_index(status, r, tg, V);
    return;
  }
  const float* x = logits + long(r) * V;
  float m = row_max(x, V);
  if (dentropy != nullptr) {
    double s = 0, se = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      double d = double(x[i]) - m;
      if (x[i] > -INFINITY) {
        double e = exp(d);
        s += e;
        se += e * d;
      }
    }
    s = block_sum_d(s);
    se = block_sum_d(se);
    double lse = double(m) + log(s), h = log(s) - se / s;
    double g = dlogp[r], ge = dentropy[r];
    float* d = dlogits + long(r) * V;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      double xi = x[i];
      double p = exp(xi - lse);
      double di = -g * p;
      if (ge != 0 && p > 0) di -= ge * p * (xi - lse + h);
      if (i == tg) di += g;
      d[i] = float(di);
    }
    return;
  }
  float inv = 1.f / row_sumexp(x, V, m);
  float g = dlogp[r];
  float* d = dlogits + long(r) * V;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    float p = expf(x[i] - m) * inv;
    float di = -g * p;
    if (i == tg) di += g;
    d[i] = di;
  }
}
