//go:build cudahost

// host.cc: the SIMT host build. It compiles every kernel of this package as
// host C++ through simt.h and runs any of them from the parameter block a
// device launch would pass (host.h): the block is unpacked by the
// kernel's own C signature, read from the function's type by the
// templates below, so no kernel's parameter list is written here; the
// table only names the kernels. Launch configurations come from the Go
// side (plan.go), the same ones the device uses.
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

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

namespace host_launcher {

template <class T>
constexpr bool unsupported = false;

// arg_class is a parameter type's letter in a signature.
template <class T>
constexpr char arg_class() {
  if constexpr (std::is_pointer_v<T>) {
    return 'p';
  } else if constexpr (std::is_same_v<T, float>) {
    return 'f';
  } else if constexpr (std::is_same_v<T, double>) {
    return 'd';
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 4) {
    return 'i';
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) {
    return 'l';
  } else {
    static_assert(unsupported<T>, "kernel parameter of a type the launch path does not pack");
  }
}

// take reads the next parameter of type T from the block, at an offset
// aligned to its size (the C ABI's rule for these types, and args').
template <class T>
T take(const unsigned char* p, size_t& off) {
  off = (off + sizeof(T) - 1) / sizeof(T) * sizeof(T);
  T v;
  memcpy(&v, p + off, sizeof(T));
  off += sizeof(T);
  return v;
}

struct Entry {
  const char* name;
  std::string sig;
  std::string (*run)(dim3 grid, dim3 block, size_t smem, int workers, const unsigned char* p, size_t n);
};

template <class... A>
std::string signature(void (*)(A...)) {
  return std::string{arg_class<A>()...};
}

// run unpacks the block by k's parameter types (a braced list is evaluated
// left to right) and runs k over the grid.
template <class... A>
std::string run(void (*k)(A...), dim3 grid, dim3 block, size_t smem, int workers, const unsigned char* p, size_t n) {
  size_t off = 0;
  std::tuple<A...> a{take<A>(p, off)...};
  if (off != n) return "parameter block of " + std::to_string(n) + " bytes, the kernel takes " + std::to_string(off);
  std::function<void()> body = [&] { std::apply(k, a); };
  return simt::launch(grid, block, workers, body, smem);
}

#define HOST_KERNEL(name)                                                                                         \
  Entry {                                                                                                         \
    #name, signature(name), [](dim3 g, dim3 b, size_t sm, int w, const unsigned char* p, size_t n) {                 \
      return run(name, g, b, sm, w, p, n);                                                                           \
    }                                                                                                                \
  }

const Entry entries[] = {
    HOST_KERNEL(add_f32),
    HOST_KERNEL(scale_f32),
    HOST_KERNEL(swiglu_forward),
    HOST_KERNEL(swiglu_backward),
    HOST_KERNEL(adamw_f32),
    HOST_KERNEL(embedding_forward),
    HOST_KERNEL(embedding_backward),
    HOST_KERNEL(rmsnorm_forward),
    HOST_KERNEL(rmsnorm_backward_dx),
    HOST_KERNEL(rmsnorm_backward_dw),
    HOST_KERNEL(rope_f32),
    HOST_KERNEL(attention_forward),
    HOST_KERNEL(attention_backward_dq),
    HOST_KERNEL(attention_backward_dkdv),
    HOST_KERNEL(attention_fwd1),
    HOST_KERNEL(attention_fwd4),
    HOST_KERNEL(attention_combine),
    HOST_KERNEL(attention_bwd_dq),
    HOST_KERNEL(attention_bwd_dkdv),
    HOST_KERNEL(write_kv),
    HOST_KERNEL(write_kv_rope),
    HOST_KERNEL(add_rmsnorm),
    HOST_KERNEL(logsoftmax_gather),
    HOST_KERNEL(policy_loss),
    HOST_KERNEL(softmax_rows),
    HOST_KERNEL(logsoftmax_gather_backward),
    HOST_KERNEL(argmax_f32),
    HOST_KERNEL(sample_rows),
    HOST_KERNEL(simt_probe_mma),
    HOST_KERNEL(simt_probe_barrier),
    HOST_KERNEL(simt_broken_diverge),
    HOST_KERNEL(simt_broken_mask),
    HOST_KERNEL(simt_probe_ldmatrix),
    HOST_KERNEL(simt_probe_cp_async),
    HOST_KERNEL(simt_probe_mma_chain),
    HOST_KERNEL(simt_broken_ldmatrix),
    HOST_KERNEL(simt_broken_cp_async),
    HOST_KERNEL(gemm_bf16_s_wt_x1),
    HOST_KERNEL(gemm_bf16_s_wt_x3),
    HOST_KERNEL(gemm_bf16_l_wt_x1),
    HOST_KERNEL(gemm_bf16_l_wt_x3),
    HOST_KERNEL(gemm_bf16_s_wn_x3),
    HOST_KERNEL(gemm_bf16_l_wn_x3),
    HOST_KERNEL(gemm_f32),
    HOST_KERNEL(gemm_splitk_reduce),
    HOST_KERNEL(gemm_bf16_s_multi_x1),
    HOST_KERNEL(gemm_bf16_s_multi_x3),
    HOST_KERNEL(gemm_bf16_l_multi_x1),
    HOST_KERNEL(gemm_bf16_l_multi_x3),
    HOST_KERNEL(gemm_splitk_reduce_multi),
    HOST_KERNEL(copy_cast),
    HOST_KERNEL(gather_rows),
    HOST_KERNEL(scatter_rows),
    HOST_KERNEL(transpose_rows),
    HOST_KERNEL(sum_squares),
    HOST_KERNEL(all_finite),
    HOST_KERNEL(store_words),
};

constexpr int count = sizeof entries / sizeof entries[0];

}  // namespace host_launcher

extern "C" int host_kernel(const char* name) {
  for (int i = 0; i < host_launcher::count; i++) {
    if (strcmp(host_launcher::entries[i].name, name) == 0) return i;
  }
  return -1;
}

extern "C" const char* host_kernel_sig(int k) { return host_launcher::entries[k].sig.c_str(); }

extern "C" char* host_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             size_t smem, int workers, const void* p, size_t n) {
  const auto& e = host_launcher::entries[k];
  std::string err = e.run(dim3(gx, gy, gz), dim3(bx, by, bz), smem, workers, static_cast<const unsigned char*>(p), n);
  return err.empty() ? nullptr : strdup((std::string(e.name) + ": " + err).c_str());
}
