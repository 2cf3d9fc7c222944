// host.h: the C entries of the SIMT host build (host.cc), for cgo.
#pragma once
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
char* host_add_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dst, const float* src, long n);
char* host_scale_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* x, float s, long n);
char* host_swiglu_forward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, const float* gate, const float* up, long n);
char* host_swiglu_backward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dgate, float* dup, const float* dout, const float* gate, const float* up, long n);
char* host_adamw_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* param, const float* grad, float* m, float* v, float beta1, float beta2, float eps, float decay, float step_size, float bc2sqrt, long n);
char* host_embedding_forward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, const void* table, int dt, const int32_t* ids, int T, int C);
char* host_embedding_backward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dtable, const float* dout, const int32_t* ids, int T, int C);
char* host_rmsnorm_forward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, const float* x, const float* w, int R, int C, float eps);
char* host_rmsnorm_backward_dx(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dx, float* rstd, const float* dout, const float* x, const float* w, int R, int C, float eps);
char* host_rmsnorm_backward_dw(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dw, const float* dout, const float* x, const float* rstd, int R, int C);
char* host_rope_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* x, const int32_t* pos, int T, int H, int D, double theta, double sign);
char* host_attention_forward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, const void* seqs, int H, int KVH, int D, float scale);
char* host_attention_backward_dq(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, const void* seqs, int H, int KVH, int D, float scale);
char* host_attention_backward_dkdv(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, const void* seqs, int H, int KVH, int D, float scale);
char* host_logsoftmax_gather(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* logp, float* entropy, const float* logits, const int32_t* targets, int R, int V);
char* host_policy_loss(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, const void* args);
char* host_softmax_rows(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* x, int R, int V);
char* host_logsoftmax_gather_backward(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* dlogits, const float* logits, const int32_t* targets, const float* dlogp, const float* dentropy, int R, int V);
char* host_argmax_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int32_t* out, const float* x, int V);
char* host_sample_rows(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int32_t* ids, float* logp, float* full, const float* logits, const void* params, const double* us, int R, int V);
char* host_simt_probe_mma(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* d, const uint16_t* a, const uint16_t* b, const float* c);
char* host_simt_probe_barrier(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int* out);
char* host_simt_probe_ldmatrix(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, uint32_t* out, const uint16_t* m);
char* host_simt_probe_cp_async(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, const float* src);
char* host_simt_probe_mma_chain(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* d, const float* a, const uint16_t* b, int R);
char* host_simt_broken_diverge(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int* out);
char* host_simt_broken_mask(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int* out);
char* host_simt_broken_ldmatrix(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int* out);
char* host_simt_broken_cp_async(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int* out);
char* host_gemm_bf16_s_wt_x1(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
char* host_gemm_bf16_s_wt_x3(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
char* host_gemm_bf16_l_wt_x1(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
char* host_gemm_bf16_l_wt_x3(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
char* host_gemm_bf16_s_wn_x3(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
char* host_gemm_bf16_l_wn_x3(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R, int accumulate, int splits);
int host_gemm_bf16_smem(int large, int wt, int terms);
char* host_gemm_f32(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, float* ws, const float* a, long sai, long sar, const void* b, int bdt, long sbr, long sbj, int I, int J, int R, int accumulate, int splits);
char* host_gemm_splitk_reduce(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, float* out, const float* ws, long n, int parts, int accumulate);
char* host_copy_cast(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, void* dst, const void* src, int dt_dst, int dt_src, int es, long n);
char* host_gather_rows(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols);
char* host_scatter_rows(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, void* dst, const void* src, const int32_t* idx, int es, long nidx, long cols);
char* host_transpose_rows(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, void* dst, const void* src, int es, long rows, long cols);
char* host_sum_squares(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, double* out, const float* x, long n);
char* host_all_finite(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int workers, int32_t* out, const float* x, long n);
#ifdef __cplusplus
}
#endif
