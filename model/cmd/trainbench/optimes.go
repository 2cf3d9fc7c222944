package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/x/kernels"
)

// timedBackend wraps a Backend and adds up the wall time of its heavy ops,
// keyed by op and shape, to show where a training step spends its time.
type timedBackend struct {
	kernels.Backend
	total map[string]time.Duration
	calls map[string]int
}

func newTimedBackend(b kernels.Backend) *timedBackend {
	return &timedBackend{Backend: b, total: map[string]time.Duration{}, calls: map[string]int{}}
}

func (t *timedBackend) since(key string, start time.Time) {
	t.total[key] += time.Since(start)
	t.calls[key]++
}

func (t *timedBackend) MatMul(out, x kernels.Buffer, w kernels.Mat, m int, acc bool) {
	defer t.since(fmt.Sprintf("MatMul   M=%d N=%d K=%d", m, w.Rows, w.Cols), time.Now())
	t.Backend.MatMul(out, x, w, m, acc)
}

func (t *timedBackend) MatMulNN(out, dy kernels.Buffer, w kernels.Mat, m int, acc bool) {
	defer t.since(fmt.Sprintf("MatMulNN M=%d N=%d K=%d", m, w.Rows, w.Cols), time.Now())
	t.Backend.MatMulNN(out, dy, w, m, acc)
}

func (t *timedBackend) MatMulTN(dw, dy, x kernels.Buffer, m, n, k int) {
	defer t.since(fmt.Sprintf("MatMulTN M=%d N=%d K=%d", m, n, k), time.Now())
	t.Backend.MatMulTN(dw, dy, x, m, n, k)
}

func (t *timedBackend) Attention(a kernels.AttentionBatch, h, kvh, d int, scale float32) {
	defer t.since("Attention", time.Now())
	t.Backend.Attention(a, h, kvh, d, scale)
}

func (t *timedBackend) AttentionBackward(g kernels.AttentionGradBatch, h, kvh, d int, scale float32) {
	defer t.since("AttentionBackward", time.Now())
	t.Backend.AttentionBackward(g, h, kvh, d, scale)
}

func (t *timedBackend) WriteKV(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvh, d int) {
	defer t.since("WriteKV", time.Now())
	t.Backend.WriteKV(kv, l, k, v, kvh, d)
}

// WriteKVRoPE and AddRMSNorm keep the wrapped backend's fused ops (the
// embedded interface would hide them).
func (t *timedBackend) WriteKVRoPE(kv kernels.PagedKV, l kernels.BatchLayout, k, v kernels.Buffer, kvh, d int, theta float64) {
	defer t.since("WriteKVRoPE", time.Now())
	kernels.WriteKVRoPE(t.Backend, kv, l, k, v, kvh, d, theta)
}

func (t *timedBackend) AddRMSNorm(out, x, res, w kernels.Buffer, rows, cols int, eps float32) {
	defer t.since("AddRMSNorm", time.Now())
	kernels.AddRMSNorm(t.Backend, out, x, res, w, rows, cols, eps)
}

func (t *timedBackend) RMSNorm(out, x, w kernels.Buffer, rows, cols int, eps float32) {
	defer t.since("RMSNorm", time.Now())
	t.Backend.RMSNorm(out, x, w, rows, cols, eps)
}

func (t *timedBackend) RMSNormBackward(dx, dw, dout, x, w kernels.Buffer, rows, cols int, eps float32) {
	defer t.since("RMSNormBackward", time.Now())
	t.Backend.RMSNormBackward(dx, dw, dout, x, w, rows, cols, eps)
}

func (t *timedBackend) SwiGLU(out, gate, up kernels.Buffer) {
	defer t.since("SwiGLU", time.Now())
	t.Backend.SwiGLU(out, gate, up)
}

func (t *timedBackend) SwiGLUBackward(dg, du, dout, gate, up kernels.Buffer) {
	defer t.since("SwiGLUBackward", time.Now())
	t.Backend.SwiGLUBackward(dg, du, dout, gate, up)
}

func (t *timedBackend) Add(dst, src kernels.Buffer) {
	defer t.since("Add", time.Now())
	t.Backend.Add(dst, src)
}

func (t *timedBackend) RoPE(x, pos kernels.Buffer, h, d int, theta float64) {
	defer t.since("RoPE", time.Now())
	t.Backend.RoPE(x, pos, h, d, theta)
}

func (t *timedBackend) RoPEBackward(dx, pos kernels.Buffer, h, d int, theta float64) {
	defer t.since("RoPEBackward", time.Now())
	t.Backend.RoPEBackward(dx, pos, h, d, theta)
}

func (t *timedBackend) LogSoftmaxGather(lp, ent, logits, tgt kernels.Buffer, rows, v int) {
	defer t.since("LogSoftmaxGather", time.Now())
	t.Backend.LogSoftmaxGather(lp, ent, logits, tgt, rows, v)
}

func (t *timedBackend) LogSoftmaxGatherBackward(dl, logits, tgt, dlp, dent kernels.Buffer, rows, v int) {
	defer t.since("LogSoftmaxGatherBackward", time.Now())
	t.Backend.LogSoftmaxGatherBackward(dl, logits, tgt, dlp, dent, rows, v)
}

func (t *timedBackend) PolicyLoss(out kernels.LossOutput, in kernels.LossInput, p kernels.LossParams, n int) {
	defer t.since("PolicyLoss", time.Now())
	t.Backend.PolicyLoss(out, in, p, n)
}

// report prints the ops by total time, largest first.
func (t *timedBackend) report(w io.Writer, steps int) {
	keys := make([]string, 0, len(t.total))
	var sum time.Duration
	for k, d := range t.total {
		keys = append(keys, k)
		sum += d
	}
	slices.SortFunc(keys, func(a, b string) int { return int(t.total[b] - t.total[a]) })
	fmt.Fprintf(w, "op times per step (timed ops total %.3f s):\n", sum.Seconds()/float64(steps))
	for _, k := range keys {
		fmt.Fprintf(w, "  %-40s %8.3f s %6d calls\n", k, t.total[k].Seconds()/float64(steps), t.calls[k]/steps)
	}
}
