// matmul.cu: the three GEMMs of kernels.Backend.
//
// Layouts (row-major): MatMul out[M,N] (=/+=) x[M,K]·wᵀ with w [N,K];
// MatMulNN out[M,K] (=/+=) dy[M,N]·w[N,K]; MatMulTN dw[N,K] += dy[M,N]ᵀ·x[M,K].
// Written generically as out[I,J] (=/+=) Σ_r A(i,r)·B(r,j) over R terms.
//
// gemm_bf16_{s,l}_{wt,wn}_x{1,3} (bf16 weights, tensor cores): A is the f32
// activation [I,R] (row stride R), B the bf16 weight, stored [J,R] ("wt",
// MatMul) or [R,J] ("wn", MatMulNN).
//   Precision: x3 ("exact", the default) splits each f32 activation
//   exactly into three bf16 terms (split3 in common.cuh: hi + mid + lo,
//   8 significant bits each) and multiplies each term by the weight on the
//   tensor cores (mma.sync.m16n8k16: bf16 products are exact in f32), so
//   the products are those of an f32 GEMM, as the conformance tolerance
//   (MatMul: atol 2e-6, rtol 2e-5) requires; x1 ("bf16",
//   kernels.MatMulBF16) rounds the activation to bf16 once (nearest even),
//   PyTorch's arithmetic with bf16 activations, at a third of the mma
//   count (MatMul only; its reference is kernels/ref on the rounded x under
//   MatMul's own tolerance: kerneltest.MatMulBF16).
//   Accumulation: the tensor cores add with truncation (simt.h's tc_dot,
//   fitted to the H200: each mma sums its 16 products and c aligned to the
//   largest with 2 extra bits, and rounds the f32 result toward zero), so
//   one long chain of mma on one accumulator drifts toward zero by about
//   half an f32 ulp of the accumulator per mma: a chain over 151,936 terms
//   (28,488 mma in x3) was 2.9e-4 off on the H200. Here a chain covers one
//   chunk of kChunk = 128 reduction terms (r in [128c, 128c + 128)): at most
//   24 mma (x3) or 8 (x1), started from zero; the chunk partials p_c are
//   then added in f32, round to nearest, in chunk order:
//   total = ((0 + p_0) + p_1) + …, and out = total or out + total. Per 16
//   terms an mma's error is at most 2⁻²³ of its result plus 17·2⁻²⁵ of its
//   largest addend, the same order as 16 round-to-nearest FMAs' 16·2⁻²⁴;
//   what differs is the sign: truncation errors add up (linearly in the
//   chain's length), rounding errors mostly cancel. Capping a chain at 24
//   mma caps that bias at 24·2⁻²³ of a chunk's partial sums, and the
//   chunk sums then add like the f32 sums the tolerance table was measured
//   on (for the vocabulary-long reductions of MatMulLong: 1,187
//   round-to-nearest adds). Measured on the host build with the fitted
//   model over the conformance shapes: max abs 5.4e-7 on the two cases the
//   H200 failed (MatMulLong allows 5e-5), 7.8e-7 (MatMul) and 6.0e-7
//   (MatMulNN) on the others (MatMul allows 2e-6 + 2e-5·|want|); x1 is
//   2.4e-7 from the reference on the rounded x.
//   Batch invariance: all of the above is fixed by R alone: the chunks,
//   each chain's order (k ascending in steps of 16, per step the lo, mid,
//   hi terms in that order, each one mma of the same k16 slice), and the
//   order of the chunk sum. Every variant (s or l, any split, any tile
//   position) computes a row's outputs with that same sequence of
//   operations on that row's data, so out[i,:] does not depend on I, on
//   the other rows, or on the variant the shape selects: a token's logits
//   in a decode step (M = 1) equal its logits inside a training forward
//   (M = 4096) bit for bit (kerneltest.MatMulBatchInvariance). That relies
//   on an mma element depending only on its own row of A, column of B and
//   c, which the hardware's per-element dot product does (the GPU suite
//   runs the same check).
//   Variants (plan_gemm.go's gemmBF16Plan picks one by shape; results do
//   not depend on the choice):
//     s: 16(I) × 64(J) tiles, 4 warps each 16 × 16, 6 stages (I ≤ 16:
//        decode, the GEMV: a weight row is read once per 16 rows of x);
//     l: 128 × 128 tiles (x1), 8 warps each 64 × 32; 128 × 64 (x3), 8
//        warps each 32 × 32 (three times the mma per operand byte, and the
//        chain and total accumulators of a 64 × 32 warp tile would not fit
//        255 registers unspilled); 4 stages; 256 threads, one block per SM
//        (__launch_bounds__(256, 1): up to 255 registers).
//   Split-K: blockIdx.z takes chunks [z·per, (z+1)·per) of the reduction
//   (per = ⌈chunks/splits⌉) and, when splits > 1, stores each chunk's
//   partial to ws[chunk][I][J] instead of adding it; gemm_splitk_reduce
//   then adds the chunks in order (and out) with the same f32 adds, so a
//   split changes only where the adds run. plan_gemm.go splits when the
//   tiles alone would leave SMs idle (skinny I, few tiles) and the
//   workspace (chunks · I · J floats) stays under gemmMaxWorkspace.
//   Pipeline (one __syncthreads per k-tile of BK = 32): cp.async (16-byte
//   copies, zero-filled past the edges) brings the f32 A tile and the bf16
//   B tile of k-tile t+STAGES−1 into the ring while the block converts A's
//   tile t+1 into its bf16 term(s) in a double-buffered tile and the warps
//   multiply tile t: ldmatrix.x4 fragments (.trans for the wn weight) from
//   rows padded by 8 elements (the 8 row addresses of an 8×8 matrix fall
//   in 8 different 16-byte bank groups), mma.sync.m16n8k16. Operands whose
//   rows are not 16-byte aligned (R or J not a multiple of 4 or 8
//   elements, or an unaligned base) take plain loads into the same ring.
//   Shared memory (dynamic): TC::kSmem, which the kernel compares with the
//   size it was launched with (plan_gemm.go's gemmBF16Smem; a trap on the
//   GPU, a launch error on the host build): s 44.5 KB (wt x1), 49.5 KB (wt
//   x3), 46.5 KB (wn x3); l 124 KB (wt x1), 144 KB (wt x3), 142 KB (wn x3).
//
// gemm_bf16_{s,l}_multi_x{1,3} (MatMulMany: a layer's Q/K/V or gate/up
// projections of one activation in one launch): the GEMMs of a GemmPart
// array side by side along blockIdx.x, each tile run by the same gemm_tc
// as the wt kernels (so every output element is MatMul's, bit for bit),
// split as one GEMM of their total width; gemm_splitk_reduce_multi adds
// each GEMM's chunk partials in order.
//
// gemm_f32 (f32 and f16 weights, and MatMulTN): CUDA-core FMA with general
// strides, A(i,r) = a[i·sai + r·sar], B(r,j) = b[r·sbr + j·sbj], b of dtype
// bdt; block 256 threads = 16×16, block tile 64×64, reduce tile 16, each
// thread a 4×4 register tile, r ascending (sequential FMA). Grid
// (ceil(J/64), ceil(I/64), splits): block z reduces r in [z·per, (z+1)·per)
// (per a multiple of 16) into out, or into ws[z][I][J] when splits > 1
// (gemm_splitk_reduce adds the parts in z order): MatMulTN's LoRA gradients
// (J = 16 or I = 16, R = tokens) get splits·⌈I/64⌉·⌈J/64⌉ blocks instead
// of 16–48. MatMul and MatMulNN keep splits = 1: a row's result is then
// independent of M (one thread, r ascending), and the two compute the
// same sum (the model's training forward adds a LoRA update u·Bᵀ with
// MatMulNN where inference uses MatMul). Shared 8 KB (static).
//
// gemm_splitk_reduce: s = ((0 + ws[0·n + e]) + ws[1·n + e]) + … in part
// order, then out[e] = s or out[e] + s. Grid-stride, 256 threads.
//
// Assumptions: I, J, R ≥ 1 and < 2^31 elements per operand; out and ws are
// not aliased with an input. No atomics: results are deterministic.
// Checked against: kernels/ref through kerneltest.MatMul, MatMulNN,
// MatMulTN, MatMulBF16 and MatMulBatchInvariance on the SIMT host build
// (ldmatrix, cp.async and the tensor cores' truncating accumulation
// emulated per simt.h), and on the GPU by the gpu-check's kernels stage.
#include "common.cuh"

