package kerneltest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
)

// EmbeddingBackward checks that dout rows are added (+=) to the rows of
// their ids, with repeated ids, C = 1, C not divisible by the SIMD width,
// and a shape big enough for a parallel backend to split; rows no id names
// must not change at all.
func EmbeddingBackward(t *testing.T, b kernels.Backend) {
	var r ref.Backend
	cases := []struct {
		v, c int
		ids  []int32
	}{
		{50, 1, []int32{3, 3, 49, 0}},
		{7, 5, []int32{2, 0, 2, 6, 2, 1}},
		{3, 4099, []int32{1, 1, 1, 0, 1, 2, 1, 1, 0}},
		{1000, 1024, nil}, // 40 random ids with repeats
		{151936, 8, []int32{151935, 0, 151935, 77777}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("V%d_C%d_T%d", c.v, c.c, len(c.ids))
		t.Run(name, func(t *testing.T) {
			rng := newRNG("EmbeddingBackward" + name)
			ids := c.ids
			if ids == nil {
				for range 40 {
					ids = append(ids, int32(rng.IntN(12)*83))
				}
			}
			dout := uniform(rng, len(ids)*c.c, 1)
			d0 := uniform(rng, c.v*c.c, 1)
			want := clone(d0)
			r.EmbeddingBackward(kernels.HostF32(want), kernels.HostF32(dout), kernels.HostI32(ids), c.c)
			got := clone(d0)
			b.EmbeddingBackward(kernels.HostF32(got), kernels.HostF32(dout), kernels.HostI32(ids), c.c)
			CheckClose(t, "dtable", got, want, Tolerance("EmbeddingBackward"))
			used := map[int32]bool{}
			for _, id := range ids {
				used[id] = true
			}
			changed := 0
			for i := range got {
				if !used[int32(i/c.c)] && got[i] != d0[i] {
					changed++
				}
			}
			assert.Zero(t, changed, "elements of rows no id names that changed")
			again := clone(d0)
			b.EmbeddingBackward(kernels.HostF32(again), kernels.HostF32(dout), kernels.HostI32(ids), c.c)
			CheckExact(t, "repeated call", again, got)
		})
	}
}
