// sample.cu: Argmax over logits[V] and SampleRows over logits[R,V] (float32).
//
// argmax_f32: out[0] = the first index of the largest value (ties to the
// lower index, as torch.argmax; NaNs are skipped). Launch: one block of
// 512 threads; thread-local best over a strided walk, then a fixed tree of
// (value, index) reductions in shared memory.
//
// sample_rows: row r (block r) is drawn under params[r] with u[r], the
// reference's sampling (kernels/ref sampleRow) in float64:
// z = logit/T over finite logits; top-k keeps z ≥ the k-th largest (ties
// kept); top-p keeps a token while the probability mass before it, in
// (z desc, index asc) order, is < top_p; min-p keeps e = exp(z − zmax) ≥
// min_p; the sample is the first kept token, in index order, whose running
// sum of e exceeds u·S. No sort: z is monotone in the logit, so the top-k
// threshold and the top-p boundary are found by bisection over the
// logits' order-preserving 32-bit keys (32 block-wide counts or sums each);
// the boundary tie group of top-p is walked in index order by one thread;
// the final pick is a chunked block prefix sum. Writes ids[r], logp[r]
// (z − zmax − log S, float64 rounded once) and full[r], which is
// logsoftmax_gather's arithmetic (logsoftmax.cuh, float32, the same block
// size) on the row scaled as Scale scales it, logit·(1/T) with 1/T
// rounded to float32 (T = 1 under greedy): the same bits as Scale then
// LogSoftmaxGather, which is what training computes, so the sampled
// log-probs equal the training forward's wherever the logits do
// (kerneltest.SampleFullLogProbExact). A greedy row (temperature 0) takes
// the argmax and logp 0. A row with no finite logit gets id −1
// and NaN log-probabilities (kernels.Backend's SampleRows): a sampled row
// finds it in its count of finite logits, a greedy row when its argmax is
// not finite. Launch: one block of 512 threads
// per row (grid R), no scratch memory.
// Sums are in a different order than the reference's sequential float64
// sums, so a draw landing within ~1e-16 relative of a boundary could
// differ; exact boundaries of the tests (equal logits) are exact in both.
// Checked against: kerneltest.Argmax and kerneltest.Sample (ids exact) on
// the SIMT host build.
#include "logsoftmax.cuh"

namespace sample_impl {

constexpr int NT = 512;

// key maps a float to a uint32 with the same order.
__device__ __forceinline__ uint32_t key(float f) {
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ bool finite_logit(float l) { return l > -INFINITY && l < INFINITY; }

// block_count is block_sum for counts below 2^24 (exact in float32).
__device__ __forceinline__ int block_count(int c) { return int(block_sum(float(c))); }

struct Filter {
  double inv_t, zmax, min_p;
  uint32_t k_key;      // top-k: keep key ≥ k_key (0 = all)
  uint32_t p_key;      // top-p: keep key > p_key, or == p_key with index ≤ p_last
  int p_last;          // (p_key = 0, p_last = INT_MAX: all)
  bool use_min_p;
};

__device__ __forceinline__ bool kept(const Filter& f, const float* x, int i, int stage) {
  float l = x[i];
  if (!finite_logit(l)) return false;
  uint32_t k = key(l);
  if (k < f.k_key) return false;
  if (stage >= 1 && (k < f.p_key || (k == f.p_key && i > f.p_last))) return false;
  if (stage >= 2 && f.use_min_p && exp(double(l) * f.inv_t - f.zmax) < f.min_p) return false;
  return true;
}

__device__ __forceinline__ double e_of(const Filter& f, float l) { return exp(double(l) * f.inv_t - f.zmax); }

}  // namespace sample_impl
using namespace sample_impl;

// argmax_block returns the row's argmax to thread 0 (other threads get
// garbage).
__device__ __forceinline__ int argmax_block(const float* x, int V) {
  __shared__ float bv[NT];
  __shared__ int bi[NT];
  float best = -INFINITY;
  int besti = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    float v = x[i];
    if (v != v) continue;
    if (besti == 0x7fffffff || v > best) best = v, besti = i;
  }
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = besti;
  __syncthreads();
  for (int s = NT / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) {
      float v = bv[threadIdx.x + s];
      int j = bi[threadIdx.x + s];
      if (v > bv[threadIdx.x] || (v == bv[threadIdx.x] && j < bi[threadIdx.x])) bv[threadIdx.x] = v, bi[threadIdx.x] = j;
    }
    __syncthreads();
  }
  int r = bi[0] == 0x7fffffff ? 0 : bi[0];
  __syncthreads();  // bv, bi may be reused by the next call
  return r;
}

KERNEL void __launch_bounds__(512) argmax_f32(int32_t* out, const float* x, int V) {
  int r = argmax_block(x, V);
  if (threadIdx.x == 0) out[0] = r;
}

// no_finite reports to every thread whether no logit of x[V] is finite.
__device__ __forceinline__ bool no_finite(const float* x, int V) {
  int n = 0;
  for (int i = threadIdx.x; i < V; i += blockDim.x) n += finite_logit(x[i]);
  return block_count(n) == 0;
}

// dead_row writes a row with no finite logit: id −1, NaN log-probabilities.
__device__ __forceinline__ void dead_row(int32_t* ids, float* logp, float* full, int row) {
  ids[row] = -1;
  logp[row] = full[row] = __int_as_float(0x7fc00000);
}

