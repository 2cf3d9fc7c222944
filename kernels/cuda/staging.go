package cuda

import (
	"errors"
	"time"
	"unsafe"
)

// Staging. Small host→device copies (a step's ids and positions, sampling
// parameters, kernel descriptors) and device→host copies at sync points go
// through a page-locked area per Device, so an upload queues a true
// asynchronous copy and returns without waiting, and a sync point's
// downloads land with one wait. The area is a bump allocator reset at
// every wait for the Device's stream: after a wait, no queued copy reads
// or writes it any more, and before one, no byte of it is handed out
// twice. (That is the discipline TestPinnedRoundTrip broke on the H200:
// it rewrote page-locked memory that a queued copy had yet to read.)
// Copies larger than stageMax use the caller's memory directly: pageable
// host→device copies are staged by the driver before it returns, and
// device→host copies into pageable memory wait for the stream.

const (
	stagingBytes = 4 << 20   // each Device's page-locked staging area
	stageMax     = 256 << 10 // the largest copy staged through it
	stageAlign   = 64
)

// errCapturing is returned by what a captured graph cannot hold: copies
// between host and device memory, waits, allocation.
var errCapturing = errors.New("not allowed while capturing a graph (upload inputs into device Buffers before capturing or replaying; read results after)")

// stager is a Device's page-locked staging area.
type stager struct {
	base       unsafe.Pointer
	size, head int64
}

func (r *stager) open(drv driver, n int64) error {
	p, err := drv.hostAlloc(n)
	if err != nil {
		return err
	}
	r.base, r.size, r.head = p, n, 0
	return nil
}

func (r *stager) close(drv driver) error {
	if r.base == nil {
		return nil
	}
	err := drv.hostFree(r.base)
	r.base = nil
	return err
}

func (r *stager) reset()            { r.head = 0 }
func (r *stager) fits(n int64) bool { return r.head+n <= r.size }
func stageSize(n int64) int64       { return (n + stageAlign - 1) / stageAlign * stageAlign }
func (r *stager) take(n int64) unsafe.Pointer {
	p := unsafe.Add(r.base, r.head)
	r.head += stageSize(n)
	return p
}

// waitStream waits for d's stream (a sync point); the staging area is free
// again afterwards.
func (d *Device) waitStream() error {
	d.sh.n.syncs.Add(1)
	t0 := time.Now()
	err := d.sh.drv.streamSync(d.stream)
	d.sh.n.wait.Add(int64(time.Since(t0)))
	d.ring.reset()
	return err
}

// upload queues a copy of n bytes of host memory src into device memory
// dst; src may change as soon as it returns.
func (d *Device) upload(dst devptr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	if d.graph != nil {
		return errCapturing
	}
	d.sh.n.ups.Add(1)
	d.sh.n.upBytes.Add(n)
	if n > stageMax {
		return d.sh.drv.copyHtoD(dst, src, n, d.stream)
	}
	if !d.ring.fits(stageSize(n)) {
		if err := d.waitStream(); err != nil {
			return err
		}
	}
	p := d.ring.take(n)
	copy(unsafe.Slice((*byte)(p), n), unsafe.Slice((*byte)(src), n))
	return d.sh.drv.copyHtoD(dst, p, n, d.stream)
}

// hostCopy is one device→host copy of a sync point.
type hostCopy struct {
	host unsafe.Pointer
	dev  devptr
	n    int64
}

// fetch is a sync point: it copies each device range into its host
// memory, with the status words, waits once for the stream (once per
// copy larger than stageMax instead, as those go straight into pageable
// memory), and reports what the kernels found (statusError) before
// handing out any data. It returns the sticky error if there is one.
func (d *Device) fetch(xs []hostCopy) error {
	if d.err != nil {
		return d.err
	}
	if d.graph != nil {
		return errCapturing
	}
	need := stageSize(statusBytes)
	for _, x := range xs {
		if x.n <= stageMax {
			need += stageSize(x.n)
		}
	}
	direct := need > d.ring.size // too much for the area: everything straight
	if direct || !d.ring.fits(need) {
		if err := d.waitStream(); err != nil {
			return err
		}
	}
	drv := d.sh.drv
	slots := d.sess.slots[:0]
	for _, x := range xs {
		d.sh.n.downs.Add(1)
		d.sh.n.downBytes.Add(x.n)
		if direct || x.n > stageMax || x.n == 0 {
			slots = append(slots, nil)
			continue
		}
		p := d.ring.take(x.n)
		if err := drv.copyDtoH(p, x.dev, x.n, d.stream); err != nil {
			return err
		}
		slots = append(slots, p)
	}
	st := d.ring.take(statusBytes)
	if err := drv.copyDtoH(st, d.status, statusBytes, d.stream); err != nil {
		return err
	}
	waited := false
	for i, x := range xs {
		if slots[i] != nil || x.n == 0 {
			continue
		}
		d.sh.n.syncs.Add(1) // a copy into pageable memory waits for the stream
		t0 := time.Now()
		err := drv.copyDtoH(x.host, x.dev, x.n, d.stream)
		d.sh.n.wait.Add(int64(time.Since(t0)))
		if err != nil {
			return err
		}
		waited = true
	}
	if waited {
		d.ring.reset()
	} else if err := d.waitStream(); err != nil {
		return err
	}
	if err := readStatus(st); err != nil {
		return err
	}
	for i, x := range xs {
		if slots[i] != nil {
			copy(unsafe.Slice((*byte)(x.host), x.n), unsafe.Slice((*byte)(slots[i]), x.n))
		}
	}
	d.sess.slots = slots[:0]
	return nil
}

// Sync waits for everything queued on the Device's stream and returns the
// sticky error, including what the device found since the last sync point
// (an index out of range, a kernel fault).
func (d *Device) Sync() error {
	d.live("Sync")
	if err := d.fetch(nil); err != nil {
		d.fail("Sync", err)
	}
	return d.err
}
