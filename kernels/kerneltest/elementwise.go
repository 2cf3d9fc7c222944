package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Add checks dst += src; Scale checks x *= s. Both are bit-exact.
func Add(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, n := range []int{0, 1, 15, 17, 1000, 4099, 1 << 16} {
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			rng := newRNG(fmt.Sprint("Add", n))
			dst, src := uniform(rng, n, 3), uniform(rng, n+2, 3)
			want := clone(dst)
			r.Add(kernels.HostF32(want), kernels.HostF32(src))
			got := clone(dst)
			b.Add(kernels.HostF32(got), kernels.HostF32(src))
			CheckExact(t, "dst", got, want)
		})
	}
}

// Scale checks x *= s, bit-exact.
func Scale(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	for _, n := range []int{0, 1, 15, 17, 1000, 4099, 1 << 16} {
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			rng := newRNG(fmt.Sprint("Scale", n))
			x := uniform(rng, n, 3)
			want := clone(x)
			r.Scale(kernels.HostF32(want), 0.37)
			got := clone(x)
			b.Scale(kernels.HostF32(got), 0.37)
			CheckExact(t, "x", got, want)
		})
	}
}
