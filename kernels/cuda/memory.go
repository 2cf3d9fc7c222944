package cuda

import (
	"errors"
	"fmt"

	"github.com/x/kernels"
)

// Buffer is one allocation of device memory of a Device: n elements of
// dtype from the allocator. It is the kernels.DeviceMem inside the
// kernels.Buffers a Device hands out, so data stays on the device between
// ops; element offsets address views (kernels.Buffer.Slice) into it.
type Buffer struct {
	ptr   devptr
	n     int
	dtype kernels.DType
	owner *shared
}

// Elems is the number of elements b holds (kernels.DeviceMem).
func (b Buffer) Elems() int { return b.n }

// addr returns the device address of b's first element. It panics (a
// programmer error) for a host Buffer or one from another Device.
func (d *Device) addr(op string, b kernels.Buffer) devptr {
	mem, off := b.Device()
	buf, ok := mem.(Buffer)
	if !ok || buf.owner != d.sh {
		panic(fmt.Sprintf("kernels/cuda: %s: a %v not allocated by this Device (host: %v)", op, b, b.Host()))
	}
	if d.graph != nil {
		d.graph.use(buf.ptr)
	}
	return buf.ptr + devptr(off*b.DType().Size())
}

// memset8 queues n bytes of v at p.
func (d *Device) memset8(p devptr, v byte, n int64) error {
	if n == 0 {
		return nil
	}
	d.sh.n.memsets.Add(1)
	return d.sh.drv.memset8(p, v, n, d.stream)
}

// Alloc returns a zeroed device Buffer of n elements of dt (the zeroing is
// queued: no wait).
func (d *Device) Alloc(dt kernels.DType, n int) (kernels.Buffer, error) {
	d.live("Alloc")
	if d.err != nil {
		return kernels.Buffer{}, d.err
	}
	if dt > kernels.U8 {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Alloc: dtype %v: a Buffer holds F32, BF16, F16, I32 or U8", dt)
	}
	if n < 0 {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Alloc: negative length %d", n)
	}
	if d.graph != nil {
		err := fmt.Errorf("kernels/cuda: Alloc: %w", errCapturing)
		d.fail("Alloc", err)
		return kernels.Buffer{}, err
	}
	bytes := int64(n) * int64(dt.Size())
	p, err := d.sh.mem.alloc(bytes, d.stream)
	if err == nil {
		if err = d.memset8(p, 0, bytes); err != nil {
			err = errors.Join(err, d.sh.mem.free(p, d.stream))
		}
	}
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Alloc %v[%d]: %w", dt, n, err)
	}
	return kernels.DeviceBuffer(Buffer{ptr: p, n: n, dtype: dt, owner: d.sh}, dt, 0, n), nil
}

// Free returns b's memory to the allocator, reusable by work queued after
// it on the stream that allocated b (from another stream, once that
// stream's queued work is done). b must come from Alloc or Import, not be
// a view. While a graph is being captured the memory is kept until the
// Graph is closed.
func (d *Device) Free(b kernels.Buffer) {
	d.live("Free")
	mem, off := b.Device()
	buf, ok := mem.(Buffer)
	if !ok || buf.owner != d.sh {
		panic(fmt.Sprintf("kernels/cuda: Free: a %v not allocated by this Device", b))
	}
	if off != 0 || b.Len() != buf.n {
		panic("kernels/cuda: Free: a view, not a Buffer from Alloc or Import")
	}
	if d.graph != nil {
		d.graph.frees = append(d.graph.frees, buf.ptr)
		return
	}
	d.sh.invalidate(buf.ptr)
	if err := d.sh.mem.free(buf.ptr, d.stream); err != nil {
		d.fail("Free", err)
	}
}

// Import copies the host Buffer src into a new device Buffer (queued: src
// may change once it returns).
func (d *Device) Import(src kernels.Buffer) (kernels.Buffer, error) {
	if !src.Host() {
		return kernels.Buffer{}, fmt.Errorf("kernels/cuda: Import: src %v is not a host buffer", src)
	}
	dst, err := d.Alloc(src.DType(), src.Len())
	if err != nil {
		return kernels.Buffer{}, err
	}
	if err := d.Upload(dst, src); err != nil {
		d.Free(dst)
		return kernels.Buffer{}, err
	}
	return dst, nil
}

// Upload copies the host Buffer src into the device Buffer dst. The copy
// is queued (staged through page-locked memory when small): it does not
// wait for the device (unless the staging area has filled up since the
// last wait), and src may change once it returns.
func (d *Device) Upload(dst, src kernels.Buffer) error {
	kernels.CheckTransfer("Upload", dst, src)
	d.live("Upload")
	if d.err != nil {
		return d.err
	}
	if !src.Host() {
		panic("kernels/cuda: Upload: src is not a host buffer")
	}
	if err := d.upload(d.addr("Upload", dst), src.HostPtr(), bufBytes(src)); err != nil {
		err = fmt.Errorf("kernels/cuda: Upload: %w", err)
		d.fail("Upload", err)
		return err
	}
	return nil
}

// Download copies the device Buffer src into the host Buffer dst after
// the work already queued: a sync point (see Device).
func (d *Device) Download(dst, src kernels.Buffer) error {
	return d.DownloadAll(kernels.Transfer{Dst: dst, Src: src})
}

// DownloadAll copies each device Buffer ts[i].Src into the host Buffer
// ts[i].Dst with one wait for the device (kernels.BatchDownloader).
func (d *Device) DownloadAll(ts ...kernels.Transfer) error {
	for _, t := range ts {
		kernels.CheckTransfer("Download", t.Dst, t.Src)
		if !t.Dst.Host() {
			panic("kernels/cuda: Download: dst is not a host buffer")
		}
	}
	d.live("Download")
	outs := d.sess.outs[:0]
	for _, t := range ts {
		outs = append(outs, hostCopy{host: t.Dst.HostPtr(), dev: d.addr("Download", t.Src), n: bufBytes(t.Src)})
	}
	d.sess.outs = outs[:0]
	if err := d.fetch(outs); err != nil {
		d.fail("Download", err)
		return d.err
	}
	return nil
}
