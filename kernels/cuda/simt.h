// simt.h: a SIMT host shim that compiles this package's CUDA kernels as
// ordinary C++17 and runs them on the CPU, so that the conformance suite
// tests their indexing, tiling, masking and reductions on machines without
// a GPU (the `cudahost` build tag). Under nvcc (__CUDACC__) it is empty.
//
// Model. A launch runs the grid's blocks one after another on a few worker
// OS threads (one block per worker at a time). Inside a block every CUDA
// thread is a fiber (ucontext) with its own stack, scheduled cooperatively
// round-robin on the worker:
//   - threadIdx/blockIdx/blockDim/gridDim read the running fiber's state;
//   - __syncthreads() is a real barrier: a fiber waits until every live
//     thread of its block has arrived (threads that returned count as
//     arrived, as on sm_70+);
//   - __shared__ is `static thread_local`: one copy per worker thread, which
//     runs one block at a time, so it is per-block storage (uninitialised on
//     the GPU; here it keeps the previous block's values, so a kernel that
//     reads shared memory before writing it is not caught);
//   - warps are lockstep groups of 32 consecutive linear thread ids: every
//     shuffle, vote, __syncwarp and mma.sync is a warp collective in which
//     each lane deposits its operand, waits for all live lanes of the warp,
//     then reads. A mask other than the warp's live lanes, a source lane that
//     does not exist or has exited, or lanes that diverge around a
//     collective are reported as launch errors (deadlock detection);
//   - mma.sync.m16n8k16 (bf16 inputs, f32 accumulate) is emulated per the
//     PTX ISA fragment layout tables ("Matrix Fragments for mma.m16n8k16
//     with floating point type"), so a kernel that places its fragments
//     wrongly produces wrong numbers here, and with the tensor cores'
//     arithmetic (tc_dot below: one truncating multi-operand sum per
//     element, rounded toward zero), which reproduced the H200's outputs
//     bit for bit on the reduction it failed (TestTensorCoreModelMatchesH200);
//   - ldmatrix (.x1/.x2/.x4, .trans) per the PTX ISA's table, as a warp
//     collective that reads shared memory when the whole warp has arrived;
//   - cp.async with commit/wait groups and zero-fill, completed only at
//     the wait that covers it (see cp_async), and dynamic shared memory
//     (extern __shared__: DYNAMIC_SHARED in common.cuh), poisoned with
//     0xff bytes at the start of every block.
//
// What it cannot catch:
//   - memory-model races: fibers switch only at collectives, so a missing
//     __syncthreads between a shared-memory write and another thread's read
//     is caught only when the two sit on different sides of a barrier the
//     test exercises; global-memory races between blocks are not seen;
//   - bank conflicts, coalescing, occupancy, register spills (ptxas -v
//     checks spills), or timing of any kind;
//   - tensor-core numerics beyond the model: its alignment width and
//     grouping were fitted to one H200 run, not derived from every case
//     the hardware has (subnormals, overflow, ties); device math (expf,
//     __expf, rsqrtf) is the host libm's, which is more accurate than the
//     GPU's;
//   - warp-divergence hazards that are legal here but undefined on the GPU
//     beyond the mask checks above, and independent thread scheduling.
//
// Written for this project from the CUDA programming guide and the PTX ISA;
// no code from other host-CUDA runtimes.
#pragma once

#if !defined(__CUDACC__)

#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace simt {

// Context switching between fibers. On x86-64 a minimal switch of the
// callee-saved registers (plus MXCSR and the x87 control word) avoids
// ucontext's signal-mask system call on every switch; other targets use
// ucontext.
#if defined(__x86_64__)
extern "C" void simt_switch(void** save_sp, void* to_sp);
asm(R"(
.text
.globl simt_switch
.type simt_switch,@function
simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size simt_switch, .-simt_switch
.section .note.GNU-stack,"",@progbits
.text
)");

