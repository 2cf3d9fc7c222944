package grpo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
)

// reportingBackend is a CPU backend that reports device memory figures,
// as kernels/cuda's Device does.
type reportingBackend struct {
	kernels.Backend
	st kernels.MemoryStats
}

func (r *reportingBackend) MemoryStats() kernels.MemoryStats { return r.st }

// TestMemoryMetrics: an optimizer step logs memory/* from a backend that
// reports its memory (GiB for the byte figures, counts as they are), and
// nothing from one that does not.
func TestMemoryMetrics(t *testing.T) {
	const gib = 1 << 30
	st := kernels.MemoryStats{Allocated: 3 * gib / 2, Reserved: 2 * gib, PeakAllocated: 5 * gib / 2, DeviceAllocs: 17, OOMRetries: 2}
	for _, c := range []struct {
		name string
		be   func(kernels.Backend) kernels.Backend
		want Metrics
	}{
		{"cpu", func(b kernels.Backend) kernels.Backend { return b }, nil},
		{"device", func(b kernels.Backend) kernels.Backend { return &reportingBackend{Backend: b, st: st} }, Metrics{
			MetricMemoryAllocated: 1.5, MetricMemoryReserved: 2, MetricMemoryPeak: 2.5, MetricMemoryDeviceAllocs: 17, MetricMemoryOOMRetries: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := model.NamedConfig("tiny")
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, model.WriteRandom(dir, cfg, kernels.F32, 1, model.RandomOptions{}))
			be := cpu.New(1)
			defer be.Close()
			m, err := model.Load(dir, c.be(be))
			require.NoError(t, err)
			defer m.Close()
			p, err := newPolicy(m, &model.LoRAConfig{R: 2, Alpha: 4}, 1, 1, model.DefaultAdamWConfig(1e-3), false, 0)
			require.NoError(t, err)
			defer p.close()
			got := Metrics{}
			require.NoError(t, p.step(got, 0))
			for _, k := range []string{MetricMemoryAllocated, MetricMemoryReserved, MetricMemoryPeak, MetricMemoryDeviceAllocs, MetricMemoryOOMRetries} {
				want, ok := c.want[k]
				if !ok {
					assert.NotContains(t, got, k)
					continue
				}
				assert.Equal(t, want, got[k], k)
			}
		})
	}
}
