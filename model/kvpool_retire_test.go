package model

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/kerneltest"
)

// TestCloseFreesRetiredKVPools: Model.Close gives back the blocks of every
// KV pool the Model made, not only the current one: a pool replaced by
// SetKVOptions while caches still held its blocks (the caches are never
// released before Close, which Close's doc allows: they must just not be
// used afterwards) must not outlive the Model, and a cache released after
// Close frees nothing twice.
func TestCloseFreesRetiredKVPools(t *testing.T) {
	for _, c := range []struct {
		name     string
		replaces int // SetKVOptions calls while a sequence holds blocks
	}{{"one replaced pool", 1}, {"two replaced pools", 2}} {
		t.Run(c.name, func(t *testing.T) {
			be := cpu.New(2)
			defer be.Close()
			cb := &kerneltest.Counting{Backend: be, CopyImports: true}
			start := cb.Live()
			m, err := Load(filepath.Join("testdata", "tiny_tied_f32"), cb)
			require.NoError(t, err)
			var held []*Sequence
			for i := range c.replaces {
				s := NewSequence(uint64(i), 1, 2, 3, 4, 5)
				require.NoError(t, m.Prefill(t.Context(), []*Sequence{s}, BatchOptions{}))
				held = append(held, s)
				require.NoError(t, m.SetKVOptions(KVOptions{BlockSize: 4 << i, DType: kernels.BF16}))
			}
			require.NoError(t, m.Close())
			assert.Equal(t, start, cb.Live(), "allocations live after Close with retired pools' blocks still held")
			for _, s := range held {
				s.Release() // after Close: must not free a block again
			}
			assert.Equal(t, start, cb.Live(), "after releasing the caches")
			require.NoError(t, cb.Err())
			assert.Empty(t, cb.BadFrees, "memory freed twice")
		})
	}
}