struct Context {
  void* sp = nullptr;
};
inline void switch_to(Context& from, Context& to) { simt_switch(&from.sp, to.sp); }
// make_context prepares ctx to start entry on stack [stack, stack+size).
inline void make_context(Context& ctx, char* stack, size_t size, void (*entry)()) {
  uintptr_t top = (uintptr_t(stack) + size) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                              // entry's (never used) return address
  *--sp = reinterpret_cast<void*>(entry);      // simt_switch returns here
  for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  --sp;
  uint32_t mxcsr = 0x1f80;
  uint16_t fpucw = 0x037f;
  memcpy(reinterpret_cast<char*>(sp), &mxcsr, 4);
  memcpy(reinterpret_cast<char*>(sp) + 4, &fpucw, 2);
  ctx.sp = sp;
}
#else
struct Context {
  ucontext_t uc;
};
inline void switch_to(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
inline void make_context(Context& ctx, char* stack, size_t size, void (*entry)()) {
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack;
  ctx.uc.uc_stack.ss_size = size;
  ctx.uc.uc_link = nullptr;
  makecontext(&ctx.uc, entry, 0);
}
#endif

constexpr int kWarp = 32;
constexpr size_t kStack = 128 * 1024;  // per CUDA thread
constexpr int kMaxThreads = 1024;
constexpr size_t kMaxDynamicShared = 227 * 1024;  // sm_90's opt-in maximum per block
constexpr int kSlotBytes = 48;  // largest per-lane operand of a warp collective (mma A+B+C: 40 B)

// Warp is the state of one warp's collectives.
struct Warp {
  int live = 0;            // lanes that have not returned
  uint32_t live_mask = 0;  // bit l set while lane l is live
  int arrived = 0;
  unsigned gen = 0;
  // Two operand buffers, alternated per collective: a lane writes buffer p,
  // waits, reads buffer p; it can only write buffer p again after the next
  // collective's barrier, which every lane reaches after its read.
  alignas(16) unsigned char slots[2][kWarp][kSlotBytes];
  float mma_d[2][kWarp][4];  // mma.sync results per lane, same parity as slots
  uint32_t ldm[2][kWarp][4];  // ldmatrix results per lane, same parity as slots
};

// AsyncCopy is one cp.async a thread issued and has not completed yet.
struct AsyncCopy {
  void* dst;
  const void* src;
  int bytes, src_bytes;  // src_bytes < bytes: the rest is zero-filled
};

// Fiber is one CUDA thread.
struct Fiber {
  Context ctx;
  char* stack = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  bool done = false;
  unsigned collectives = 0;  // warp collectives executed, for buffer parity
  std::vector<AsyncCopy> copies;  // issued cp.async not yet completed, oldest first
  std::vector<size_t> groups;     // copies.size() at each commit_group not yet waited for
};

// StackPool keeps fiber stacks across launches (a launch's worker threads
// are short-lived; allocating 1024 stacks per launch costs system calls).
struct StackPool {
  std::mutex mu;
  std::vector<char*> free_stacks;
  char* get() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free_stacks.empty()) {
        char* s = free_stacks.back();
        free_stacks.pop_back();
        return s;
      }
    }
    return static_cast<char*>(malloc(kStack));
  }
  void put(char* s) {
    std::lock_guard<std::mutex> lock(mu);
    free_stacks.push_back(s);
  }
};

inline StackPool& stack_pool() {
  static StackPool pool;
  return pool;
}

// Block is one worker thread's running block.
struct Block {
  dim3 grid, block;
  uint3 bidx{0, 0, 0};
  int n = 0;
  int current = 0;
  Context sched;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  int bar_live = 0, bar_arrived = 0;
  unsigned bar_gen = 0;
  unsigned long progress = 0;
  const std::function<void()>* body = nullptr;
  std::string error;
  bool aborted = false;
  std::vector<char*> stacks;  // reused across blocks and launches of this worker
  unsigned char* dyn = nullptr;  // the block's dynamic shared memory (extern __shared__)
  size_t dyn_bytes = 0;

  ~Block() {
    for (char* s : stacks) stack_pool().put(s);
    free(dyn);
  }
};

inline thread_local Block* tls_block = nullptr;

inline Block& cur() { return *tls_block; }
inline Fiber& me() { return cur().fibers[cur().current]; }

// fail records the first error of the block and stops the block: the
// running fiber switches back to the scheduler and is never resumed.
inline void fail(const std::string& msg) {
  Block& b = cur();
  if (b.error.empty()) {
    char where[160];
    snprintf(where, sizeof where, " (block (%u,%u,%u) thread (%u,%u,%u))", b.bidx.x, b.bidx.y, b.bidx.z,
             me().tid.x, me().tid.y, me().tid.z);
    b.error = msg + where;
  }
  b.aborted = true;
  switch_to(me().ctx, b.sched);
}

