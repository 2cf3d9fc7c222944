// matmul.cu: the three GEMMs of kernels.Backend.
//
// Layouts (row-major): MatMul out[M,N] (=/+=) x[M,K]·wᵀ with w [N,K];
// MatMulNN out[M,K] (=/+=) dy[M,N]·w[N,K]; MatMulTN dw[N,K] += dy[M,N]ᵀ·x[M,K].
// Written generically as out[I,J] (=/+=) Σ_r A(i,r)·B(r,j).
//
// gemm_bf16_wt / gemm_bf16_wn (bf16 weights, tensor cores): A is the f32
// activation [I,R] (row stride R), B the bf16 weight, stored [J,R] ("wt",
// MatMul) or [R,J] ("wn", MatMulNN). Each f32 activation is split exactly
// into three bf16 terms (hi + mid + lo, 8 significant bits each, so their
// sum is the f32 value; bf16 has f32's exponent range), and each term is
// multiplied on the tensor cores by mma.sync.m16n8k16 (bf16 products are
// exact in f32) with f32 accumulation: the result matches an f32 GEMM, as
// the conformance tolerance (MatMul: atol 2e-6, rtol 2e-5) requires, at 3×
// the mma count of a plain bf16 GEMM. Launch: block 128 threads = 4 warps,
// block tile 32(I) × 64(J), reduce tile 32; warp w computes rows
// 16·(w%2).., columns 32·(w/2).. as four n8 tiles. Grid (ceil(J/64),
// ceil(I/32)). Shared memory 10 KB (static).
//
// gemm_f32 (f32 and f16 weights, and MatMulTN): CUDA-core FMA with general
// strides, A(i,r) = a[i·sai + r·sar], B(r,j) = b[r·sbr + j·sbj], b of dtype
// bdt; block 256 threads = 16×16, block tile 64×64, reduce tile 16, each
// thread a 4×4 register tile. Grid (ceil(J/64), ceil(I/64)). Shared 8 KB.
//
// Assumptions: I, J, R ≥ 1 and < 2^31 elements per operand; out is not
// aliased with an input. Every output element is reduced in one thread in
// r order: no atomics, results are deterministic.
// Checked against: kernels/ref through kerneltest.MatMul/MatMulNN/MatMulTN
// on the SIMT host build (mma fragments emulated per the PTX ISA tables).
#include "common.cuh"

