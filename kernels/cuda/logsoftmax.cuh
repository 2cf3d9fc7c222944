// logsoftmax.cuh: one row's log-softmax arithmetic, shared by
// logsoftmax_gather (logsoftmax.cu) and sample_rows' full log-prob
// (sample.cu), so that on the same logits the two give the same bits
// (kerneltest.SampleFullLogProbExact). A row is read as xs(i) =
// __fmul_rn(x[i], s): the logits times the temperature's reciprocal,
// rounded as Scale rounds it (s = 1 reads the logits unchanged). __fmul_rn
// and __fadd_rn keep nvcc from contracting a product into a later add
// (the sum's += once became an FMA with expf's last multiply): a contraction
// is the compiler's choice per call site, so it could differ between the
// two kernels, and the host build never contracts.
// The order: max over a strided walk (thread t takes i ≡ t mod blockDim)
// then block_max; S = Σ expf(xs − max) in that walk's order per thread,
// then block_sum's fixed tree; log p = (xs(tg) − max) − logf(S), all in
// float32. Launch: one block per row, every thread calls each function.
#pragma once
#include "common.cuh"

namespace logsoftmax_row {
__device__ __forceinline__ float xs(const float* x, int i, float s) { return __fmul_rn(x[i], s); }

// row_max returns max_i xs(i) to every thread.
__device__ __forceinline__ float row_max(const float* x, int V, float s) {
  float m = -INFINITY;
  for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, xs(x, i, s));
  return block_max(m);
}

// row_sumexp returns Σ_i expf(xs(i) − m) to every thread.
__device__ __forceinline__ float row_sumexp(const float* x, int V, float m, float s) {
  float e = 0.f;
  for (int i = threadIdx.x; i < V; i += blockDim.x) e = __fadd_rn(e, expf(xs(x, i, s) - m));
  return block_sum(e);
}

// row_logprob is log_softmax(xs)[tg] from the row's max m and lse = logf(S).
__device__ __forceinline__ float row_logprob(const float* x, int tg, float m, float lse, float s) {
  return (xs(x, tg, s) - m) - lse;
}
}  // namespace logsoftmax_row