inline void yield() {
  Block& b = cur();
  switch_to(b.fibers[b.current].ctx, b.sched);
}

inline void block_barrier() {
  Block& b = cur();
  unsigned g = b.bar_gen;
  b.progress++;
  if (++b.bar_arrived >= b.bar_live) {
    b.bar_arrived = 0;
    b.bar_gen++;
    return;
  }
  while (b.bar_gen == g) yield();
}

inline int lane_id() { return me().linear % kWarp; }
inline Warp& my_warp() { return cur().warps[me().linear / kWarp]; }

// warp_barrier waits for every live lane of w; the last lane to arrive
// runs complete (if any) before releasing the others.
inline void warp_barrier(Warp& w, void (*complete)(Warp&, int) = nullptr, int parity = 0) {
  unsigned g = w.gen;
  cur().progress++;
  if (++w.arrived >= w.live) {
    if (complete) complete(w, parity);
    w.arrived = 0;
    w.gen++;
    return;
  }
  while (w.gen == g) yield();
}

// collective runs one warp collective: each lane writes n bytes of its
// operand, waits for every live lane, and gets the warp's operand table.
inline const unsigned char (*collective(uint32_t mask, const void* operand, size_t n, const char* op,
                                        void (*complete)(Warp&, int) = nullptr, int* parity = nullptr))[kSlotBytes] {
  Warp& w = my_warp();
  if (mask != w.live_mask) {
    char msg[160];
    snprintf(msg, sizeof msg, "simt: %s with mask %#x but the warp's live lanes are %#x", op, mask, w.live_mask);
    fail(msg);
  }
  Fiber& f = me();
  int p = f.collectives++ & 1;
  memcpy(w.slots[p][lane_id()], operand, n);
  if (parity) *parity = p;
  warp_barrier(w, complete, p);
  return w.slots[p];
}

// check_src fails unless lane src took part in the collective (mask is the
// collective's mask, equal to the warp's live lanes when it began).
inline void check_src(uint32_t mask, int src, const char* op) {
  if (src < 0 || src >= kWarp || !(mask >> src & 1)) {
    char msg[120];
    snprintf(msg, sizeof msg, "simt: %s reads lane %d, which is not in the mask %#x", op, src, mask);
    fail(msg);
  }
}

template <class T>
T shfl_from(uint32_t mask, T v, int src_of_me, const char* op) {
  static_assert(sizeof(T) <= kSlotBytes, "operand too large");
  check_src(mask, src_of_me, op);
  auto slots = collective(mask, &v, sizeof v, op);
  T r;
  memcpy(&r, slots[src_of_me], sizeof r);
  return r;
}

inline void fiber_main() {
  Block& b = cur();
  (*b.body)();
  Fiber& f = me();
  f.done = true;
  b.progress++;
  // A returned thread counts as arrived at block barriers and leaves its
  // warp's collectives.
  b.bar_live--;
  if (b.bar_arrived > 0 && b.bar_arrived >= b.bar_live) {
    b.bar_arrived = 0;
    b.bar_gen++;
  }
  Warp& w = b.warps[f.linear / kWarp];
  w.live--;
  w.live_mask &= ~(1u << (f.linear % kWarp));
  if (w.arrived > 0 && w.arrived >= w.live) {
    w.arrived = 0;
    w.gen++;
  }
  switch_to(f.ctx, b.sched);
}

