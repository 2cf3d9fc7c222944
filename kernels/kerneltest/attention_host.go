package kerneltest

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/x/kernels"
)

// attnSeq is the shape of one sequence in a batched attention case: t new
// tokens from position start.
type attnSeq struct{ t, start int }

// attnData is one attention test batch on the host: each sequence's
// queries [T, H, D] and keys and values [Start+T, KVH, D].
type attnData struct {
	heads, kvHeads, dim int
	seqs                []attnSeq
	q, k, v             [][]float32
}

// newAttnData draws a batch: queries uniform in ±qScale, keys and values in
// ±1.
func newAttnData(rng *rand.Rand, heads, kvHeads, dim int, seqs []attnSeq, qScale float64) *attnData {
	d := &attnData{heads: heads, kvHeads: kvHeads, dim: dim, seqs: seqs}
	for _, s := range seqs {
		n := s.start + s.t
		d.q = append(d.q, uniform(rng, s.t*heads*dim, qScale))
		d.k = append(d.k, uniform(rng, n*kvHeads*dim, 1))
		d.v = append(d.v, uniform(rng, n*kvHeads*dim, 1))
	}
	return d
}

// rounded returns a copy of d with K and V rounded to bf16 (the floats a
// bf16 pool holds).
func (d *attnData) rounded() *attnData {
	r := *d
	r.k, r.v = make([][]float32, len(d.k)), make([][]float32, len(d.v))
	for i := range d.k {
		r.k[i], r.v[i] = roundBF16(d.k[i]), roundBF16(d.v[i])
	}
	return &r
}

// kvStore says how a test batch holds its keys and values: contiguous
// (bs 0), or paged in blocks of bs positions of dtype dt, where
// sequences after the first share the first one's blocks (and K/V) for
// their first share positions (a multiple of bs: a forked prompt).
type kvStore struct {
	bs    int
	dt    kernels.DType
	share int
}

// garbageID fills block-table entries no position uses: reading one is a
// kernel bug (an index far outside any pool).
const garbageID = math.MaxInt32 / 2

// nan is the garbage of K/V memory no position uses and of padding past
// outputs: a kernel that reads or writes it is caught.
var nan = float32(math.NaN())

// layout returns the I32 layout of d's sequences as host Buffers, with
// MaxT and MaxLen larger than needed (launch bounds may be loose).
func (d *attnData) layout() kernels.BatchLayout {
	spans := make([]kernels.Span, len(d.seqs))
	for i, s := range d.seqs {
		spans[i] = kernels.Span{T: s.t, Start: s.start}
	}
	ints, n, maxT, maxLen := kernels.AppendLayout(nil, spans)
	b := len(spans)
	return kernels.BatchLayout{QStart: kernels.HostI32(ints[:b+1]), Pos: kernels.HostI32(ints[b+1:]),
		B: b, N: n, MaxT: maxT + 1, MaxLen: maxLen + 3}
}

// pack concatenates each sequence's rows of per[i] and appends bwPad NaNs.
func pack(per [][]float32) []float32 {
	var out []float32
	for _, p := range per {
		out = append(out, p...)
	}
	return padded(out, bwPad)
}

// unpack splits packed rows (width elements per token) back into the
// sequences of d, dropping the padding.
func (d *attnData) unpack(packed []float32, width int) [][]float32 {
	out := make([][]float32, len(d.seqs))
	at := 0
	for i, s := range d.seqs {
		out[i] = packed[at : at+s.t*width]
		at += s.t * width
	}
	return out
}

// withShare returns d with sequences after the first holding the first
// sequence's K and V in their first share positions (as forks of one
// prompt do), so their blocks can be shared.
func (d *attnData) withShare(share int) *attnData {
	if share == 0 {
		return d
	}
	r := *d
	rl := d.kvHeads * d.dim
	r.k, r.v = slices.Clone(d.k), slices.Clone(d.v)
	for i := 1; i < len(d.seqs); i++ {
		r.k[i], r.v[i] = clone(d.k[i]), clone(d.v[i])
		copy(r.k[i][:share*rl], d.k[0][:share*rl])
		copy(r.v[i][:share*rl], d.v[0][:share*rl])
	}
	return &r
}

// batch returns d as an AttentionBatch of host Buffers: packed Q, Out
// (NaN-filled, NaN-padded) and LSE (if lse), the layout, and K/V stored as
// kv says. Contiguous K/V leave two NaN rows between sequences; a paged
// pool holds the batch's blocks in a shuffled order among NaN-filled spare
// ones, as layer 1 of a two-layer block (KOff, VOff > 0) with NaN
// elsewhere, NaN rows past each sequence's length, and block tables with
// spare entries set to garbageID. Sequences must share K/V as kv.share
// says (withShare).
func (d *attnData) batch(rng *rand.Rand, kv kvStore, lse bool) kernels.AttentionBatch {
	rl := d.kvHeads * d.dim
	a := kernels.AttentionBatch{Layout: d.layout(), Q: kernels.HostF32(pack(d.q))}
	a.Out = kernels.HostF32(bwNaNs(a.Layout.N * d.heads * d.dim))
	if lse {
		a.LSE = kernels.HostF32(bwNaNs(a.Layout.N * d.heads))
	}
	if kv.bs == 0 {
		var ks []int32
		var k, v []float32
		gap := make([]float32, 2*rl)
		for i := range gap {
			gap[i] = nan
		}
		for i := range d.seqs {
			ks = append(ks, int32(len(k)/rl))
			k, v = append(append(k, d.k[i]...), gap...), append(append(v, d.v[i]...), gap...)
		}
		ks = append(ks, int32(len(k)/rl))
		a.K, a.V, a.KStart = kernels.HostF32(k), kernels.HostF32(v), kernels.HostI32(ks)
		return a
	}
	a.Paged = d.pool(rng, kv, a.Layout.MaxLen)
	return a
}