// SampleParams mirrors kernels.SamplingParams (with a 32-bit TopK).
struct SampleParams {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

KERNEL void __launch_bounds__(512) sample_rows(int32_t* ids, float* logp, float* full, const float* logits,
                                                const SampleParams* params, const double* us, int R, int V) {
  const int row = blockIdx.x;
  if (row >= R) return;
  const float* x = logits + long(row) * V;
  const SampleParams prm = params[row];
  const double u = us[row];
  const float temperature = prm.temperature, top_p = prm.top_p, min_p = prm.min_p;
  const int top_k = prm.top_k;
  if (temperature == 0.f) {
    int id = argmax_block(x, V);
    __shared__ int id_s;
    if (threadIdx.x == 0) id_s = id;
    __syncthreads();
    id = id_s;
    if (!finite_logit(x[id]) && no_finite(x, V)) {  // uniform over the block
      if (threadIdx.x == 0) dead_row(ids, logp, full, row);
      return;
    }
    float m = logsoftmax_row::row_max(x, V, 1.f);
    float lse = logf(logsoftmax_row::row_sumexp(x, V, m, 1.f));
    if (threadIdx.x == 0) {
      ids[row] = id;
      logp[row] = 0.f;
      full[row] = logsoftmax_row::row_logprob(x, id, m, lse, 1.f);
    }
    return;
  }
  __shared__ double part[NT];
  __shared__ int pick_s;
  __shared__ double total_s;
  Filter f;
  f.inv_t = 1.0 / double(temperature);
  f.k_key = 0;
  f.p_key = 0;
  f.p_last = 0x7fffffff;
  f.min_p = min_p;
  f.use_min_p = min_p > 0.f;
  // z is monotone in the logit, so zmax is the largest finite logit's z.
  float lmax = -INFINITY;
  int nkept = 0;
  for (int i = threadIdx.x; i < V; i += blockDim.x)
    if (finite_logit(x[i])) lmax = fmaxf(lmax, x[i]), nkept++;
  lmax = block_max(lmax);
  nkept = block_count(nkept);
  if (nkept == 0) {  // uniform over the block
    if (threadIdx.x == 0) dead_row(ids, logp, full, row);
    return;
  }
  f.zmax = double(lmax) * f.inv_t;
  // The full log-prob's max and log S, as logsoftmax_gather takes them.
  const float inv_t32 = 1.f / temperature;  // Scale's float32 1/T (1 at T = 1)
  const float full_m = logsoftmax_row::row_max(x, V, inv_t32);
  const float full_lse = logf(logsoftmax_row::row_sumexp(x, V, full_m, inv_t32));

  // Top-k: the largest key K with count(key ≥ K) ≥ k.
  if (top_k > 0 && top_k < nkept) {
    uint32_t lo = 0, hi = 0xffffffffu;  // invariant: count(≥ lo) ≥ k
    while (lo < hi) {
      uint32_t mid = uint32_t((uint64_t(lo) + hi + 1) / 2);
      int c = 0;
      for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (finite_logit(x[i]) && key(x[i]) >= mid) c++;
      if (block_count(c) >= top_k)
        lo = mid;
      else
        hi = mid - 1;
    }
    f.k_key = lo;
  }

  // Top-p: the smallest key K with mass(key > K) < top_p is the boundary
  // group; its members are kept in index order while the mass before them
  // is < top_p.
  if (top_p > 0.f && top_p < 1.f) {
    double s = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
      if (kept(f, x, i, 0)) s += e_of(f, x[i]);
    s = block_sum_d(s);
    double tp = double(top_p);
    uint32_t lo = 0, hi = 0xffffffffu;  // find smallest K with above(K) < tp
    while (lo < hi) {
      uint32_t mid = lo + (hi - lo) / 2;
      double a = 0;
      for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (kept(f, x, i, 0) && key(x[i]) > mid) a += e_of(f, x[i]);
      if (block_sum_d(a) / s < tp)
        hi = mid;
      else
        lo = mid + 1;
    }
    double above = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
      if (kept(f, x, i, 0) && key(x[i]) > lo) above += e_of(f, x[i]);
    above = block_sum_d(above) / s;
    if (threadIdx.x == 0) {
      int last = -1;
      double cum = above;
      for (int i = 0; i < V; i++) {
        if (!kept(f, x, i, 0) || key(x[i]) != lo) continue;
        if (cum >= tp) break;
        cum += e_of(f, x[i]) / s;
        last = i;
      }
      pick_s = last;
    }
    __syncthreads();
    f.p_key = lo;
    f.p_last = pick_s;
    __syncthreads();
  }

  // The draw: each thread owns a contiguous chunk of indices.
  int chunk = (V + NT - 1) / NT;
  int c0 = min(V, int(threadIdx.x) * chunk), c1 = min(V, c0 + chunk);
  double cs = 0;
  for (int i = c0; i < c1; i++)
    if (kept(f, x, i, 2)) cs += e_of(f, x[i]);
  part[threadIdx.x] = cs;
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive scan of the chunk sums, in index order
    double run = 0;
    for (int t = 0; t < NT; t++) {
      double v = part[t];
      part[t] = run;
      run += v;
    }
    total_s = run;
  }
  __syncthreads();
  double total = total_s;
  double target = u * total;
  double cum = part[threadIdx.x];
  int mine = 0x7fffffff, last_kept = -1;
  for (int i = c0; i < c1; i++) {
    if (!kept(f, x, i, 2)) continue;
    last_kept = i;
    cum += e_of(f, x[i]);
    if (cum > target) {
      mine = i;
      break;
    }
  }
  int first = block_min_i(mine);
  int last = block_max_i(last_kept);
  if (threadIdx.x == 0) {
    int pick = first != 0x7fffffff ? first : last;
    double zp = double(x[pick]) * f.inv_t - f.zmax;
    ids[row] = pick;
    logp[row] = float(zp - log(total));
    full[row] = logsoftmax_row::row_logprob(x, pick, full_m, full_lse, inv_t32);
  }
}