// run_block runs every thread of block bidx to completion; it returns false
// (with b.error set) on a deadlock or a reported misuse.
inline bool run_block(Block& b, uint3 bidx) {
  b.bidx = bidx;
  b.aborted = false;
  b.error.clear();
  b.progress = 0;
  b.n = int(b.block.x * b.block.y * b.block.z);
  b.fibers.assign(b.n, Fiber{});
  int nw = (b.n + kWarp - 1) / kWarp;
  b.warps.assign(nw, Warp{});
  while (int(b.stacks.size()) < b.n) {
    char* s = stack_pool().get();
    if (!s) {
      b.error = "simt: out of memory for fiber stacks";
      return false;
    }
    b.stacks.push_back(s);
  }
  for (int i = 0; i < b.n; i++) {
    Fiber& f = b.fibers[i];
    f.linear = i;
    f.tid = uint3{unsigned(i) % b.block.x, unsigned(i) / b.block.x % b.block.y, unsigned(i) / (b.block.x * b.block.y)};
    f.stack = b.stacks[i];
    make_context(f.ctx, f.stack, kStack, fiber_main);
    Warp& w = b.warps[i / kWarp];
    w.live++;
    w.live_mask |= 1u << (i % kWarp);
  }
  b.bar_live = b.n;
  b.bar_arrived = 0;
  int live = b.n;
  while (live > 0) {
    unsigned long before = b.progress;
    for (int i = 0; i < b.n; i++) {
      if (b.fibers[i].done) continue;
      b.current = i;
      switch_to(b.sched, b.fibers[i].ctx);
      if (b.aborted) return false;
      if (b.fibers[i].done) live--;
    }
    if (live > 0 && b.progress == before) {
      int waiting_block = b.bar_arrived;
      char msg[200];
      snprintf(msg, sizeof msg,
               "simt: deadlock in block (%u,%u,%u): %d live threads, %d waiting at __syncthreads, the rest at "
               "warp collectives (divergent lanes?)",
               bidx.x, bidx.y, bidx.z, live, waiting_block);
      b.error = msg;
      return false;
    }
  }
  return true;
}

// kPoison fills dynamic shared memory at the start of every block: on the
// GPU it starts with whatever was there, so a kernel that reads it before
// writing it gets garbage (here: NaN floats, 0xffff bf16 NaNs).
constexpr unsigned char kPoison = 0xff;

// launch runs body as a kernel over grid × block on up to `workers` OS
// threads, with smem bytes of dynamic shared memory per block, and returns
// "" or the first error.
inline std::string launch(dim3 grid, dim3 block, int workers, const std::function<void()>& body, size_t smem = 0) {
  long nthreads = long(block.x) * block.y * block.z;
  if (nthreads < 1 || nthreads > kMaxThreads) return "simt: block of " + std::to_string(nthreads) + " threads";
  if (smem > kMaxDynamicShared) return "simt: " + std::to_string(smem) + " bytes of dynamic shared memory";
  long nblocks = long(grid.x) * grid.y * grid.z;
  if (nblocks == 0) return "";
  std::atomic<long> next{0};
  std::mutex mu;
  std::string first;
  auto work = [&] {
    Block b;
    b.grid = grid;
    b.block = block;
    b.body = &body;
    if (smem > 0) {
      b.dyn = static_cast<unsigned char*>(aligned_alloc(16, (smem + 15) / 16 * 16));
      b.dyn_bytes = smem;
    }
    tls_block = &b;
    for (;;) {
      long i = next.fetch_add(1);
      if (i >= nblocks) break;
      uint3 bidx{unsigned(i % grid.x), unsigned(i / grid.x % grid.y), unsigned(i / (long(grid.x) * grid.y))};
      if (b.dyn) memset(b.dyn, kPoison, b.dyn_bytes);
      if (!run_block(b, bidx)) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.empty()) first = b.error;
        next.store(nblocks);
        break;
      }
    }
    tls_block = nullptr;
  };
  int nw = int(std::max<long>(1, std::min<long>(workers, nblocks)));
  std::vector<std::thread> pool;
  for (int i = 1; i < nw; i++) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return first;
}

