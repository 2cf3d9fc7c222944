package kerneltest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// StepGraphs checks a backend's recorded steps (kernels.StepGrapher) and
// skips a backend without them. A step of a decode step's tail, lm_head
// (MatMul) then SampleRows with its parameters and uniforms in backend
// Buffers, is run through StepGraphs.Run on new inputs uploaded into the
// same Buffers each round: every round's ids and log-probs equal the same
// ops called directly, bit for bit, whether Run calls record directly,
// records it or replays it. Between two rounds the ids Buffer is
// reallocated (Free, then Alloc): Run must not replay a recording that
// writes the freed memory, so the ids read back stay right.
func StepGraphs(t *testing.T, b kernels.Backend) {
	gs := kernels.NewStepGraphs(b)
	if gs == nil {
		t.Skip("the backend does not record steps")
	}
	defer func() { require.NoError(t, gs.Close()) }()
	const rows, k, v = 3, 16, 40
	const pw, uw = kernels.SampleParamWords, kernels.SampleUniformWords
	alloc := func(dt kernels.DType, n int) kernels.Buffer {
		buf, err := b.Alloc(dt, n)
		require.NoError(t, err)
		return buf
	}
	w, err := b.Import(kernels.HostF32(uniform(newRNG("graph w"), v*k, 1)))
	require.NoError(t, err)
	defer b.Free(w)
	x, logits, args := alloc(kernels.F32, rows*k), alloc(kernels.F32, rows*v), alloc(kernels.I32, rows*(pw+uw))
	ids, lps := alloc(kernels.I32, rows), alloc(kernels.F32, 2*rows)
	sa := kernels.SampleArgs{Params: args.Slice(0, rows*pw), U: args.Slice(rows*pw, rows*(pw+uw))}
	wm := kernels.MatOf(w, v, k)
	step := func() error {
		b.MatMul(logits, x, wm, rows, false)
		b.SampleRows(ids, lps.Slice(0, rows), lps.Slice(rows, 2*rows), logits, sa, rows, v)
		return nil
	}
	params := []kernels.SamplingParams{{}, {Temperature: 0.9, TopK: 8}, {Temperature: 1.2, TopP: 0.8}}
	for round := range 6 {
		if round == 4 {
			b.Free(ids)
			keep := alloc(kernels.I32, rows) // likely the freed memory
			defer b.Free(keep)
			ids = alloc(kernels.I32, rows)
		}
		xs := uniform(newRNG(fmt.Sprint("graph x", round)), rows*k, 2)
		u := []float64{0.1 * float64(round), 0.5, 0.99 - 0.1*float64(round)}
		host := kernels.HostSampleArgs(params, u)
		words := append(append([]int32(nil), host.Params.I32()...), host.U.I32()...)
		require.NoError(t, b.Upload(x, kernels.HostF32(xs)))
		require.NoError(t, b.Upload(args, kernels.HostI32(words)))
		require.NoError(t, gs.Run("tail", step), "round %d", round)
		gotID, gotLP := make([]int32, rows), make([]float32, 2*rows)
		require.NoError(t, kernels.DownloadAll(b, kernels.Transfer{Dst: kernels.HostI32(gotID), Src: ids},
			kernels.Transfer{Dst: kernels.HostF32(gotLP), Src: lps}))

		// The same ops called directly, on Buffers of their own.
		dl, di, dlp := alloc(kernels.F32, rows*v), alloc(kernels.I32, rows), alloc(kernels.F32, 2*rows)
		b.MatMul(dl, x, wm, rows, false)
		b.SampleRows(di, dlp.Slice(0, rows), dlp.Slice(rows, 2*rows), dl, sa, rows, v)
		wantID, wantLP := make([]int32, rows), make([]float32, 2*rows)
		require.NoError(t, kernels.DownloadAll(b, kernels.Transfer{Dst: kernels.HostI32(wantID), Src: di},
			kernels.Transfer{Dst: kernels.HostF32(wantLP), Src: dlp}))
		b.Free(dl)
		b.Free(di)
		b.Free(dlp)
		require.Equal(t, wantID, gotID, "round %d: ids", round)
		CheckExact(t, fmt.Sprintf("round %d: log-probs", round), gotLP, wantLP)
	}
	require.NoError(t, b.Err())
}
