package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/device"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

// TestRun: on a random checkpoint and an adapter saved from it, hfcheck
// writes the base and adapter logits (equal to model.Logits' on the
// reference backend within the model tests' bound) and re-saves the
// adapter, which loads back to the same logits.
func TestRun(t *testing.T) {
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	dir, adapter, out := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.BF16, 3, model.RandomOptions{Std: 0.05}))
	m, err := model.Load(dir, ref.Backend{})
	require.NoError(t, err)
	defer m.Close()
	lcfg := model.LoRAConfig{R: 2, Alpha: 4}
	require.NoError(t, model.AttachLoRA(m, lcfg, 5))
	for li := range m.Layers { // non-zero B, so the adapter changes the logits
		for _, nl := range m.Layers[li].Linears() {
			for i := range nl.Linear.LoRA.B {
				nl.Linear.LoRA.B[i] = 0.01 * float32(i%7-3)
			}
		}
	}
	require.NoError(t, model.SaveAdapter(adapter, m, lcfg, dir))
	ids := []int32{1, 5, 9, 300}
	want, err := m.Logits(ids, model.Options{})
	require.NoError(t, err)

	var log bytes.Buffer
	require.NoError(t, run([]string{"-model", dir, "-tokens", "1,5,9,300", "-out", out, "-adapter", adapter}, &log))
	assert.Contains(t, log.String(), "cpu: adapter logits (r 2")
	got := readF32(t, filepath.Join(out, "cpu_lora.f32"))
	require.Len(t, got, len(want))
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-4, "logit %d", i)
	}
	assert.Len(t, readF32(t, filepath.Join(out, "cpu_base.f32")), len(want))
	_, err = model.LoadAdapter(filepath.Join(out, "resaved_adapter"), m)
	require.NoError(t, err)
	again, err := m.Logits(ids, model.Options{})
	require.NoError(t, err)
	assert.Equal(t, want, again, "the re-saved adapter is the loaded one")
}

// TestBadArgs: missing flags, bad token ids and unknown devices are
// errors; "cuda" without the tag says how to build.
func TestBadArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-model", "x"}, "required"},
		{[]string{"-model", "x", "-out", "y", "-tokens", "1,a"}, `-tokens: "a"`},
		{[]string{"-model", "x", "-out", "y", "-tokens", "1", "-devices", "gpu"}, `-devices: device "gpu"`},
	} {
		assert.ErrorContains(t, run(tc.args, &bytes.Buffer{}), tc.want, "%q", tc.args)
	}
	if !device.CUDAEnabled {
		dir := t.TempDir()
		cfg, err := model.NamedConfig("tiny")
		require.NoError(t, err)
		require.NoError(t, model.WriteRandom(dir, cfg, kernels.F32, 1, model.RandomOptions{}))
		err = run([]string{"-model", dir, "-out", t.TempDir(), "-tokens", "1", "-devices", "cpu,cuda"}, &bytes.Buffer{})
		assert.ErrorIs(t, err, device.ErrNoCUDA)
	}
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
