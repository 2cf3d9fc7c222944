package main

import (
	"fmt"
	"strings"

	"github.com/x/kernels"
	"github.com/x/model"
)

// setKV selects the KV storage named by -kv and returns a function that
// reports the bytes of the Model's KV pool.
func setKV(m *model.Model, name string) (func() int64, error) {
	var dt kernels.DType
	switch strings.ToLower(name) {
	case "f32":
		dt = kernels.F32
	case "bf16":
		dt = kernels.BF16
	default:
		return nil, fmt.Errorf("-kv %q: want f32 or bf16", name)
	}
	if err := m.SetKVOptions(model.KVOptions{DType: dt}); err != nil {
		return nil, err
	}
	return func() int64 { return m.KVStats().Bytes }, nil
}

// releaseAll returns the KV blocks of the rollout sequences to the pool.
func releaseAll(roots []*model.Sequence, reqs []model.Request) {
	for _, r := range roots {
		r.Release()
	}
	for _, r := range reqs {
		r.Seq.Release()
	}
}
