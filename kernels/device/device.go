package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// Kind is a backend family.
type Kind int

const (
	// CPU is kernels/cpu.
	CPU Kind = iota
	// CUDA is kernels/cuda's Device: an NVIDIA GPU (binaries built with
	// -tags cuda).
	CUDA
)

// String is the kind as device names spell it.
func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Name is a parsed device name: a kind and, for CUDA, the GPU's ordinal.
type Name struct {
	Kind    Kind
	Ordinal int // the GPU (CUDA only; 0 for "cuda")
}

// String spells n as Parse reads it: "cpu", "cuda", "cuda:N".
func (n Name) String() string {
	if n.Kind == CUDA && n.Ordinal != 0 {
		return fmt.Sprintf("cuda:%d", n.Ordinal)
	}
	return n.Kind.String()
}

// Parse reads a device name: "cpu", "cuda" (GPU 0) or "cuda:N" (GPU N,
// N ≥ 0). Case and surrounding spaces matter: names are exact.
func Parse(s string) (Name, error) {
	switch {
	case s == "cpu":
		return Name{Kind: CPU}, nil
	case s == "cuda":
		return Name{Kind: CUDA}, nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(s[len("cuda:"):])
		if err != nil || n < 0 || strconv.Itoa(n) != s[len("cuda:"):] {
			return Name{}, fmt.Errorf("device %q: want cuda:N with N a GPU number 0, 1, …", s)
		}
		return Name{Kind: CUDA, Ordinal: n}, nil
	}
	return Name{}, fmt.Errorf("device %q: want cpu, cuda (GPU 0) or cuda:N (GPU N)", s)
}

// Options configures Open.
type Options struct {
	// Threads is the CPU backend's worker count (0: every core). The CUDA
	// backend ignores it.
	Threads int
}

// ErrNoCUDA is Open's error for a CUDA device in a binary built without
// the cuda tag.
var ErrNoCUDA = errors.New("this binary was built without CUDA: rebuild it with `go build -tags cuda` " +
	"(needs the CUDA toolkit's cuda.h at build time, and the NVIDIA driver's libcuda.so.1 " +
	"and an NVIDIA GPU at run time), or use -device cpu")

// Open returns the backend named by name (see Parse) and the function that
// releases it, which the caller calls once, after everything that uses the
// backend (a Model loaded on it) is closed. A CUDA name in a binary built
// without the cuda tag is ErrNoCUDA; with it, a GPU that cannot be opened
// is an error naming the device and the driver's reason.
func Open(name string, opts Options) (kernels.Backend, func() error, error) {
	n, err := Parse(name)
	if err != nil {
		return nil, nil, err
	}
	if opts.Threads < 0 {
		return nil, nil, fmt.Errorf("device %s: %d threads: want 0 (every core) or more", n, opts.Threads)
	}
	switch n.Kind {
	case CPU:
		b := cpu.New(opts.Threads)
		return b, func() error { b.Close(); return nil }, nil
	default:
		b, closeFn, err := openCUDA(n.Ordinal)
		if err != nil {
			return nil, nil, fmt.Errorf("device %s: %w", n, err)
		}
		return b, closeFn, nil
	}
}
