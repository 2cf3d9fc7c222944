package model

import "github.com/x/kernels"

// frozenBF16 returns a copy of m's weights as a separate Model for the KL
// reference policy of Full fine-tuning: bf16 matrices are shared (Full
// training replaces m's matrices by float32 masters and never writes the
// originals), others are rounded to bf16; norm vectors are shared for the
// same reason (Full training clones them before it trains them).
func frozenBF16(m *Model) *Model {
	ref := &Model{Config: m.Config, Backend: m.Backend, Norm: m.Norm, DType: kernels.BF16, Layers: make([]Layer, len(m.Layers))}
	ref.Embed = toBF16(m.Embed)
	if m.Config.TieWordEmbeddings {
		ref.LMHead = ref.Embed
	} else {
		ref.LMHead = toBF16(m.LMHead)
	}
	for li := range m.Layers {
		l := m.Layers[li] // a copy of the struct: slices shared, Linears replaced below
		for _, nl := range l.Linears() {
			nl.Linear.W = toBF16(nl.Linear.W)
			nl.Linear.LoRA = nil
		}
		ref.Layers[li] = l
	}
	return ref
}

// toBF16 returns w in bf16: w itself when it is bf16 already, else a
// rounded copy.
func toBF16(w kernels.Mat) kernels.Mat {
	if w.DType == kernels.BF16 {
		return w
	}
	out := kernels.NewHostMat(kernels.BF16, w.Rows, w.Cols)
	row := make([]float32, w.Cols)
	for i := range w.Rows {
		w.Row(row, i)
		for j, x := range row {
			out.U16()[i*w.Cols+j] = kernels.F32ToBF16(x)
		}
	}
	return out
}
