//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"

	"gorgonia.org/cu"
)

// cudaDriver is the driver seam over the CUDA driver API: gorgonia.org/cu
// to find the device and load the modules, our cgo (driver_cgo_cuda.go)
// for every call on the hot path. Any goroutine may call it: each cgo call
// makes the context current on its own thread first.
type cudaDriver struct {
	dev    cu.Device
	h      cuHandles
	mu     sync.Mutex // the handle tables
	mods   []cu.Module
	byName map[string]kernelH
	names  []string      // by kernelH
	funcs  []cu.Function // by kernelH (for attributes)

	name   string
	cc     [2]int
	source map[string]string // family -> "cubin" or "ptx (JIT)"
}

// NewDevice opens GPU ordinal (0 for the first), loads the embedded
// kernels and returns a Device on it. It fails with an error naming the
// driver call when there is no usable device.
func NewDevice(ordinal int) (*Device, error) {
	drv, err := openDriver(ordinal)
	if err != nil {
		return nil, err
	}
	return newDevice(drv)
}

// openDriver retains device ordinal's primary context and loads every
// kernel family of Images() (the sm_90 cubin on a compute capability 9.0
// device, else the PTX, JIT-compiled by the driver; a cubin the driver
// refuses falls back to the PTX). cu's calls need the context current on
// the calling thread, so this runs on a locked OS thread.
func openDriver(ordinal int) (*cudaDriver, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d := &cudaDriver{byName: map[string]kernelH{}, source: map[string]string{}, h: newCUHandles()}
	if err := d.setup(ordinal); err != nil {
		return nil, errors.Join(err, d.close())
	}
	return d, nil
}

func (d *cudaDriver) setup(ordinal int) error {
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
	if err := d.retain(); err != nil {
		return err
	}
	if err := d.makeCurrent(); err != nil {
		return err
	}
	return d.load(Images())
}

// entryRE finds kernel entry points in PTX.
var entryRE = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z_][A-Za-z0-9_]*)\(`)

// load loads every family X of images (gen/X.ptx, gen/X.sm_90.cubin) and
// resolves a function handle for each entry point the PTX declares.
func (d *cudaDriver) load(images fs.FS) error {
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
			d.byName[name] = d.addFunction(name, fn)
		}
	}
	return nil
}

func (d *cudaDriver) loadFamily(images fs.FS, family string, ptx []byte) (cu.Module, string, error) {
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

// withContext runs f on a locked OS thread with the context current, for
// gorgonia.org/cu's calls (tests read kernel attributes with it).
func (d *cudaDriver) withContext(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.makeCurrent(); err != nil {
		return err
	}
	return f()
}

func (d *cudaDriver) describe() string {
	return fmt.Sprintf("%s (sm_%d%d) modules %v", d.name, d.cc[0], d.cc[1], d.source)
}

func (d *cudaDriver) kernel(name string) (kernelH, error) {
	k, ok := d.byName[name]
	if !ok {
		return 0, fmt.Errorf("cuda: kernel %s not in the embedded modules", name)
	}
	return k, nil
}

// close unloads the modules and releases the context.
func (d *cudaDriver) close() error {
	return d.withContextIfAny(func() error {
		var err error
		for _, m := range d.mods {
			err = errors.Join(err, m.Unload())
		}
		d.mods = nil
		return errors.Join(err, d.release())
	})
}

func (d *cudaDriver) withContextIfAny(f func() error) error {
	if d.h.ctx == nil {
		return f()
	}
	return d.withContext(f)
}