namespace matmul_impl {

constexpr int BM = 32, BN = 64, BK = 32, PAD = 8;

template <bool WT>
__device__ __forceinline__ void gemm_bf16(float* out, const float* a, const uint16_t* w, int I, int J, int R,
                                          int accumulate) {
  __shared__ uint16_t As[3][BM][BK + PAD];  // hi, mid, lo terms of the A tile
  __shared__ uint16_t Bs[BN][BK + PAD];     // B tile, r contiguous
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;
  const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
  const int wm = (warp % 2) * 16, wn = (warp / 2) * 32;
  float acc[4][4] = {};
  for (int r0 = 0; r0 < R; r0 += BK) {
    for (int e = tid; e < BM * BK; e += 128) {
      int ii = e / BK, rr = e % BK;
      int i = i0 + ii, r = r0 + rr;
      float v = (i < I && r < R) ? a[long(i) * R + r] : 0.f;
      split3(v, As[0][ii][rr], As[1][ii][rr], As[2][ii][rr]);
    }
    for (int e = tid; e < BN * BK; e += 128) {
      int jj, rr;
      if (WT) {
        jj = e / BK, rr = e % BK;  // w is [J,R]: r contiguous
      } else {
        rr = e / BN, jj = e % BN;  // w is [R,J]: j contiguous
      }
      int j = j0 + jj, r = r0 + rr;
      uint16_t v = 0;
      if (j < J && r < R) v = WT ? w[long(j) * R + r] : w[long(r) * J + j];
      Bs[jj][rr] = v;
    }
    __syncthreads();
    for (int k0 = 0; k0 < BK; k0 += 16) {
      uint32_t bf[4][2];
      for (int n = 0; n < 4; n++) {
        const uint16_t* col = &Bs[wn + 8 * n + g][k0 + 2 * t];
        bf[n][0] = pack_bf16(col[0], col[1]);
        bf[n][1] = pack_bf16(col[8], col[9]);
      }
      for (int s = 2; s >= 0; s--) {  // smallest terms first
        const uint16_t* r_lo = &As[s][wm + g][k0 + 2 * t];
        const uint16_t* r_hi = &As[s][wm + g + 8][k0 + 2 * t];
        uint32_t af[4] = {pack_bf16(r_lo[0], r_lo[1]), pack_bf16(r_hi[0], r_hi[1]), pack_bf16(r_lo[8], r_lo[9]),
                          pack_bf16(r_hi[8], r_hi[9])};
        for (int n = 0; n < 4; n++) mma_bf16_16816(acc[n], af, bf[n]);
      }
    }
    __syncthreads();
  }
  for (int n = 0; n < 4; n++) {
    for (int q = 0; q < 4; q++) {
      int i = i0 + wm + g + (q >= 2 ? 8 : 0);
      int j = j0 + wn + 8 * n + 2 * t + (q & 1);
      if (i < I && j < J) {
        float* o = &out[long(i) * J + j];
        *o = accumulate ? *o + acc[n][q] : acc[n][q];
      }
    }
  }
}

constexpr int FT = 64, FK = 16;

__device__ __forceinline__ void gemm_f32_body(float* out, const float* a, long sai, long sar, const void* b, int bdt,
                                         long sbr, long sbj, int I, int J, int R, int accumulate) {
  __shared__ float As[FK][FT + 4];
  __shared__ float Bs[FK][FT + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int i0 = blockIdx.y * FT, j0 = blockIdx.x * FT;
  float acc[4][4] = {};
  for (int r0 = 0; r0 < R; r0 += FK) {
    for (int e = threadIdx.x; e < FT * FK; e += 256) {
      int ii = e % FT, rr = e / FT;
      int i = i0 + ii, r = r0 + rr;
      As[rr][ii] = (i < I && r < R) ? a[i * sai + r * sar] : 0.f;
      int j = j0 + ii;
      Bs[rr][ii] = (j < J && r < R) ? load_w(b, bdt, r * sbr + j * sbj) : 0.f;
    }
    __syncthreads();
    for (int rr = 0; rr < FK; rr++) {
      float av[4], bv[4];
      for (int q = 0; q < 4; q++) av[q] = As[rr][ty + 16 * q];
      for (int q = 0; q < 4; q++) bv[q] = Bs[rr][tx + 16 * q];
      for (int p = 0; p < 4; p++)
        for (int q = 0; q < 4; q++) acc[p][q] = fmaf(av[p], bv[q], acc[p][q]);
    }
    __syncthreads();
  }
  for (int p = 0; p < 4; p++) {
    for (int q = 0; q < 4; q++) {
      int i = i0 + ty + 16 * p, j = j0 + tx + 16 * q;
      if (i < I && j < J) {
        float* o = &out[long(i) * J + j];
        *o = accumulate ? *o + acc[p][q] : acc[p][q];
      }
    }
  }
}

}  // namespace matmul_impl
using namespace matmul_impl;

// out[I,J] (=/+=) a[I,R] · wᵀ, w bf16 [J,R] (MatMul).
KERNEL void __launch_bounds__(128) gemm_bf16_wt(float* out, const float* a, const uint16_t* w, int I, int J, int R,
                                                int accumulate) {
  gemm_bf16<true>(out, a, w, I, J, R, accumulate);
}

// out[I,J] (=/+=) a[I,R] · w, w bf16 [R,J] (MatMulNN).
KERNEL void __launch_bounds__(128) gemm_bf16_wn(float* out, const float* a, const uint16_t* w, int I, int J, int R,
                                                int accumulate) {
  gemm_bf16<false>(out, a, w, I, J, R, accumulate);
}

// out[I,J] (=/+=) Σ_r a[i·sai + r·sar] · b[r·sbr + j·sbj], b of dtype bdt.
KERNEL void __launch_bounds__(256) gemm_f32(float* out, const float* a, long sai, long sar, const void* b, int bdt,
                                            long sbr, long sbj, int I, int J, int R, int accumulate) {
  gemm_f32_body(out, a, sai, sar, b, bdt, sbr, sbj, I, J, R, accumulate);
}
