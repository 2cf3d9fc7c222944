// embedding.cu: Embedding out[T,C] = table[ids[t], :] (table [V,C] in f32,
// bf16 or f16, widened exactly) and EmbeddingBackward dtable[V,C] row
// ids[t] += dout[t,:].
// Launch: forward block 256, grid T (one block per token, threads over C);
// backward block 256, grid ceil(C/256): one thread per column walks the
// tokens in order, so repeated ids accumulate in the reference's order
// without atomics (deterministic). An id outside [0,V) is skipped (its
// output row left alone) and reported in the status slot (common.cuh,
// report_bad_index). Checked against: kerneltest.Embedding (bit-exact) and
// EmbeddingBackward on the SIMT host build.
#include "common.cuh"

KERNEL void __launch_bounds__(256) embedding_forward(float* out, const void* table, int dt, const int32_t* ids,
                                                     int T, int C, int V, int* status) {
  int t = blockIdx.x;
  if (t >= T) return;
  int id = ids[t];
  if (id < 0 || id >= V) {
    if (threadIdx.x == 0) report_bad_index(status, t, id, V);
    return;
  }
  long row = long(id) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) out[long(t) * C + c] = load_w(table, dt, row + c);
}

KERNEL void __launch_bounds__(256) embedding_backward(float* dtable, const float* dout, const int32_t* ids, int T,
                                                      int C, int V, int* status) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int t = 0; t < T; t++) {
    int id = ids[t];
    if (id < 0 || id >= V) {
      if (c == 0) report_bad_index(status, t, id, V);
      continue;
    }
    float* d = &dtable[long(id) * C + c];
    *d = *d + dout[long(t) * C + c];
  }
}
