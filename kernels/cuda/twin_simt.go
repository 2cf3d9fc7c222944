//go:build cudahost

package cuda

/*
#cgo CXXFLAGS: -std=c++17 -O2 -Wall
#include <stdlib.h>
#include "host.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// simtRunner runs the twin's launches through the SIMT shim (host.cc): the
// package's kernels compiled as host C++, unpacked from the same
// parameter blocks a GPU launch passes.
type simtRunner struct{}

func (simtRunner) kernel(name string) (int, string, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	k := int(C.host_kernel(cs))
	if k < 0 {
		return 0, "", fmt.Errorf("kernel %s is not in the host build (host.cc's table)", name)
	}
	return k, C.GoString(C.host_kernel_sig(C.int(k))), nil
}

func (simtRunner) run(k int, dm dims, smem int, p []byte, workers int) error {
	var pp unsafe.Pointer
	if len(p) > 0 {
		pp = unsafe.Pointer(&p[0]) // holds no Go pointers; host_launch returns when the kernel is done
	}
	msg := C.host_launch(C.int(k), C.uint(dm.gx), C.uint(dm.gy), C.uint(dm.gz), C.uint(dm.bx), C.uint(dm.by), C.uint(dm.bz),
		C.size_t(smem), C.int(workers), pp, C.size_t(len(p)))
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// HostOptions configure NewHostDevice.
type HostOptions struct {
	// Workers is the number of OS threads a launch runs blocks on
	// (runtime.NumCPU() if ≤ 0).
	Workers int
	// Memory is the twin's device memory in bytes (16 GiB if ≤ 0; taken
	// from the system only as Buffers need it).
	Memory int64
}

// NewHost returns a Device on the host twin of the CUDA driver (twin.go):
// the package's kernels run on the CPU through the SIMT shim, on
// workers OS threads (runtime.NumCPU() if ≤ 0), with the launch path,
// memory layer, staging and allocator of the GPU. It exists to test all of
// that without a GPU; it is slow (every CUDA thread is a fiber) and not
// meant for training. It panics if the twin cannot open (it maps memory
// and nothing else); use NewHostDevice for the error.
func NewHost(workers int) *Device {
	d, err := NewHostDevice(HostOptions{Workers: workers})
	if err != nil {
		panic(err)
	}
	return d
}

// NewHostDevice is NewHost with options.
func NewHostDevice(o HostOptions) (*Device, error) {
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.Memory <= 0 {
		o.Memory = 16 << 30
	}
	return newDevice(newTwin(simtRunner{}, o.Memory, o.Workers))
}