// Fragment layouts of mma.m16n8k16 with 16-bit A/B and f32 C/D (PTX ISA),
// with groupID g = lane>>2 and threadID_in_group t = lane%4:
//   A (16×16, row): a_i, i = 0..7, in registers a[i/2] (low half = even i):
//       row = g + 8·((i>>1)&1), col = 2t + (i&1) + 8·(i>=4)
//   B (16×8, col):  b_i, i = 0..3, in registers b[i/2]:
//       row (k) = 2t + (i&1) + 8·(i>=2), col (n) = g
//   C, D (16×8):    c_i, i = 0..3: row = g + 8·(i>=2), col = 2t + (i&1)
struct MmaFrag {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

inline float bf16_bits_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Tensor-core accumulation model. NVIDIA does not document how the
// tensor cores add; Fasi, Higham, Mikaitis and Pranesh ("Numerical
// behavior of NVIDIA tensor cores", PeerJ CS 7:e330, 2021) measured it on
// V100/T4/A100 and Khattak and Mikaitis ("Accurate models of NVIDIA tensor
// cores", arXiv:2512.07004) extend the models to H100/B200. What they
// agree on, and what this shim does for every element of D = A·B + C:
//   - the products of the bf16 inputs are exact;
//   - the products and c are added as one multi-operand sum: each addend is
//     aligned to the largest exponent E among them and truncated (toward
//     zero) below 2^(E − 23 − kTensorCoreExtraBits); the truncated addends
//     are added exactly;
//   - the sum is rounded to binary32 toward zero (truncated), not to
//     nearest.
// The number of extra alignment bits and how many products form one fused
// group differ between generations. Here they were fitted to the H200:
// with 2 extra bits and the 16 products of one m16n8k16 plus c as one
// group, a chain of 28,488 mma.sync (a reduction over 151,936 terms, which
// the H200 failed on 2026-12-04) reproduces every output that run printed
// bit for bit (TestTensorCoreModelMatchesH200; 1 or 3 bits, or an exact
// sum, do not). The systematic part is what kernels must be designed for:
// every mma truncates the accumulator toward zero, so a long chain of mma
// accumulations drifts toward zero by about half an f32 ulp of the
// accumulator per mma, which a round-to-nearest sum does not show.
// Non-finite operands fall back to the IEEE sum.
constexpr int kTensorCoreExtraBits = 2;

// rz_f32 rounds s toward zero to binary32.
inline float rz_f32(double s) {
  float f = float(s);
  if (std::fabs(double(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
  return f;
}

// tc_dot returns c + Σ p[k] (n exact products) as the tensor-core model
// adds them.
inline float tc_dot(const double* p, int n, float c) {
  double big = std::fabs(double(c));
  bool finite = std::isfinite(c);
  for (int k = 0; k < n; k++) {
    big = std::max(big, std::fabs(p[k]));
    finite = finite && std::isfinite(p[k]);
  }
  if (!finite) {
    double s = c;
    for (int k = 0; k < n; k++) s += p[k];
    return float(s);
  }
  if (big == 0) return c;  // every addend is ±0: keep c's sign
  int e;
  std::frexp(big, &e);  // big = m·2^e, m in [0.5, 1): its leading bit is 2^(e-1)
  double q = std::ldexp(1.0, e - 1 - 23 - kTensorCoreExtraBits);
  // Each addend/q truncated is an integer below 2^(24+extra) in magnitude:
  // the n+1 of them add exactly in double.
  double s = std::trunc(double(c) / q);
  for (int k = 0; k < n; k++) s += std::trunc(p[k] / q);
  return rz_f32(s * q);
}

// mma_complete computes D = A·B + C for the whole warp from the lanes'
// fragments in w.slots[p], into w.mma_d[p] (tc_dot's model); the last lane
// to arrive runs it.
inline void mma_complete(Warp& w, int p) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < kWarp; lane++) {
    MmaFrag f;
    memcpy(&f, w.slots[p][lane], sizeof f);
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 8; i++) {
      int r = g + 8 * ((i >> 1) & 1), k = 2 * t + (i & 1) + 8 * (i >= 4);
      A[r][k] = bf16_bits_to_f32(uint16_t(f.a[i / 2] >> (16 * (i & 1))));
    }
    for (int i = 0; i < 4; i++) {
      int k = 2 * t + (i & 1) + 8 * (i >= 2), n = g;
      B[k][n] = bf16_bits_to_f32(uint16_t(f.b[i / 2] >> (16 * (i & 1))));
    }
  }
  for (int lane = 0; lane < kWarp; lane++) {
    MmaFrag f;
    memcpy(&f, w.slots[p][lane], sizeof f);
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
      int r = g + 8 * (i >= 2), n = 2 * t + (i & 1);
      double prod[16];
      for (int k = 0; k < 16; k++) prod[k] = double(A[r][k]) * double(B[k][n]);
      w.mma_d[p][lane][i] = tc_dot(prod, 16, f.c[i]);
    }
  }
}