namespace matmul_impl {

constexpr int kChunk = 128;  // reduction terms per tensor-core chain
constexpr int BK = 32;       // k-tile
constexpr int kChunkTiles = kChunk / BK;
constexpr int PAD = 8;  // bf16 elements of padding per shared-memory row

// f32x4 and u32x2 are 16- and 8-byte vectors for shared-memory moves.
struct __align__(16) f32x4 {
  float v[4];
};
struct __align__(8) u32x2 {
  uint32_t v[2];
};

// TC is one tensor-core GEMM variant: block tile BM×BN, warp tile WM×WN,
// STAGES k-tiles in flight, weight layout WT ([J,R]) or not ([R,J]),
// TERMS bf16 terms per activation (1 or 3).
template <int BM_, int BN_, int WM_, int WN_, int STAGES_, bool WT_, int TERMS_>
class TC {
 public:
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, STAGES = STAGES_, TERMS = TERMS_;
  static constexpr bool WT = WT_;
  static constexpr int WARPS_N = BN / WN, WARPS = (BM / WM) * WARPS_N, THREADS = 32 * WARPS;
  static constexpr int MT = WM / 16, NT = WN / 8;  // m16 and n8 tiles per warp
  static constexpr int ALD = BK + PAD;             // bf16 A tile row stride
  static constexpr int BLD = WT ? BK + PAD : BN + PAD;
  static constexpr int A32_STAGE = BM * BK;                  // floats
  static constexpr int B_STAGE = WT ? BN * BLD : BK * BLD;   // bf16
  static constexpr int ABF = BM * ALD;                       // bf16 per term
  static constexpr int kB = STAGES * A32_STAGE * 4;          // byte offsets
  static constexpr int kAbf = kB + STAGES * B_STAGE * 2;
  static constexpr int kSmem = kAbf + 2 * TERMS * ABF * 2;
  static_assert(STAGES >= 3, "the pipeline waits for tile t+1 with STAGES-3 groups in flight");
  static_assert(NT % 2 == 0, "B fragments load two n8 tiles per ldmatrix.x4");
  static_assert(BM * BK / 4 % THREADS == 0 || THREADS % (BM * BK / 4) == 0, "A chunks per thread");
};

// load_tile brings k-tile kt of A (f32, BM × BK) and B (bf16) into stage
// buffers a32 and bs: 16-byte cp.async where the rows are aligned (avec,
// bvec), zero-filled past I, J and R; plain loads and stores otherwise.
template <class C>
__device__ __forceinline__ void load_tile(float* a32, uint16_t* bs, const float* a, const uint16_t* w, int I, int J,
                                          int R, int i0, int j0, int kt, bool avec, bool bvec) {
  const int tid = threadIdx.x, k0 = kt * BK;
  for (int c = tid; c < C::BM * (BK / 4); c += C::THREADS) {
    const int row = c / (BK / 4), col = c % (BK / 4) * 4;
    const int gi = i0 + row, gk = k0 + col;
    float* dst = a32 + row * BK + col;
    if (avec) {
      const int n = gi < I ? max(0, min(4, R - gk)) : 0;
      cp_async16(dst, n > 0 ? a + long(gi) * R + gk : a, 4 * n);
    } else {
      UNROLL
      for (int e = 0; e < 4; e++) dst[e] = (gi < I && gk + e < R) ? a[long(gi) * R + gk + e] : 0.f;
    }
  }
  if (C::WT) {  // w [J,R]: a tile row is a weight row j, 8 elements of r per chunk
    for (int c = tid; c < C::BN * (BK / 8); c += C::THREADS) {
      const int row = c / (BK / 8), col = c % (BK / 8) * 8;
      const int gj = j0 + row, gk = k0 + col;
      uint16_t* dst = bs + row * C::BLD + col;
      if (bvec) {
        const int n = gj < J ? max(0, min(8, R - gk)) : 0;
        cp_async16(dst, n > 0 ? w + long(gj) * R + gk : w, 2 * n);
      } else {
        for (int e = 0; e < 8; e++) dst[e] = (gj < J && gk + e < R) ? w[long(gj) * R + gk + e] : uint16_t(0);
      }
    }
  } else {  // w [R,J]: a tile row is r, 8 elements of j per chunk
    for (int c = tid; c < BK * (C::BN / 8); c += C::THREADS) {
      const int row = c / (C::BN / 8), col = c % (C::BN / 8) * 8;
      const int gk = k0 + row, gj = j0 + col;
      uint16_t* dst = bs + row * C::BLD + col;
      if (bvec) {
        const int n = gk < R ? max(0, min(8, J - gj)) : 0;
        cp_async16(dst, n > 0 ? w + long(gk) * J + gj : w, 2 * n);
      } else {
        for (int e = 0; e < 8; e++) dst[e] = (gk < R && gj + e < J) ? w[long(gk) * J + gj + e] : uint16_t(0);
      }
    }
  }
}

// convert_tile writes the bf16 term(s) of the f32 A tile a32 into abf:
// term 0 the activation rounded to bf16 (hi), terms 1, 2 (TERMS 3) the
// exact rest as mid and lo.
template <class C>
__device__ __forceinline__ void convert_tile(const float* a32, uint16_t* abf) {
  for (int c = threadIdx.x; c < C::BM * (BK / 4); c += C::THREADS) {
    const int row = c / (BK / 4), col = c % (BK / 4) * 4;
    const f32x4 v = *reinterpret_cast<const f32x4*>(a32 + row * BK + col);
    uint16_t t[3][4];
    UNROLL
    for (int e = 0; e < 4; e++) {
      if (C::TERMS == 3) {
        split3(v.v[e], t[0][e], t[1][e], t[2][e]);
      } else {
        t[0][e] = f32_to_bf16(v.v[e]);
      }
    }
    UNROLL
    for (int s = 0; s < C::TERMS; s++) {
      u32x2 p;
      p.v[0] = pack_bf16(t[s][0], t[s][1]);
      p.v[1] = pack_bf16(t[s][2], t[s][3]);
      *reinterpret_cast<u32x2*>(abf + s * C::ABF + row * C::ALD + col) = p;
    }
  }
}

// compute_tile multiplies the warp's part of one k-tile: per k16 step the
// B fragments once, then for the terms lo, mid, hi (or the one bf16 term)
// every m16 × n8 tile's mma. The order of mma on one accumulator is the
// batch-invariant chain order the file comment states.
template <class C>
__device__ __forceinline__ void compute_tile(const uint16_t* abf, const uint16_t* bs, float (&acc)[C::MT][C::NT][4],
                                             int wm, int wn, int lane) {
  const int q = lane / 8, r = lane % 8;
  UNROLL
  for (int ks = 0; ks < BK; ks += 16) {
    uint32_t bf[C::NT][2];
    UNROLL
    for (int np = 0; np < C::NT / 2; np++) {
      uint32_t t4[4];
      const int n0 = wn * C::WN + np * 16;
      if (C::WT) {
        ldmatrix_x4<false>(t4, bs + (n0 + (q >> 1) * 8 + r) * C::BLD + ks + (q & 1) * 8);
      } else {
        ldmatrix_x4<true>(t4, bs + (ks + (q & 1) * 8 + r) * C::BLD + n0 + (q >> 1) * 8);
      }
      bf[2 * np][0] = t4[0], bf[2 * np][1] = t4[1], bf[2 * np + 1][0] = t4[2], bf[2 * np + 1][1] = t4[3];
    }
    UNROLL
    for (int s = C::TERMS - 1; s >= 0; s--) {
      UNROLL
      for (int mt = 0; mt < C::MT; mt++) {
        uint32_t af[4];
        const int m0 = wm * C::WM + mt * 16;
        ldmatrix_x4<false>(af, abf + s * C::ABF + (m0 + (q & 1) * 8 + r) * C::ALD + ks + (q >> 1) * 8);
        UNROLL
        for (int nt = 0; nt < C::NT; nt++) mma_bf16_16816(acc[mt][nt], af, bf[nt]);
      }
    }
  }
}

// gemm_tc is the body of every gemm_bf16_* kernel (see the file comment):
// the block's tile has its origin at out[i0, j0], where out is
// out_of.get(), read only in the epilogue; blockIdx.z picks its chunks.
template <class C, class Out>
__device__ __forceinline__ void gemm_tc(Out out_of, float* ws, const float* a, const uint16_t* w, int I, int J, int R,
                                        int accumulate, int splits, int i0, int j0) {
  DYNAMIC_SHARED(unsigned char, smem);
  if (dynamic_smem_size() != unsigned(C::kSmem)) launch_error("gemm_bf16: launched with another shared-memory size than TC::kSmem");
  float* a32 = reinterpret_cast<float*>(smem);
  uint16_t* bs = reinterpret_cast<uint16_t*>(smem + C::kB);
  uint16_t* abf = reinterpret_cast<uint16_t*>(smem + C::kAbf);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
  const int nk = (R + BK - 1) / BK, nchunks = (R + kChunk - 1) / kChunk;
  const int per = (nchunks + splits - 1) / splits;
  const int c0 = blockIdx.z * per, c1 = min(nchunks, c0 + per);
  if (c0 >= c1) return;  // the plan gives every z chunks; uniform per block
  const int kt0 = c0 * kChunkTiles, ntile = min(nk, c1 * kChunkTiles) - kt0;
  const bool avec = R % 4 == 0 && (uintptr_t(a) & 15) == 0;
  const bool bvec = (C::WT ? R : J) % 8 == 0 && (uintptr_t(w) & 15) == 0;

  float acc[C::MT][C::NT][4], tot[C::MT][C::NT][4];
  UNROLL
  for (int mt = 0; mt < C::MT; mt++)
    UNROLL
    for (int nt = 0; nt < C::NT; nt++)
      UNROLL
      for (int e = 0; e < 4; e++) acc[mt][nt][e] = 0.f, tot[mt][nt][e] = 0.f;

  UNROLL
  for (int s = 0; s < C::STAGES - 1; s++) {
    if (s < ntile) load_tile<C>(a32 + s * C::A32_STAGE, bs + s * C::B_STAGE, a, w, I, J, R, i0, j0, kt0 + s, avec, bvec);
    cp_async_commit();
  }
  cp_async_wait<C::STAGES - 2>();  // tile 0
  __syncthreads();
  convert_tile<C>(a32, abf);
  for (int it = 0; it < ntile; it++) {
    // Tile it+1 has landed (this thread's copies; the barrier publishes
    // everyone's), compute(it−1) and convert(it) are done everywhere.
    cp_async_wait<C::STAGES - 3>();
    __syncthreads();
    const int nx = it + C::STAGES - 1;
    if (nx < ntile) {
      const int st = nx % C::STAGES;
      load_tile<C>(a32 + st * C::A32_STAGE, bs + st * C::B_STAGE, a, w, I, J, R, i0, j0, kt0 + nx, avec, bvec);
    }
    cp_async_commit();
    if (it + 1 < ntile) convert_tile<C>(a32 + (it + 1) % C::STAGES * C::A32_STAGE, abf + (it + 1) % 2 * C::TERMS * C::ABF);
    compute_tile<C>(abf + it % 2 * C::TERMS * C::ABF, bs + it % C::STAGES * C::B_STAGE, acc, wm, wn, lane);
    const int kt = kt0 + it;
    if ((kt + 1) % kChunkTiles != 0 && it + 1 != ntile) continue;
    // Chunk kt / kChunkTiles is complete: add its partial, or store it.
    const int chunk = kt / kChunkTiles;
    UNROLL
    for (int mt = 0; mt < C::MT; mt++) {
      UNROLL
      for (int nt = 0; nt < C::NT; nt++) {
        UNROLL
        for (int e = 0; e < 4; e++) {
          if (splits == 1) {
            tot[mt][nt][e] += acc[mt][nt][e];
          } else {
            const int i = i0 + wm * C::WM + mt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
            const int j = j0 + wn * C::WN + nt * 8 + 2 * (lane % 4) + (e & 1);
            if (i < I && j < J) ws[(long(chunk) * I + i) * J + j] = acc[mt][nt][e];
          }
          acc[mt][nt][e] = 0.f;
        }
      }
    }
  }
  if (splits != 1) return;
  float* out = out_of.get();
  UNROLL
  for (int mt = 0; mt < C::MT; mt++) {
    UNROLL
    for (int nt = 0; nt < C::NT; nt++) {
      UNROLL
      for (int e = 0; e < 4; e++) {
        const int i = i0 + wm * C::WM + mt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
        const int j = j0 + wn * C::WN + nt * 8 + 2 * (lane % 4) + (e & 1);
        if (i < I && j < J) {
          float* o = &out[long(i) * J + j];
          *o = accumulate ? *o + tot[mt][nt][e] : tot[mt][nt][e];
        }
      }
    }
  }
}

// OutArg is gemm_tc's output as a kernel parameter.
struct OutArg {
  float* p;
  __device__ __forceinline__ float* get() const { return p; }
};

// gemm_grid is gemm_tc for the tile at (blockIdx.y, blockIdx.x).
template <class C>
__device__ __forceinline__ void gemm_grid(float* out, float* ws, const float* a, const uint16_t* w, int I, int J, int R,
                                          int accumulate, int splits) {
  gemm_tc<C>(OutArg{out}, ws, a, w, I, J, R, accumulate, splits, blockIdx.y * C::BM, blockIdx.x * C::BN);
}

// The variants: s (skinny: I ≤ 16, decode) and l (large). s keeps 5
// k-tiles of weights in flight per block (20 KB; up to 4 blocks per SM by
// shared memory): a GEMV is bound by how many bytes are in flight.
template <bool WT, int TERMS>
using TCs = TC<16, 64, 16, 16, 6, WT, TERMS>;
// l's tile is 128 × 128 for x1 (warps 64 × 32) and 128 × 64 for x3
// (warps 32 × 32): x3 does three times the mma per operand byte, and its
// 64 + 64 accumulators (chain and total) of a 64 × 32 warp tile would not
// fit in 255 registers without spills.
template <bool WT, int TERMS>
using TCl = TC<128, TERMS == 1 ? 128 : 64, TERMS == 1 ? 64 : 32, 32, 4, WT, TERMS>;

constexpr int FT = 64, FK = 16;

__device__ __forceinline__ void gemm_f32_body(float* out, float* ws, const float* a, long sai, long sar, const void* b,
                                              int bdt, long sbr, long sbj, int I, int J, int R, int accumulate,
                                              int splits) {
  __shared__ float As[FK][FT + 4];
  __shared__ float Bs[FK][FT + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int i0 = blockIdx.y * FT, j0 = blockIdx.x * FT;
  const int per = ((R + FK - 1) / FK + splits - 1) / splits * FK;  // whole FK steps, as plan.go splits them
  const int r_lo = blockIdx.z * per, r_hi = min(R, r_lo + per);
  float acc[4][4] = {};
  for (int r0 = r_lo; r0 < r_hi; r0 += FK) {
    for (int e = threadIdx.x; e < FT * FK; e += 256) {
      int ii = e % FT, rr = e / FT;
      int i = i0 + ii, r = r0 + rr;
      As[rr][ii] = (i < I && r < r_hi) ? a[i * sai + r * sar] : 0.f;
      int j = j0 + ii;
      Bs[rr][ii] = (j < J && r < r_hi) ? load_w(b, bdt, r * sbr + j * sbj) : 0.f;
    }
    __syncthreads();
    UNROLL
    for (int rr = 0; rr < FK; rr++) {
      float av[4], bv[4];
      UNROLL
      for (int q = 0; q < 4; q++) av[q] = As[rr][ty + 16 * q];
      UNROLL
      for (int q = 0; q < 4; q++) bv[q] = Bs[rr][tx + 16 * q];
      UNROLL
      for (int p = 0; p < 4; p++)
        UNROLL
        for (int q = 0; q < 4; q++) acc[p][q] = fmaf(av[p], bv[q], acc[p][q]);
    }
    __syncthreads();
  }
  UNROLL
  for (int p = 0; p < 4; p++) {
    UNROLL
    for (int q = 0; q < 4; q++) {
      int i = i0 + ty + 16 * p, j = j0 + tx + 16 * q;
      if (i < I && j < J) {
        if (splits > 1) {
          ws[(long(blockIdx.z) * I + i) * J + j] = acc[p][q];
        } else {
          float* o = &out[long(i) * J + j];
          *o = accumulate ? *o + acc[p][q] : acc[p][q];
        }
      }
    }
  }
}

}  // namespace matmul_impl
using namespace matmul_impl;

// out[I,J] (=/+=) a[I,R] · wᵀ, w bf16 [J,R] (MatMul), one bf16 term (x1)
// or three (x3), I ≤ 16 (s) or any I (l); ws: chunk partials when splits > 1.
KERNEL void __launch_bounds__(128) gemm_bf16_s_wt_x1(float* out, float* ws, const float* a, const uint16_t* w, int I,
                                                     int J, int R, int accumulate, int splits) {
  gemm_grid<TCs<true, 1>>(out, ws, a, w, I, J, R, accumulate, splits);
}
KERNEL void __launch_bounds__(128) gemm_bf16_s_wt_x3(float* out, float* ws, const float* a, const uint16_t* w, int I,
                                                     int J, int R, int accumulate, int splits) {
  gemm_grid<TCs<true, 3>>(out, ws, a, w, I, J, R, accumulate, splits);
}
KERNEL void __launch_bounds__(256, 1) gemm_bf16_l_wt_x1(float* out, float* ws, const float* a, const uint16_t* w,
                                                        int I, int J, int R, int accumulate, int splits) {
  gemm_grid<TCl<true, 1>>(out, ws, a, w, I, J, R, accumulate, splits);
}
KERNEL void __launch_bounds__(256, 1) gemm_bf16_l_wt_x3(float* out, float* ws, const float* a, const uint16_t* w,
                                                        int I, int J, int R, int accumulate, int splits) {
  gemm_grid<TCl<true, 3>>(out, ws, a, w, I, J, R, accumulate, splits);
}

// out[I,J] (=/+=) a[I,R] · w, w bf16 [R,J] (MatMulNN), exact (x3).
KERNEL void __launch_bounds__(128) gemm_bf16_s_wn_x3(float* out, float* ws, const float* a, const uint16_t* w, int I,
                                                     int J, int R, int accumulate, int splits) {
  gemm_grid<TCs<false, 3>>(out, ws, a, w, I, J, R, accumulate, splits);
}
KERNEL void __launch_bounds__(256, 1) gemm_bf16_l_wn_x3(float* out, float* ws, const float* a, const uint16_t* w,
                                                        int I, int J, int R, int accumulate, int splits) {
  gemm_grid<TCl<false, 3>>(out, ws, a, w, I, J, R, accumulate, splits);
}

// GemmPart is one GEMM of a gemm_bf16_*_multi launch (MatMulMany):
// out[I,J] = a[I,R]·wᵀ with w bf16 [J,R] (a, I and R shared by the
// launch), computed by blockIdx.x in [tile0, tile0 + ⌈J/BN⌉); ws holds its
// chunk partials ([chunk][I][J]) when the launch splits.
struct GemmPart {
  float* out;
  float* ws;
  const uint16_t* w;
  long J, tile0;
};

// OutPart is gemm_tc's output as part q's, read from global memory in the
// epilogue (held in a register through the main loop, ptxas spills it).
struct OutPart {
  const GemmPart* parts;
  int q;
  __device__ __forceinline__ float* get() const { return parts[q].out; }
};

// gemm_multi runs the GEMM of parts[0..n) whose tiles hold blockIdx.x
// (tile0 ascending), exactly as gemm_tc runs a single one.
template <class C>
__device__ __forceinline__ void gemm_multi(const GemmPart* parts, int n, const float* a, int I, int R, int splits) {
  int q = 0;
  for (int p = 1; p < n; p++) {
    if (long(blockIdx.x) >= parts[p].tile0) q = p;
  }
  const GemmPart* g = parts + q;
  gemm_tc<C>(OutPart{parts, q}, g->ws, a, g->w, I, int(g->J), R, 0, splits, blockIdx.y * C::BM,
             int(blockIdx.x - g->tile0) * C::BN);
}

// outs[p][I,J_p] = a[I,R]·w_pᵀ for the n GEMMs of parts (MatMulMany), one
// bf16 term (x1) or three (x3), I ≤ 16 (s) or any I (l), in one launch:
// every output element is computed as gemm_bf16_*_wt_* computes it.
KERNEL void __launch_bounds__(128) gemm_bf16_s_multi_x1(const GemmPart* parts, int n, const float* a, int I, int R,
                                                        int splits) {
  gemm_multi<TCs<true, 1>>(parts, n, a, I, R, splits);
}
KERNEL void __launch_bounds__(128) gemm_bf16_s_multi_x3(const GemmPart* parts, int n, const float* a, int I, int R,
                                                        int splits) {
  gemm_multi<TCs<true, 3>>(parts, n, a, I, R, splits);
}
KERNEL void __launch_bounds__(256, 1) gemm_bf16_l_multi_x1(const GemmPart* parts, int n, const float* a, int I, int R,
                                                           int splits) {
  gemm_multi<TCl<true, 1>>(parts, n, a, I, R, splits);
}
KERNEL void __launch_bounds__(256, 1) gemm_bf16_l_multi_x3(const GemmPart* parts, int n, const float* a, int I, int R,
                                                           int splits) {
  gemm_multi<TCl<true, 3>>(parts, n, a, I, R, splits);
}

// out[I,J] (=/+=) Σ_r a[i·sai + r·sar] · b[r·sbr + j·sbj], b of dtype bdt;
// ws: per-split partials when splits > 1.
KERNEL void __launch_bounds__(256) gemm_f32(float* out, float* ws, const float* a, long sai, long sar, const void* b,
                                            int bdt, long sbr, long sbj, int I, int J, int R, int accumulate,
                                            int splits) {
  gemm_f32_body(out, ws, a, sai, sar, b, bdt, sbr, sbj, I, J, R, accumulate, splits);
}

// For each GEMM of parts[0..n): out[e] = Σ_c ws[c·I·J + e] for e < I·J,
// c ascending over chunks partials (a split gemm_bf16_*_multi launch).
KERNEL void __launch_bounds__(256) gemm_splitk_reduce_multi(const GemmPart* parts, int n, int I, int chunks) {
  long total = 0;
  for (int p = 0; p < n; p++) total += long(I) * parts[p].J;
  for (long e = blockIdx.x * 256L + threadIdx.x; e < total; e += long(gridDim.x) * 256) {
    long off = e;
    int q = 0;
    while (off >= long(I) * parts[q].J) off -= long(I) * parts[q].J, q++;
    const long m = long(I) * parts[q].J;
    float s = 0.f;
    for (int c = 0; c < chunks; c++) s += parts[q].ws[long(c) * m + off];
    parts[q].out[off] = s;
  }
}

// out[e] (=/+=) Σ_p ws[p·n + e] for e < n, p ascending.
KERNEL void __launch_bounds__(256) gemm_splitk_reduce(float* out, const float* ws, long n, int parts, int accumulate) {
  for (long e = blockIdx.x * 256L + threadIdx.x; e < n; e += long(gridDim.x) * 256) {
    float s = 0.f;
    for (int p = 0; p < parts; p++) s += ws[long(p) * n + e];
    out[e] = accumulate ? out[e] + s : s;
  }
}
