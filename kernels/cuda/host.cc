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
#include "buffer.cu"
#include "elementwise.cu"
#include "embedding.cu"
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

// simt_broken_ldmatrix: an ldmatrix row address that is not 16-byte
// aligned (a misaddressed fragment load).
KERNEL void simt_broken_ldmatrix(int* out) {
  __shared__ __align__(16) uint16_t s[32 * 8 + 1];
  uint32_t r[4];
  ldmatrix_x4<false>(r, &s[threadIdx.x * 8 + 1]);
  out[threadIdx.x] = int(r[0]);
}

// simt_broken_cp_async: each thread reads its cp.async destination before
// waiting for the copy: out gets the shared memory's old value here (the
// copy lands at the wait), as it may on the GPU.
KERNEL void simt_broken_cp_async(int* out) {
  __shared__ __align__(16) int s[32 * 4];
  int* d = &s[threadIdx.x * 4];
  d[0] = -1;
  cp_async16(d, out + threadIdx.x * 4, 16);
  cp_async_commit();
  out[threadIdx.x * 4 + 1] = d[0];  // before the wait
  cp_async_wait<0>();
  out[threadIdx.x * 4 + 2] = d[0];  // after it
}

#define UNPAREN(...) __VA_ARGS__
#define HOST_ENTRY(name, params, args)                                                               \
  extern "C" char* host_##name(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                               int workers, UNPAREN params) {                                        \
    std::function<void()> body = [=] { name args; };                                               \
    std::string err = simt::launch(dim3(gx, gy, gz), dim3(bx, by, bz), workers, body);              \
    return err.empty() ? nullptr : strdup((std::string(#name ": ") + err).c_str());                 \
  }

// HOST_ENTRY_SMEM is HOST_ENTRY for a kernel with smem bytes of dynamic
// shared memory (the kernel's own constant: the device launcher's copy in
// plan.go is checked against it).
#define HOST_ENTRY_SMEM(name, smem, params, args)                                                     \
  extern "C" char* host_##name(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
                               int workers, UNPAREN params) {                                        \
    std::function<void()> body = [=] { name args; };                                               \
    std::string err = simt::launch(dim3(gx, gy, gz), dim3(bx, by, bz), workers, body, smem);        \
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
HOST_ENTRY(attention_forward, (const void* seqs, int H, int KVH, int D, float scale),
           (static_cast<const AttnSeq*>(seqs), H, KVH, D, scale))
HOST_ENTRY(attention_backward_dq, (const void* seqs, int H, int KVH, int D, float scale),
           (static_cast<const AttnGradSeq*>(seqs), H, KVH, D, scale))
HOST_ENTRY(attention_backward_dkdv, (const void* seqs, int H, int KVH, int D, float scale),
           (static_cast<const AttnGradSeq*>(seqs), H, KVH, D, scale))
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
HOST_ENTRY(simt_probe_ldmatrix, (uint32_t* out, const uint16_t* m), (out, m))
HOST_ENTRY(simt_probe_cp_async, (float* out, const float* src), (out, src))
HOST_ENTRY(simt_probe_mma_chain, (float* d, const float* a, const uint16_t* b, int R), (d, a, b, R))
HOST_ENTRY(simt_broken_diverge, (int* out), (out))
HOST_ENTRY(simt_broken_mask, (int* out), (out))
HOST_ENTRY(simt_broken_ldmatrix, (int* out), (out))
HOST_ENTRY(simt_broken_cp_async, (int* out), (out))
#define GEMM_BF16_ENTRY(name, large, wt, terms)                                                         \
  HOST_ENTRY_SMEM(name, gemm_bf16_smem(large, wt, terms),                                               \
                  (float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, \
                   int splits),                                                                         \
                  (out, ws, a, w, I, J, R, accumulate, splits))
GEMM_BF16_ENTRY(gemm_bf16_s_wt_x1, 0, 1, 1)
GEMM_BF16_ENTRY(gemm_bf16_s_wt_x3, 0, 1, 3)
GEMM_BF16_ENTRY(gemm_bf16_l_wt_x1, 1, 1, 1)
GEMM_BF16_ENTRY(gemm_bf16_l_wt_x3, 1, 1, 3)
GEMM_BF16_ENTRY(gemm_bf16_s_wn_x3, 0, 0, 3)
GEMM_BF16_ENTRY(gemm_bf16_l_wn_x3, 1, 0, 3)
extern "C" int host_gemm_bf16_smem(int large, int wt, int terms) { return gemm_bf16_smem(large, wt, terms); }
HOST_ENTRY(gemm_f32,
           (float* out, float* ws, const float* a, long sai, long sar, const void* b, int bdt, long sbr, long sbj, int I,
            int J, int R, int accumulate, int splits),
           (out, ws, a, sai, sar, b, bdt, sbr, sbj, I, J, R, accumulate, splits))
HOST_ENTRY(gemm_splitk_reduce, (float* out, const float* ws, long n, int parts, int accumulate),
           (out, ws, n, parts, accumulate))
HOST_ENTRY(copy_cast, (void* dst, const void* src, int dt_dst, int dt_src, int es, long n),
           (dst, src, dt_dst, dt_src, es, n))
HOST_ENTRY(gather_rows, (void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols),
           (dst, src, idx, es, nidx, cols))
HOST_ENTRY(scatter_rows, (void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols),
           (dst, src, idx, es, nidx, cols))
HOST_ENTRY(transpose_rows, (void* dst, const void* src, int es, long rows, long cols), (dst, src, es, rows, cols))
HOST_ENTRY(sum_squares, (double* out, const float* x, long n), (out, x, n))
HOST_ENTRY(all_finite, (int32_t* out, const float* x, long n), (out, x, n))
