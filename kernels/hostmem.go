package kernels

import "fmt"

// HostMemory implements Backend's memory methods (Alloc, Free, Import,
// Upload, Download, Err) for a backend whose Buffers are host slices, as
// the CPU backends' are: embed it. Its zero value is ready to use and it
// holds no state.
type HostMemory struct{}

// Alloc returns a zeroed host Buffer (see AllocHost).
func (HostMemory) Alloc(dt DType, n int) (Buffer, error) { return AllocHost(dt, n) }

// Free does nothing: the garbage collector owns host memory.
func (HostMemory) Free(Buffer) {}

// Import returns src itself: a host backend reads host memory in place.
func (HostMemory) Import(src Buffer) (Buffer, error) {
	if !src.Host() {
		return Buffer{}, fmt.Errorf("kernels: Import: src %v is device memory", src)
	}
	return src, nil
}

// Upload copies src into dst.
func (HostMemory) Upload(dst, src Buffer) error { return hostCopy("Upload", dst, src) }

// Download copies src into dst.
func (HostMemory) Download(dst, src Buffer) error { return hostCopy("Download", dst, src) }

// Err is always nil: host memory ops do not fail after Alloc.
func (HostMemory) Err() error { return nil }

func hostCopy(op string, dst, src Buffer) error {
	CheckTransfer(op, dst, src)
	if !dst.Host() || !src.Host() {
		return fmt.Errorf("kernels: %s: a host backend cannot reach device memory (dst %v, src %v)", op, dst, src)
	}
	switch dst.dtype {
	case F32:
		copy(dst.F32(), src.F32())
	case BF16, F16:
		copy(dst.U16(), src.U16())
	case I32:
		copy(dst.I32(), src.I32())
	case U8:
		copy(dst.U8(), src.U8())
	}
	return nil
}
