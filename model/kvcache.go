package model

// KVCache holds one sequence's keys (after q/k-norm and RoPE) and values
// for every layer. Its buffers grow by half again when full; Batch reserves
// a request's prompt and (up to 512) new tokens when it starts.
type KVCache struct {
	K   [][]float32 // [L][S, KVH, D]
	V   [][]float32 // [L][S, KVH, D]
	Len int         // positions 0 .. Len−1 are filled
}

// Cap is the number of positions the buffers hold without growing.
func (c *KVCache) Cap(kvDim int) int {
	if len(c.K) == 0 || kvDim == 0 {
		return 0
	}
	return len(c.K[0]) / kvDim
}

// reserve makes room for n positions of kvDim floats in each of layers
// layers, keeping the filled ones.
func (c *KVCache) reserve(layers, kvDim, n int) {
	if len(c.K) != layers {
		c.K = make([][]float32, layers)
		c.V = make([][]float32, layers)
		c.Len = 0
	}
	have := c.Cap(kvDim)
	if n <= have {
		return
	}
	size := max(n, have+have/2, 16)
	for l := range layers {
		k := make([]float32, size*kvDim)
		v := make([]float32, size*kvDim)
		copy(k, c.K[l][:c.Len*kvDim])
		copy(v, c.V[l][:c.Len*kvDim])
		c.K[l], c.V[l] = k, v
	}
}

// Reset empties the cache, keeping its buffers for reuse.
func (c *KVCache) Reset() { c.Len = 0 }

// Truncate drops every position from n on (n ≤ Len), e.g. to rewind a
// sequence; the buffers are kept.
func (c *KVCache) Truncate(n int) {
	if n < c.Len {
		c.Len = max(n, 0)
	}
}

// Release drops the buffers so the memory can be reclaimed.
func (c *KVCache) Release() { *c = KVCache{} }
