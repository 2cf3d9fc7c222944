//go:build cudahost

// host.cc: the SIMT host build. It compiles every kernel of this package as
// host C++ through simt.h and exports one C entry per kernel,
// host_<kernel>(grid, block, workers, kernel arguments...), which runs the
// kernel on the CPU and returns NULL or a malloc'd error message (the
// caller frees it). Launch configurations come from the Go side (plan.go),
// the same ones the device launcher uses.
#include <cstdlib>
#include <cstring>

#include "simt.h"

#include "adamw.cu"
#include "attention.cu"
#include "attention_bwd.cu"
#include "attention_fwd.cu"
#include "buffer.cu"
#include "elementwise.cu"
#include "embedding.cu"
#include "kvcache.cu"
#include "logsoftmax.cu"
#include "loss.cu"
#include "matmul.cu"
#include "rmsnorm.cu"
#include "rope.cu"
#include "sample.cu"
#include "simt_probe.cu"
#include "swiglu.cu"

#include "host.h"

// Kernels that misuse warp and block collectives, host-only: the shim must
// report them as launch errors instead of hanging or returning garbage.

// simt_broken_diverge: half of a warp waits at __syncthreads while the other
// half waits in a shuffle: a deadlock.
KERNEL void simt_broken_diverge(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 0);
  }
}

// simt_broken_mask: a shuffle whose mask leaves out live lanes.
KERNEL void simt_broken_mask(int* out) { out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, int(threadIdx.x), 1); }

