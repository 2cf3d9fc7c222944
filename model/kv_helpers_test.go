package model

import (
	"github.com/x/kernels"
)

// blockMem is block id of p: every layer's K and V (test access).
func (p *kvPool) blockMem(id int32) kernels.Buffer {
	return p.mem.Slice(int(id)*p.stride, int(id+1)*p.stride)
}

// layerRows is layer l's K (v false) or V rows of block id of p.
func (p *kvPool) layerRows(id int32, l int, v bool) kernels.Buffer {
	size := p.bs * p.rowLen
	off := 2 * l * size
	if v {
		off += size
	}
	return p.blockMem(id).Slice(off, off+size)
}

// writeRows stores t rows of k and v ([t, KVH·D]) at positions c.Len ..
// of layer l of c's blocks in p with one WriteKV (reserve first), as the
// Runner does.
func writeRows(be kernels.Backend, p *kvPool, c *KVCache, l int, k, v kernels.Buffer, t int) {
	spans := []kernels.Span{{T: t, Start: c.Len}}
	lay, n, maxT, _ := kernels.AppendLayout(nil, spans)
	tab := c.table(nil, c.Blocks())
	kv := p.paged(l, kernels.HostI32(tab), len(tab))
	be.WriteKV(kv, kernels.BatchLayout{QStart: kernels.HostI32(lay[:2]), Pos: kernels.HostI32(lay[2:]), B: 1, N: n,
		MaxT: maxT, MaxLen: len(tab) * p.bs}, k, v, p.rowLen, 1)
}
