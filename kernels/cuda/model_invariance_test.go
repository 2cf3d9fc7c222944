//go:build cudahost || cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/kerneltest"
	"github.com/x/model"
)

// e2eForwardInvariance checks that the model's forward gives every
// position the same bits whatever the batch it runs in: three sequences
// (70, 9 and 130 tokens, so rows see up to three key chunks) fed as a
// continuous batch does (a prefill in chunks beside other sequences'
// decode steps, then one token a step, sequences finishing at different
// steps), in f32 and bf16 KV caches of 16-position blocks, against each
// sequence fed whole and alone. Every op of the forward must be
// batch-invariant for this to hold: the attention kernels (prefill and
// decode, split and unsplit), the KV write, the norms, the GEMMs. It is
// what lets sampling record the log-probs the training forward computes.
func e2eForwardInvariance(t *testing.T, nb newBackend) {
	be := nb(t)
	m := loadOn(t, e2eCheckpoint(t), be)
	C := m.Config.HiddenSize
	rng := rand.New(rand.NewPCG(21, 22))
	var seqs [][]int32
	for _, n := range []int{70, 9, 130} {
		seqs = append(seqs, tokens(rng, n, m.Config.VocabSize))
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		t.Run(fmt.Sprint(dt), func(t *testing.T) {
			require.NoError(t, m.SetKVOptions(model.KVOptions{BlockSize: 16, DType: dt}))
			r := m.NewRunner()
			defer r.Release()
			want := make([][]float32, len(seqs))
			for i, s := range seqs {
				var c model.KVCache
				h, err := r.TryForward([]*model.KVCache{&c}, [][]int32{s})
				require.NoError(t, err)
				want[i] = append([]float32(nil), h...)
				c.Release()
			}
			caches := make([]model.KVCache, len(seqs))
			defer func() {
				for i := range caches {
					caches[i].Release()
				}
			}()
			for step := 0; ; step++ {
				var cs []*model.KVCache
				var feeds [][]int32
				var which []int
				for i, s := range seqs {
					at := caches[i].Len
					if at == len(s) {
						continue
					}
					n := 1 // a decode step
					if step < 3 {
						n = min(len(s)-at, []int{23, 8, 40}[(i+step)%3]) // chunked prefill
					}
					cs, feeds, which = append(cs, &caches[i]), append(feeds, s[at:at+n]), append(which, i)
				}
				if len(cs) == 0 {
					break
				}
				starts := make([]int, len(cs))
				for j, c := range cs {
					starts[j] = c.Len
				}
				h, err := r.TryForward(cs, feeds)
				require.NoError(t, err)
				row := 0
				for j, i := range which {
					n := len(feeds[j])
					kerneltest.CheckExact(t, fmt.Sprintf("step %d seq %d positions %d..%d", step, i, starts[j], starts[j]+n-1),
						h[row*C:(row+n)*C], want[i][starts[j]*C:(starts[j]+n)*C])
					row += n
				}
			}
		})
	}
}