// mma_m16n8k16_bf16 is mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// d = A·B + c for the whole warp; this lane passes its fragments and gets
// its four elements of D.
inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  MmaFrag f;
  memcpy(f.a, a, sizeof f.a);
  memcpy(f.b, b, sizeof f.b);
  memcpy(f.c, c, sizeof f.c);
  Warp& w = my_warp();
  if (w.live_mask != 0xffffffffu) fail("simt: mma.sync needs all 32 lanes of the warp");
  int p = 0;
  collective(0xffffffffu, &f, sizeof f, "mma.sync", mma_complete, &p);
  memcpy(d, w.mma_d[p][lane_id()], 4 * sizeof(float));
}

// cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes (sm_80+):
// an asynchronous copy of 4, 8 or 16 bytes (src_bytes < bytes reads only
// src_bytes and zero-fills the rest), both addresses aligned to bytes.
// cp.async.commit_group closes the thread's group of copies issued since
// the last commit; cp.async.wait_group n waits until at most the newest n
// committed groups are pending. Emulated as deferred copies: a copy lands
// only when a wait_group of its thread covers it, the latest the hardware
// may complete it, so a kernel that reads the destination before waiting
// (or before the barrier that publishes other threads' copies), or that
// writes a stage whose copy is still pending, reads or keeps wrong values
// here as it can on the GPU. Copies never committed and waited for are
// dropped at the thread's exit.
inline void cp_async(void* dst, const void* src, int bytes, int src_bytes) {
  if (bytes != 4 && bytes != 8 && bytes != 16) fail("simt: cp.async of " + std::to_string(bytes) + " bytes");
  if (src_bytes < 0 || src_bytes > bytes) fail("simt: cp.async src-size " + std::to_string(src_bytes));
  if (uintptr_t(dst) % bytes != 0 || uintptr_t(src) % bytes != 0) {
    char msg[120];
    snprintf(msg, sizeof msg, "simt: cp.async of %d bytes from %p to %p: misaligned", bytes, src, dst);
    fail(msg);
  }
  me().copies.push_back(AsyncCopy{dst, src, bytes, src_bytes});
}

inline void cp_async_commit() { me().groups.push_back(me().copies.size()); }

inline void cp_async_wait(int n) {
  Fiber& f = me();
  int ng = int(f.groups.size());
  if (ng <= n) return;
  size_t done = f.groups[ng - n - 1];  // copies of every group but the newest n
  for (size_t i = 0; i < done; i++) {
    const AsyncCopy& c = f.copies[i];
    memcpy(c.dst, c.src, c.src_bytes);
    memset(static_cast<char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
  }
  f.copies.erase(f.copies.begin(), f.copies.begin() + done);
  f.groups.erase(f.groups.begin(), f.groups.begin() + (ng - n));
  for (size_t& g : f.groups) g -= done;
}

// dynamic_shared is the running block's extern __shared__ memory.
inline unsigned char* dynamic_shared() { return cur().dyn; }

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: the warp loads
// n ≤ 4 matrices of 8×8 16-bit elements; lanes 8i..8i+7 give the
// addresses of matrix i's rows (16 contiguous bytes each, 16-byte
// aligned; the other lanes' addresses are ignored). Lane l receives in
// register i the elements (row l/4, columns 2(l%4), 2(l%4)+1) of matrix i,
// the lower column in the low half; with .trans those of the transposed
// matrix: (rows 2(l%4), 2(l%4)+1, column l/4). (PTX ISA, "Warp-level
// matrix load instruction: ldmatrix".) The last lane to arrive reads every
// lane's elements, so all see shared memory as it was when the whole warp
// had arrived.
struct LdmSlot {
  const unsigned char* row;
  int n, trans;
};

inline void ldmatrix_complete(Warp& w, int p) {
  LdmSlot op[kWarp];
  for (int l = 0; l < kWarp; l++) memcpy(&op[l], w.slots[p][l], sizeof op[l]);
  for (int l = 1; l < kWarp; l++) {
    if (op[l].n != op[0].n || op[l].trans != op[0].trans) fail("simt: lanes of one ldmatrix disagree on .x or .trans");
  }
  for (int i = 0; i < op[0].n; i++) {
    for (int l = 0; l < kWarp; l++) {
      uint16_t lo, hi;
      if (op[0].trans) {
        memcpy(&lo, op[8 * i + 2 * (l % 4)].row + 2 * (l / 4), 2);
        memcpy(&hi, op[8 * i + 2 * (l % 4) + 1].row + 2 * (l / 4), 2);
      } else {
        memcpy(&lo, op[8 * i + l / 4].row + 4 * (l % 4), 2);
        memcpy(&hi, op[8 * i + l / 4].row + 4 * (l % 4) + 2, 2);
      }
      w.ldm[p][l][i] = uint32_t(lo) | uint32_t(hi) << 16;
    }
  }
}

inline void ldmatrix(uint32_t* r, int n, bool trans, const void* row) {
  Warp& w = my_warp();
  if (w.live_mask != 0xffffffffu) fail("simt: ldmatrix needs all 32 lanes of the warp");
  if (lane_id() < 8 * n && uintptr_t(row) % 16 != 0) {
    char msg[100];
    snprintf(msg, sizeof msg, "simt: ldmatrix row address %p is not 16-byte aligned", row);
    fail(msg);
  }
  LdmSlot op{static_cast<const unsigned char*>(row), n, trans ? 1 : 0};
  int p = 0;
  collective(0xffffffffu, &op, sizeof op, "ldmatrix", ldmatrix_complete, &p);
  for (int i = 0; i < n; i++) r[i] = w.ldm[p][lane_id()][i];
}

}  // namespace simt

