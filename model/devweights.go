package model

import (
	"fmt"
	"unsafe"

	"github.com/x/kernels"
)

// The weights in the backend's memory. Model keeps its weights as host
// memory in its public fields (memory-mapped Mats, norm vectors and LoRA
// matrices as slices), which is what loading, saving, merging and the
// training optimizer read and write; every op reads them through
// Backend.Import, once per weight, so that a device backend copies each
// weight to its memory once, not per op. The CPU backends' Import returns
// the host memory itself, so there the two are one memory and an update
// of a host weight (an optimizer step, a loaded adapter) is seen at once.
// A device backend would not see an in-place update of a weight it has
// already imported; training keeps its parameters on the host today (see
// DESIGN.md, "What lives where").

// devKey identifies one host weight: its first element, length and dtype.
type devKey struct {
	p  unsafe.Pointer
	n  int
	dt kernels.DType
}

// devBuf returns b in the backend's memory: b itself when it already is
// (a device Buffer, or empty), else the Import of b, made on first use and
// kept. It panics if Import fails, naming the weight (ImportWeights
// returns that failure as an error instead; Load calls it).
func (m *Model) devBuf(b kernels.Buffer) kernels.Buffer {
	if !b.Host() || b.Len() == 0 {
		return b
	}
	k := devKey{b.HostPtr(), b.Len(), b.DType()}
	if d, ok := m.imported[k]; ok {
		return d
	}
	d, err := m.importBuf(k, b)
	if err != nil {
		panic(fmt.Sprintf("model: %v", err))
	}
	return d
}

// importBuf imports b (key k) and remembers the result.
func (m *Model) importBuf(k devKey, b kernels.Buffer) (kernels.Buffer, error) {
	d, err := m.Backend.Import(b)
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("importing a weight %v into the backend: %w", b, err)
	}
	if m.imported == nil {
		m.imported = map[devKey]kernels.Buffer{}
	}
	m.imported[k] = d
	return d, nil
}

// devVec is devBuf of a host F32 vector (the norm weights).
func (m *Model) devVec(s []float32) kernels.Buffer { return m.devBuf(kernels.HostF32(s)) }

// devMat is w with its data in the backend's memory (see devBuf).
func (m *Model) devMat(w kernels.Mat) kernels.Mat {
	w.Data = m.devBuf(w.Data)
	return w
}

// ImportWeights makes every weight of m available to its Backend
// (Backend.Import, once per weight; see devBuf): the embedding, lm_head,
// every projection, every norm and every attached LoRA adapter. Load calls
// it; the ops import anything added later (an adapter, a random model's
// weights) on first use, and this returns their failure as an error where
// the ops would panic.
func (m *Model) ImportWeights() error {
	bufs := []kernels.Buffer{m.Embed.Data, m.LMHead.Data, kernels.HostF32(m.Norm)}
	for li := range m.Layers {
		L := &m.Layers[li]
		for _, v := range [][]float32{L.AttnNorm, L.MLPNorm, L.Attn.QNorm, L.Attn.KNorm} {
			bufs = append(bufs, kernels.HostF32(v))
		}
		for _, nl := range L.Linears() {
			bufs = append(bufs, nl.Linear.W.Data)
			if a, b, ok := loraHost(nl.Linear); ok {
				bufs = append(bufs, a, b)
			}
		}
	}
	for _, b := range bufs {
		if !b.Host() || b.Len() == 0 {
			continue
		}
		k := devKey{b.HostPtr(), b.Len(), b.DType()}
		if _, ok := m.imported[k]; ok {
			continue
		}
		if _, err := m.importBuf(k, b); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}

// loraHost is lin's adapter's A [R, In] and B [Out, R] as host Buffers,
// the views the ops import (ok false without an adapter or when A or B is
// too short, which linearForward reports).
func loraHost(lin *Linear) (a, b kernels.Buffer, ok bool) {
	l := lin.LoRA
	if l == nil || len(l.A) < l.R*lin.In() || len(l.B) < lin.Out()*l.R {
		return kernels.Buffer{}, kernels.Buffer{}, false
	}
	return kernels.HostF32(l.A[:l.R*lin.In()]), kernels.HostF32(l.B[:lin.Out()*l.R]), true
}

// forget drops the imports of the host Buffers bs, returning the
// backend's copies (Backend.Free): a weight about to be replaced (an
// adapter detached or reloaded, a weight merged), so that the import
// table neither keeps the old memory alive nor a device copy allocated.
func (m *Model) forget(bs ...kernels.Buffer) {
	for _, b := range bs {
		if !b.Host() || b.Len() == 0 {
			continue
		}
		k := devKey{b.HostPtr(), b.Len(), b.DType()}
		if d, ok := m.imported[k]; ok {
			m.Backend.Free(d)
			delete(m.imported, k)
		}
	}
}

// forgetLinear forgets lin's adapter (before it is replaced or removed)
// and, with w set, its weight.
func (m *Model) forgetLinear(lin *Linear, w bool) {
	if a, b, ok := loraHost(lin); ok {
		m.forget(a, b)
	}
	if w {
		m.forget(lin.W.Data)
	}
}
