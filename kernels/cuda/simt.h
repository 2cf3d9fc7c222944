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
//   - mma.sync.m16n8k16 (bf16 inputs, f32 accumulate) is emulated exactly
//     per the PTX ISA fragment layout tables ("Matrix Fragments for
//     mma.m16n8k16 with floating point type"), so a kernel that places its
//     fragments wrongly produces wrong numbers here.
//
// What it cannot catch:
//   - memory-model races: fibers switch only at collectives, so a missing
//     __syncthreads between a shared-memory write and another thread's read
//     is caught only when the two sit on different sides of a barrier the
//     test exercises; global-memory races between blocks are not seen;
//   - bank conflicts, coalescing, occupancy, register spills (ptxas -v
//     checks spills), or timing of any kind;
//   - tensor-core numerics: products of bf16 are exact in both, but the
//     hardware's f32 accumulation order and rounding inside mma differ from
//     the sequential k-order sum here; device math (expf, __expf, rsqrtf)
//     is the host libm's, which is more accurate than the GPU's;
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
};

// Fiber is one CUDA thread.
struct Fiber {
  Context ctx;
  char* stack = nullptr;
  uint3 tid{0, 0, 0};
  int linear = 0;
  bool done = false;
  unsigned collectives = 0;  // warp collectives executed, for buffer parity
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

  ~Block() {
    for (char* s : stacks) stack_pool().put(s);
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

// launch runs body as a kernel over grid × block on up to `workers` OS
// threads and returns "" or the first error.
inline std::string launch(dim3 grid, dim3 block, int workers, const std::function<void()>& body) {
  long nthreads = long(block.x) * block.y * block.z;
  if (nthreads < 1 || nthreads > kMaxThreads) return "simt: block of " + std::to_string(nthreads) + " threads";
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
    tls_block = &b;
    for (;;) {
      long i = next.fetch_add(1);
      if (i >= nblocks) break;
      uint3 bidx{unsigned(i % grid.x), unsigned(i / grid.x % grid.y), unsigned(i / (long(grid.x) * grid.y))};
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

// mma_complete computes D = A·B + C for the whole warp from the lanes'
// fragments in w.slots[p], into w.mma_d[p]; the last lane to arrive runs it.
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
      float acc = f.c[i];
      for (int k = 0; k < 16; k++) acc = std::fma(A[r][k], B[k][n], acc);
      w.mma_d[p][lane][i] = acc;
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
