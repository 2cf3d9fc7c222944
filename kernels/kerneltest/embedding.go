package kerneltest

import (
	"fmt"
	"testing"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// Embedding checks out[T,C] = table[ids[t]] for every dtype: bit-exact.
func Embedding(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct{ v, c, t int }{{1, 1, 1}, {5, 3, 7}, {100, 33, 1}, {1000, 1024, 17}, {151936, 16, 9}}
	for _, c := range cases {
		for _, dt := range dtypes() {
			name := fmt.Sprintf("V%d_C%d_T%d_%s", c.v, c.c, c.t, dt)
			t.Run(name, func(t *testing.T) {
				rng := newRNG("Embedding" + name)
				table := randMat(rng, dt, c.v, c.c, 3)
				ids := make([]int32, c.t)
				for i := range ids {
					ids[i] = int32(rng.IntN(c.v))
				}
				ids[0] = int32(c.v - 1) // the last row
				if c.t > 2 {
					ids[1] = 0
					ids[2] = 0 // a repeated id
				}
				want := make([]float32, c.t*c.c)
				r.Embedding(kernels.HostF32(want), table, kernels.HostI32(ids))
				got := padded(make([]float32, c.t*c.c), 3)
				b.Embedding(kernels.HostF32(got), table, kernels.HostI32(ids))
				CheckExact(t, "out", got[:c.t*c.c], want)
				CheckExact(t, "out past T·C", got[c.t*c.c:], padded(nil, 3))
			})
		}
	}
}