// pool stores d's K/V in a shuffled paged pool (see batch).
func (d *attnData) pool(rng *rand.Rand, kv kvStore, maxLen int) kernels.PagedKV {
	rl, bs := d.kvHeads*d.dim, kv.bs
	size := bs * rl
	p := kernels.PagedKV{BlockSize: bs, BlockStride: 4*size + 5, KOff: 2 * size, VOff: 3*size + 1,
		TableStride: (maxLen+bs-1)/bs + 1}
	// Blocks each sequence needs of its own (the shared prefix is the
	// first sequence's).
	own := make([]int, len(d.seqs))
	total := 0
	for i, s := range d.seqs {
		own[i] = (s.start + s.t + bs - 1) / bs
		if i > 0 {
			own[i] -= kv.share / bs
		}
		total += own[i]
	}
	nblk := 2*total + 1
	perm := rng.Perm(nblk)
	mem := make([]float32, nblk*p.BlockStride)
	for i := range mem {
		mem[i] = nan
	}
	tables := make([]int32, len(d.seqs)*p.TableStride)
	for i := range tables {
		tables[i] = garbageID
	}
	next := 0
	for i, s := range d.seqs {
		n := s.start + s.t
		for b := range (n + bs - 1) / bs {
			var id int
			if i > 0 && b < kv.share/bs {
				id = int(tables[b]) // the first sequence's block
			} else {
				id = perm[next]
				next++
			}
			tables[i*p.TableStride+b] = int32(id)
			rows := min(bs, n-b*bs)
			base := id * p.BlockStride
			copy(mem[base+p.KOff:base+p.KOff+rows*rl], d.k[i][b*size:b*size+rows*rl])
			copy(mem[base+p.VOff:base+p.VOff+rows*rl], d.v[i][b*size:b*size+rows*rl])
		}
	}
	p.Tables = kernels.HostI32(tables)
	p.Pool = kernels.HostRounded(kv.dt, mem)
	return p
}

// roundBF16 returns x rounded to bfloat16 and widened back.
func roundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
	}
	return out
}

// gradBatch returns the backward's batch for d stored as kv: the forward
// batch (Out and LSE given, packed), DOut, DQ (NaN: it must be
// overwritten), and DK and DV (+=, starting from dk0 and dv0 per sequence)
// placed by KStart with two NaN rows between sequences.
func (d *attnData) gradBatch(rng *rand.Rand, kv kvStore, out, lse, dout, dk0, dv0 [][]float32) kernels.AttentionGradBatch {
	g := kernels.AttentionGradBatch{AttentionBatch: d.batch(rng, kv, true)}
	g.Out, g.LSE, g.DOut = kernels.HostF32(pack(out)), kernels.HostF32(pack(lse)), kernels.HostF32(pack(dout))
	g.DQ = kernels.HostF32(bwNaNs(g.Layout.N * d.heads * d.dim))
	rl := d.kvHeads * d.dim
	var ks []int32
	var dk, dv []float32
	for i := range d.seqs {
		ks = append(ks, int32(len(dk)/rl))
		dk = append(dk, padded(dk0[i], 2*rl)...)
		dv = append(dv, padded(dv0[i], 2*rl)...)
	}
	ks = append(ks, int32(len(dk)/rl))
	g.DK, g.DV, g.KStart = kernels.HostF32(dk), kernels.HostF32(dv), kernels.HostI32(ks)
	if kv.bs == 0 {
		// The contiguous K and V must sit in the same rows as DK and DV
		// (one KStart places both).
		g.K, g.V = kernels.HostF32(d.rowsAt(ks, d.k)), kernels.HostF32(d.rowsAt(ks, d.v))
	}
	return g
}

// rowsAt lays per-sequence rows out at the row offsets ks (NaN between).
func (d *attnData) rowsAt(ks []int32, per [][]float32) []float32 {
	rl := d.kvHeads * d.dim
	out := make([]float32, int(ks[len(ks)-1])*rl)
	for i := range out {
		out[i] = nan
	}
	for i, p := range per {
		copy(out[int(ks[i])*rl:], p)
	}
	return out
}

// kvRows splits DK or DV of a gradBatch back into sequences (each its
// Start+T rows).
func (d *attnData) kvRows(g *kernels.AttentionGradBatch, buf []float32) [][]float32 {
	rl := d.kvHeads * d.dim
	ks := g.KStart.I32()
	out := make([][]float32, len(d.seqs))
	for i, s := range d.seqs {
		out[i] = buf[int(ks[i])*rl : (int(ks[i])+s.start+s.t)*rl]
	}
	return out
}
