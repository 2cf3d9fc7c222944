package model

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// TestCloseFreesRetiredPoolBlocks: Model.Close gives back every KV block,
// those of a pool that SetKVOptions replaced while a sequence still held
// them included (one and two replacements); releasing such a sequence
// after Close frees nothing twice.
func TestCloseFreesRetiredPoolBlocks(t *testing.T) {
	for _, replacements := range []int{1, 2} {
		be := cpu.New(1)
		defer be.Close()
		c := &kerneltest.Counting{Backend: be, CopyImports: true}
		f := &freeCounting{Backend: c}
		m, err := Load(filepath.Join("testdata", "tiny_tied_f32"), f)
		require.NoError(t, err)
		var seqs []*Sequence
		for i := range replacements {
			s := NewSequence(uint64(i+1), 1, 2, 3, 4)
			require.NoError(t, m.Prefill(t.Context(), []*Sequence{s}, BatchOptions{}))
			seqs = append(seqs, s)
			require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 8 * (i + 1)}))
		}
		require.NoError(t, m.Close())
		assert.Equal(t, 0, c.Live(), "replacements=%d: allocations live after Model.Close", replacements)
		f.frees = 0
		for _, s := range seqs {
			s.Release()
		}
		assert.Zero(t, f.frees, "replacements=%d: releasing after Close frees nothing more", replacements)
		assert.Empty(t, c.BadFrees, "replacements=%d: memory freed twice", replacements)
	}
}