#define UNPAREN(...) __VA_ARGS__
#define HOST_ENTRY(name, params, args)                                                               \
  extern "C" char* host_##name(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                               int workers, UNPAREN params) {                                        \
    std::function<void()> body = [=] { name args; };                                               \
    std::string err = simt::launch(dim3(gx, gy, gz), dim3(bx, by, bz), workers, body);              \
    return err.empty() ? nullptr : strdup((std::string(#name ": ") + err).c_str());                 \
  }

HOST_ENTRY(add_f32, (float* dst, const float* src, long n), (dst, src, n))
HOST_ENTRY(scale_f32, (float* x, float s, long n), (x, s, n))
HOST_ENTRY(swiglu_forward, (float* out, const float* gate, const float* up, long n), (out, gate, up, n))
HOST_ENTRY(swiglu_backward,
           (float* dgate, float* dup, const float* dout, const float* gate, const float* up, long n),
           (dgate, dup, dout, gate, up, n))
HOST_ENTRY(adamw_f32,
           (float* param, const float* grad, float* m, float* v, float beta1, float beta2, float eps, float decay,
            float step_size, float bc2sqrt, long n),
           (param, grad, m, v, beta1, beta2, eps, decay, step_size, bc2sqrt, n))
HOST_ENTRY(embedding_forward, (float* out, const void* table, int dt, const int32_t* ids, int T, int C),
           (out, table, dt, ids, T, C))
HOST_ENTRY(embedding_backward, (float* dtable, const float* dout, const int32_t* ids, int T, int C),
           (dtable, dout, ids, T, C))
HOST_ENTRY(rmsnorm_forward, (float* out, const float* x, const float* w, int R, int C, float eps),
           (out, x, w, R, C, eps))
HOST_ENTRY(rmsnorm_backward_dx,
           (float* dx, float* rstd, const float* dout, const float* x, const float* w, int R, int C, float eps),
           (dx, rstd, dout, x, w, R, C, eps))
HOST_ENTRY(rmsnorm_backward_dw, (float* dw, const float* dout, const float* x, const float* rstd, int R, int C),
           (dw, dout, x, rstd, R, C))
HOST_ENTRY(rope_f32, (float* x, const int32_t* pos, int T, int H, int D, double theta, double sign),
           (x, pos, T, H, D, theta, sign))
HOST_ENTRY(attention_forward,
           (const float* q, float* out, float* lse, const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks,
            const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale),
           (q, out, lse, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale))
HOST_ENTRY(attention_fwd1, (const float* q, float* out, float* lse, const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale, int nsplit, int cps, float* part_o, float* part_ml, int max_chunks), (q, out, lse, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale, nsplit, cps, part_o, part_ml, max_chunks))
HOST_ENTRY(attention_fwd4, (const float* q, float* out, float* lse, const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale, int nsplit, int cps, float* part_o, float* part_ml, int max_chunks), (q, out, lse, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale, nsplit, cps, part_o, part_ml, max_chunks))
HOST_ENTRY(attention_combine,
           (float* out, float* lse, const int32_t* qstart, const int32_t* pos, const float* part_o, const float* part_ml,
            int H, int D, int max_chunks),
           (out, lse, qstart, pos, part_o, part_ml, H, D, max_chunks))
HOST_ENTRY(attention_bwd_dq, (const float* dout, const float* q, const float* out, const float* lse, float* dq, float* di, const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale), (dout, q, out, lse, dq, di, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale))
HOST_ENTRY(attention_bwd_dkdv, (const float* dout, const float* q, const float* lse, const float* di, float* dk, float* dv, const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale), (dout, q, lse, di, dk, dv, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale))
HOST_ENTRY(attention_backward_dq,
           (const float* dout, const float* q, const float* out, const float* lse, float* dq, float* di,
            const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks,
            const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale),
           (dout, q, out, lse, dq, di, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale))
HOST_ENTRY(attention_backward_dkdv,
           (const float* dout, const float* q, const float* lse, const float* di, float* dk, float* dv,
            const int32_t* qstart, const int32_t* pos, const void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks,
            const float* kc, const float* vc, const int32_t* kstart, int H, int KVH, int D, float scale),
           (dout, q, lse, di, dk, dv, qstart, pos, pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, kc, vc, kstart, H, KVH, D, scale))
HOST_ENTRY(write_kv,
           (void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const int32_t* qstart,
            const int32_t* pos, int B, const float* k, const float* v, long N, int row_len),
           (pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, qstart, pos, B, k, v, N, row_len))
HOST_ENTRY(write_kv_rope,
           (void* pool, int kv_dtype, const int32_t* tables, int table_stride, int block_size, long block_stride, long koff, long voff, long pool_blocks, const int32_t* qstart,
            const int32_t* pos, int B, float* k, const float* v, long N, int KVH, int D, double theta),
           (pool, kv_dtype, tables, table_stride, block_size, block_stride, koff, voff, pool_blocks, qstart, pos, B, k, v, N, KVH, D, theta))
HOST_ENTRY(add_rmsnorm, (float* out, float* x, const float* res, const float* w, int R, int C, float eps),
           (out, x, res, w, R, C, eps))
HOST_ENTRY(logsoftmax_gather,
           (float* logp, float* entropy, const float* logits, const int32_t* targets, int R, int V),
           (logp, entropy, logits, targets, R, V))
HOST_ENTRY(policy_loss, (const void* args), (static_cast<const LossArgs*>(args)))
HOST_ENTRY(softmax_rows, (float* x, int R, int V), (x, R, V))
HOST_ENTRY(logsoftmax_gather_backward,
           (float* dlogits, const float* logits, const int32_t* targets, const float* dlogp, const float* dentropy,
            int R, int V),
           (dlogits, logits, targets, dlogp, dentropy, R, V))
HOST_ENTRY(argmax_f32, (int32_t* out, const float* x, int V), (out, x, V))
HOST_ENTRY(sample_rows,
           (int32_t* ids, float* logp, float* full, const float* logits, const void* params, const double* us, int R,
            int V),
           (ids, logp, full, logits, static_cast<const SampleParams*>(params), us, R, V))
HOST_ENTRY(simt_probe_mma, (float* d, const uint16_t* a, const uint16_t* b, const float* c), (d, a, b, c))
HOST_ENTRY(simt_probe_barrier, (int* out), (out))
HOST_ENTRY(simt_broken_diverge, (int* out), (out))
HOST_ENTRY(simt_broken_mask, (int* out), (out))
HOST_ENTRY(gemm_bf16_wt, (float* out, const float* a, const uint16_t* w, int I, int J, int R, int accumulate),
           (out, a, w, I, J, R, accumulate))
HOST_ENTRY(gemm_bf16_wn, (float* out, const float* a, const uint16_t* w, int I, int J, int R, int accumulate),
           (out, a, w, I, J, R, accumulate))
HOST_ENTRY(gemm_f32,
           (float* out, const float* a, long sai, long sar, const void* b, int bdt, long sbr, long sbj, int I, int J,
            int R, int accumulate),
           (out, a, sai, sar, b, bdt, sbr, sbj, I, J, R, accumulate))
HOST_ENTRY(copy_cast, (void* dst, const void* src, int dt_dst, int dt_src, int es, long n),
           (dst, src, dt_dst, dt_src, es, n))
HOST_ENTRY(gather_rows, (void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols),
           (dst, src, idx, es, nidx, cols))
HOST_ENTRY(scatter_rows, (void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols),
           (dst, src, idx, es, nidx, cols))
HOST_ENTRY(transpose_rows, (void* dst, const void* src, int es, long rows, long cols), (dst, src, es, rows, cols))
HOST_ENTRY(sum_squares, (double* out, const float* x, long n), (out, x, n))
HOST_ENTRY(all_finite, (int32_t* out, const float* x, long n), (out, x, n))
