// host.h: the C entries of the SIMT host build (host.cc), for cgo. Every
// kernel of this package is launched through one entry with the packed
// parameter block the device launch passes to cuLaunchKernel, so the host
// build and the GPU share the launch path (twin_simt.go).
#pragma once
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
// host_kernel returns the number of kernel name, or -1 if there is none.
int host_kernel(const char* name);
// host_kernel_sig is kernel k's C signature, one letter per parameter:
// 'p' pointer, 'i' 32-bit integer, 'l' 64-bit integer, 'f' float, 'd'
// double (what the Go side's args records).
const char* host_kernel_sig(int k);
// host_launch runs kernel k over the grid and block, with smem bytes of
// dynamic shared memory per block, on up to `workers` OS threads with the
// parameter block p of n bytes (each value at an offset aligned to its
// size), and returns NULL or a malloc'd error message (the caller frees
// it).
char* host_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t smem,
                  int workers, const void* p, size_t n);
#ifdef __cplusplus
}
#endif
