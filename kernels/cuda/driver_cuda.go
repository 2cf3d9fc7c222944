//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// driver owns one CUDA context. The context is current on one OS thread
// only, so a single goroutine, locked to its thread, makes every driver
// call: work is sent to it as closures (do) and runs one at a time. The
// fields below are touched only on that goroutine.
type driver struct {
	calls chan func()
	done  chan struct{}

	dev    cu.Device
	ctx    cu.CUContext
	stream cu.Stream
	mods   []cu.Module
	fns    map[string]cu.Function
	pool   pool

	name   string
	cc     [2]int
	source map[string]string // family -> "cubin" or "ptx (JIT)"
}

// openDriver starts the owning goroutine, retains device ordinal's
// primary context, creates a stream and loads every kernel family of
// Images() (the sm_90 cubin on a compute capability 9.0 device, else the
// PTX, JIT-compiled by the driver; a cubin the driver refuses falls back to
// the PTX).
func openDriver(ordinal int) (*driver, error) {
	d := &driver{calls: make(chan func()), done: make(chan struct{}), fns: map[string]cu.Function{}, source: map[string]string{}}
	ready := make(chan error, 1)
	go d.serve(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// serve is the owning goroutine.
func (d *driver) serve(ordinal int, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(d.done)
	if err := d.setup(ordinal); err != nil {
		d.teardown()
		ready <- err
		return
	}
	ready <- nil
	for f := range d.calls {
		f()
	}
	d.teardown()
}

func (d *driver) setup(ordinal int) error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("cuda: cuDeviceGetCount: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("cuda: device %d: %d devices present", ordinal, n)
	}
	if d.dev, err = cu.GetDevice(ordinal); err != nil {
		return fmt.Errorf("cuda: cuDeviceGet %d: %w", ordinal, err)
	}
	if d.name, err = d.dev.Name(); err != nil {
		return fmt.Errorf("cuda: cuDeviceGetName: %w", err)
	}
	if d.cc[0], d.cc[1], err = d.dev.ComputeCapability(); err != nil {
		return fmt.Errorf("cuda: cuDeviceGetAttribute (compute capability): %w", err)
	}
	if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("cuda: cuDevicePrimaryCtxRetain: %w", err)
	}
	if err = cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("cuda: cuCtxSetCurrent: %w", err)
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("cuda: cuStreamCreate: %w", err)
	}
	return d.load(Images())
}

