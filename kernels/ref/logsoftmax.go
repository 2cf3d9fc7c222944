package ref

import (
	"math"

	"github.com/x/kernels"
)

// LogSoftmaxGather: logp[r] = log_softmax(logits[r])[targets[r]] for each
// row of logits[R,V]; entropy[r] = −Σ p·log p when entropy is not nil.
// Two passes per row in float64.
func (Backend) LogSoftmaxGather(logp, entropy, logits, targets kernels.Buffer, rows, v int) {
	kernels.CheckLogSoftmaxGather(logp, entropy, logits, targets, rows, v)
	logSoftmaxGather(logp.F32(), opt(entropy), logits.F32(), targets.I32(), rows, v)
}

// logSoftmaxGather is LogSoftmaxGather on host slices (entropy nil: none).
func logSoftmaxGather(logp, entropy, logits []float32, targets []int32, rows, v int) {
	for r := 0; r < rows; r++ {
		row := logits[r*v : (r+1)*v]
		tg := targets[r]
		lse := logSumExp(row)
		logp[r] = logProbFromLSE(row, tg, lse)
		if entropy != nil {
			var h float64
			for _, x := range row {
				lp := float64(x) - lse
				if p := math.Exp(lp); p > 0 {
					h -= p * lp
				}
			}
			entropy[r] = float32(h)
		}
	}
}

// logProbOf is log_softmax(row)[id] as logSoftmaxGather computes it.
func logProbOf(row []float32, id int32) float32 { return logProbFromLSE(row, id, logSumExp(row)) }

// logProbFromLSE is row[id] − lse in float64, rounded once.
func logProbFromLSE(row []float32, id int32, lse float64) float32 {
	return float32(float64(row[id]) - lse)
}

// logSumExp is log Σ exp(row) in float64, shifted by the row's maximum.
func logSumExp(row []float32) float64 {
	mx := math.Inf(-1)
	for _, x := range row {
		mx = math.Max(mx, float64(x))
	}
	var sum float64
	for _, x := range row {
		sum += math.Exp(float64(x) - mx)
	}
	return mx + math.Log(sum)
}