#define threadIdx (::simt::me().tid)
#define blockIdx (::simt::cur().bidx)
#define blockDim (::simt::cur().block)
#define gridDim (::simt::cur().grid)
#define warpSize 32

inline void __syncthreads() { simt::block_barrier(); }
inline void __syncwarp(uint32_t mask = 0xffffffffu) {
  uint32_t dummy = 0;
  simt::collective(mask, &dummy, sizeof dummy, "__syncwarp");
}

template <class T>
T __shfl_sync(uint32_t mask, T v, int src, int width = 32) {
  int lane = simt::lane_id();
  return simt::shfl_from(mask, v, (lane & ~(width - 1)) + (src & (width - 1)), "__shfl_sync");
}
template <class T>
T __shfl_xor_sync(uint32_t mask, T v, int lane_mask, int width = 32) {
  int lane = simt::lane_id();
  int src = lane ^ lane_mask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return simt::shfl_from(mask, v, src, "__shfl_xor_sync");
}
template <class T>
T __shfl_down_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  int lane = simt::lane_id();
  int src = lane + int(delta);
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return simt::shfl_from(mask, v, src, "__shfl_down_sync");
}
template <class T>
T __shfl_up_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  int lane = simt::lane_id();
  int src = lane - int(delta);
  if (src < (lane & ~(width - 1))) src = lane;
  return simt::shfl_from(mask, v, src, "__shfl_up_sync");
}
inline uint32_t __ballot_sync(uint32_t mask, int pred) {
  int p = pred != 0;
  auto slots = simt::collective(mask, &p, sizeof p, "__ballot_sync");
  uint32_t r = 0;
  for (int l = 0; l < simt::kWarp; l++) {
    int q;
    memcpy(&q, slots[l], sizeof q);
    if ((mask >> l & 1) && q) r |= 1u << l;
  }
  return r;
}
inline int __any_sync(uint32_t mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(uint32_t mask, int pred) { return __ballot_sync(mask, pred) == mask; }

// atomicCAS on a global int: blocks run on several worker threads at once.
inline int atomicCAS(int* p, int cmp, int val) {
  __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;  // the old value either way
}

// CUDA's global min/max for the arithmetic types.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
// __fmul_rn, __fadd_rn: a product or sum rounded on its own (the host build
// never contracts: no FMA in the baseline x86-64 target it compiles for).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
inline unsigned __float_as_uint(float f) {
  unsigned i;
  memcpy(&i, &f, 4);
  return i;
}
inline float __uint_as_float(unsigned i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline long long __double_as_longlong(double d) {
  long long i;
  memcpy(&i, &d, 8);
  return i;
}

// __nv_bfloat16 is the storage type of bf16 (cuda_bf16.h's name), with its
// two conversions; arithmetic goes through float, as on sm_80+.
struct __nv_bfloat16 {
  uint16_t x;
};
inline float __bfloat162float(__nv_bfloat16 h) { return simt::bf16_bits_to_f32(h.x); }
inline __nv_bfloat16 __float2bfloat16(float f) {  // round to nearest even, NaN kept
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1);
  return __nv_bfloat16{uint16_t(u >> 16)};
}

#endif  // !__CUDACC__