// entryRE finds kernel entry points in PTX.
var entryRE = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z_][A-Za-z0-9_]*)\(`)

// load loads every family X of images (gen/X.ptx, gen/X.sm_90.cubin) and
// resolves a function handle for each entry point the PTX declares.
func (d *driver) load(images fs.FS) error {
	ptxs, err := fs.Glob(images, "gen/*.ptx")
	if err != nil || len(ptxs) == 0 {
		return fmt.Errorf("cuda: no embedded kernels (gen/*.ptx): %v", err)
	}
	sort.Strings(ptxs)
	for _, p := range ptxs {
		family := strings.TrimSuffix(path.Base(p), ".ptx")
		ptx, err := fs.ReadFile(images, p)
		if err != nil {
			return fmt.Errorf("cuda: reading %s: %w", p, err)
		}
		mod, src, err := d.loadFamily(images, family, ptx)
		if err != nil {
			return err
		}
		d.mods = append(d.mods, mod)
		d.source[family] = src
		for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
			name := string(m[1])
			fn, err := mod.Function(name)
			if err != nil {
				return fmt.Errorf("cuda: cuModuleGetFunction %s (%s): %w", name, family, err)
			}
			d.fns[name] = fn
		}
	}
	return nil
}

func (d *driver) loadFamily(images fs.FS, family string, ptx []byte) (cu.Module, string, error) {
	var cubinErr error
	if d.cc == [2]int{9, 0} {
		bin, err := fs.ReadFile(images, "gen/"+family+".sm_90.cubin")
		if err == nil {
			mod, err := cu.LoadData(string(bin))
			if err == nil {
				return mod, "cubin", nil
			}
			cubinErr = err
		} else {
			cubinErr = err
		}
	}
	log := make([]byte, 16<<10)
	mod, err := cu.LoadDataEx(string(ptx)+"\x00", &cu.JITErrorLogBuffer{Buffer: log})
	if err != nil {
		msg := strings.TrimRight(string(log), "\x00")
		return cu.Module{}, "", fmt.Errorf("cuda: cuModuleLoadDataEx %s.ptx: %w (JIT log: %s; cubin: %v)", family, err, msg, cubinErr)
	}
	return mod, "ptx (JIT)", nil
}

func (d *driver) teardown() {
	d.pool.release()
	for _, m := range d.mods {
		_ = m.Unload()
	}
	d.mods = nil
	if d.stream != (cu.Stream{}) {
		_ = d.stream.Destroy()
	}
	if d.ctx != (cu.CUContext{}) {
		_ = d.dev.ReleasePrimaryCtx()
	}
}

// errClosed is returned by do after close.
var errClosed = errors.New("cuda: device closed")

// do runs f on the owning goroutine and returns its error. It waits for
// f to be accepted unless ctx ends first; once running, f runs to the end
// (a kernel already queued cannot be taken back).
func (d *driver) do(ctx context.Context, f func() error) (err error) {
	res := make(chan error, 1)
	call := func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("cuda: panic on the driver goroutine: %v", r)
			}
		}()
		res <- f()
	}
	select {
	case d.calls <- call:
	case <-d.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-res
}

// close stops the owning goroutine after the calls already sent, then
// frees the pool, unloads the modules and releases the context.
func (d *driver) close() {
	select {
	case <-d.done:
		return
	default:
	}
	close(d.calls)
	<-d.done
}

// fn returns the handle of kernel name.
func (d *driver) fn(name string) (cu.Function, error) {
	f, ok := d.fns[name]
	if !ok {
		return cu.Function{}, fmt.Errorf("cuda: kernel %s not in the embedded modules", name)
	}
	return f, nil
}

// launch launches kernel name on the driver's stream with plan dm, smem
// bytes of dynamic shared memory and the packed arguments a.
func (d *driver) launch(name string, dm dims, smem int, a *args) error {
	f, err := d.fn(name)
	if err != nil {
		return err
	}
	if dm.gx == 0 || dm.gy == 0 || dm.gz == 0 {
		return nil
	}
	if smem > 48<<10 {
		if err := setMaxDynamicSmem(name, f, smem); err != nil {
			return err
		}
	}
	return launchPacked(name, f, dm, smem, d.stream, a.b)
}

// sync waits for the driver's stream.
func (d *driver) sync() error {
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: cuStreamSynchronize: %w", err)
	}
	return nil
}

// args packs kernel arguments as the C ABI lays them out in the driver's
// parameter block: each value at an offset aligned to its size.
type args struct{ b []byte }

func (a *args) put(p unsafe.Pointer, size int) {
	for len(a.b)%size != 0 {
		a.b = append(a.b, 0)
	}
	a.b = append(a.b, unsafe.Slice((*byte)(p), size)...)
}

// ptr appends a device pointer.
func (a *args) ptr(p cu.DevicePtr) *args { v := uint64(p); a.put(unsafe.Pointer(&v), 8); return a }

// i32 appends a C int.
func (a *args) i32(v int) *args {
	if v > math.MaxInt32 || v < math.MinInt32 {
		panic(fmt.Sprintf("kernels/cuda: argument %d does not fit a C int", v))
	}
	x := int32(v)
	a.put(unsafe.Pointer(&x), 4)
	return a
}

// i64 appends a C long.
func (a *args) i64(v int) *args { x := int64(v); a.put(unsafe.Pointer(&x), 8); return a }

// f32 appends a float.
func (a *args) f32(v float32) *args { a.put(unsafe.Pointer(&v), 4); return a }

// f64 appends a double.
func (a *args) f64(v float64) *args { a.put(unsafe.Pointer(&v), 8); return a }
