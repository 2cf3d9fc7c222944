package model

import (
	"fmt"
	"unsafe"

	"github.com/x/kernels"
)

// The weights in the backend's memory. Model keeps its weights as host
// memory in its public fields (memory-mapped Mats, norm vectors and LoRA
// matrices as slices), which is what loading, saving and merging read and
// write; every op reads them through Backend.Import, once per weight, so
// that a device backend copies each weight to its memory once, not per
// op. The CPU backends' Import returns the host memory itself, so there
// the two are one memory.
//
// Trained weights (a Trainable's parameters: the adapters' A and B, or in
// Full mode the float32 masters and norm weights) are the exception to
// "host first": their Param.Data is the import, which AdamW updates in
// place and the forward reads, so during training the backend's copy is
// authoritative and the host field may be stale on a device. Host readers
// (SaveAdapter, SaveCheckpoint, WriteGGUF, MergeLoRA, NewTrainable, grpo's
// checkpoints) call Model.DownloadParams first, which brings each trained
// weight back with one Backend.Download, or does nothing where the import
// is the host memory itself (a CPU backend). Writers of a trained weight
// (grpo's resume) Upload into Param.Data. A write to a host field after
// the weight was imported is not seen by the backend: replace the weight
// (attach or load the adapter again) instead.

// devKey identifies one host weight: its first element, length and dtype.
type devKey struct {
	p  unsafe.Pointer
	n  int
	dt kernels.DType
}

// devWeight is one host weight and its import.
type devWeight struct {
	buf  kernels.Buffer // the Import: the backend's copy (the host memory itself on a CPU backend)
	host kernels.Buffer // the host weight it was imported from
	// trained marks a Trainable's parameter: buf is authoritative and
	// DownloadParams refreshes host from it.
	trained bool
}

// aliased reports whether the import is the host memory itself (a CPU
// backend), so the two cannot differ.
func (w devWeight) aliased() bool {
	return w.buf.Host() && w.buf.HostPtr() == w.host.HostPtr()
}

// keyOf is b's key in the import table.
func keyOf(b kernels.Buffer) devKey { return devKey{b.HostPtr(), b.Len(), b.DType()} }

// devBuf returns b in the backend's memory: b itself when it already is
// (a device Buffer, or empty), the snapshot's copy when b is an adapter
// matrix and an AdapterSnapshot is in use (UseAdapters), else the Import
// of b, made on first use and kept. It panics if Import fails, naming the weight (ImportWeights
// returns that failure as an error instead; Load calls it).
func (m *Model) devBuf(b kernels.Buffer) kernels.Buffer {
	if !b.Host() || b.Len() == 0 {
		return b
	}
	if s := m.adapters; s != nil {
		if d, ok := s.copies[keyOf(b)]; ok {
			return d
		}
	}
	if d, ok := m.imported[keyOf(b)]; ok {
		return d.buf
	}
	d, err := m.importBuf(b)
	if err != nil {
		panic(fmt.Sprintf("model: %v", err))
	}
	return d
}

// importBuf imports the host Buffer b and remembers the result.
func (m *Model) importBuf(b kernels.Buffer) (kernels.Buffer, error) {
	d, err := m.Backend.Import(b)
	if err != nil {
		return kernels.Buffer{}, fmt.Errorf("importing a weight %v into the backend: %w", b, err)
	}
	if m.imported == nil {
		m.imported = map[devKey]devWeight{}
	}
	m.imported[keyOf(b)] = devWeight{buf: d, host: b}
	return d, nil
}

// paramBuf returns the import of the host weight b (importing it if
// needed) and marks it trained: from now on the backend's copy is the
// authoritative value (see DownloadParams). It is a Trainable's
// Param.Data.
func (m *Model) paramBuf(b kernels.Buffer) (kernels.Buffer, error) {
	if !b.Host() || b.Len() == 0 || b.DType() != kernels.F32 {
		return kernels.Buffer{}, fmt.Errorf("model: a trained weight must be a non-empty host F32 Buffer, got %v", b)
	}
	k := keyOf(b)
	if _, ok := m.imported[k]; !ok {
		if _, err := m.importBuf(b); err != nil {
			return kernels.Buffer{}, fmt.Errorf("model: %w", err)
		}
	}
	w := m.imported[k]
	w.trained = true
	m.imported[k] = w
	return w.buf, nil
}

// DownloadParams brings the values of every trained weight (a
// Trainable's parameters, which AdamW updates in the backend's memory)
// back into m's host fields: LoRA.A and LoRA.B, and after full
// fine-tuning the float32 masters and norm weights. Each costs one
// Backend.Download on a device and nothing on a CPU backend, whose imports
// are the host memory itself. SaveAdapter, SaveCheckpoint, WriteGGUF,
// MergeLoRA and NewTrainable call it; call it before reading those fields
// directly after training.
func (m *Model) DownloadParams() error {
	for _, w := range m.imported {
		if !w.trained || w.aliased() {
			continue
		}
		if err := m.Backend.Download(w.host, w.buf); err != nil {
			return fmt.Errorf("model: downloading a trained weight %v: %w", w.host, err)
		}
	}
	return nil
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
	for _, b := range m.weightBufs() {
		if !b.Host() || b.Len() == 0 {
			continue
		}
		if _, ok := m.imported[keyOf(b)]; ok {
			continue
		}
		if _, err := m.importBuf(b); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}

// weightBufs is every weight of m as the Buffer the ops import.
func (m *Model) weightBufs() []kernels.Buffer {
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
	return bufs
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

// loraDev is lin's adapter's A [R, In] and B [Out, R] in the backend's
// memory (see devBuf); lin must carry an adapter that fits (loraHost).
func (m *Model) loraDev(lin *Linear) (a, b kernels.Mat) {
	aH, bH, ok := loraHost(lin)
	l := lin.LoRA
	if !ok {
		panic(fmt.Sprintf("model: LoRA r=%d does not fit A %d, B %d for W [%d,%d]", l.R, len(l.A), len(l.B), lin.Out(), lin.In()))
	}
	return kernels.MatOf(m.devBuf(aH), l.R, lin.In()), kernels.MatOf(m.devBuf(bH), lin.Out(), l.R)
}

// forget drops the imports of the host Buffers bs, returning the
// backend's copies (Backend.Free): a weight about to be replaced (an
// adapter detached or reloaded, a weight merged), so that the import
// table neither keeps the old memory alive nor a device copy allocated.
// A trained weight's values not yet downloaded (DownloadParams) are
// dropped with it.
func (m *Model) forget(bs ...kernels.Buffer) {
	for _, b := range bs {
		if !b.Host() || b.Len() == 0 {
			continue
		}
		k := keyOf(b)
		if d, ok := m.imported[k]; ok {
			m.freeImport(d)
			delete(m.imported, k)
		}
	}
}

// freeImport gives an import's backend copy back; an import that is the
// host memory itself is the caller's, so Free is still called (a counting
// wrapper records it) but frees nothing on a host backend.
func (m *Model) freeImport(d devWeight) { m.Backend.Free(d.buf) }

// releaseImports frees every import (Model.Close, and the reference model
// of a Trainable when it closes).
func (m *Model) releaseImports() {
	for k, d := range m.imported {
		m.freeImport(d)
		delete(m.imported, k)
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
