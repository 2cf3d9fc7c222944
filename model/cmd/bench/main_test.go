package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cpu"
)

func TestRunRandomTinyJSON(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-random", "tiny", "-dtype", "f16", "-threads", "1,2", "-p", "8", "-n", "3", "-b", "1,2", "-d", "2", "-lp", "5", "-r", "2", "-json"}, &out, io.Discard)
	require.NoError(t, err)
	var got []Result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Result
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		got = append(got, r)
	}
	require.Len(t, got, 10, "per thread count: pp8, tg3 and lp5 at B=1 and B=2")
	for _, r := range got {
		assert.Equal(t, "F16", r.DType)
		assert.Equal(t, "tiny", r.Shape)
		assert.Len(t, r.SamplesTS, 2)
		assert.Positive(t, r.AvgTS)
		assert.Positive(t, r.GoSysMiB)
		assert.Equal(t, int64(1312128), r.Params)
	}
	assert.Equal(t, "pp8", got[0].Test)
	assert.Equal(t, 1, got[0].Threads)
	assert.Equal(t, "tg3", got[2].Test)
	assert.Equal(t, 2, got[2].Batch)
	assert.Equal(t, 2, got[2].NDepth)
	assert.Equal(t, "lp5", got[4].Test)
	assert.Equal(t, 2, got[4].Batch)
	assert.Equal(t, 2, got[5].Threads)
}

func TestRunSampledDecodeJSON(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-random", "tiny", "-threads", "1", "-p", "0", "-n", "3", "-b", "2", "-temp", "1", "-r", "1", "-json"}, &out, io.Discard)
	require.NoError(t, err)
	var r Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
	assert.Equal(t, "tg3@T1", r.Test)
	assert.Equal(t, 1.0, r.Temp)
	assert.Equal(t, 2, r.Batch)
	assert.Positive(t, r.AvgTS)
}

func TestRunMatMulPrecisionJSON(t *testing.T) {
	for _, p := range []string{"exact", "bf16"} {
		var out bytes.Buffer
		err := run(t.Context(), []string{"-random", "tiny", "-threads", "1", "-p", "8", "-n", "0", "-matmul", p, "-r", "1", "-json"}, &out, io.Discard)
		require.NoError(t, err)
		var r Result
		require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
		assert.Equal(t, p, r.MatMul)
		be := cpu.New(1)
		assert.Equal(t, p == "bf16" && be.BF16Dot(), r.BF16Dot, "vdpbf16ps reported as this CPU runs it")
		be.Close()
		assert.Equal(t, "pp8", r.Test)
		assert.Positive(t, r.AvgTS)
	}
}

func TestRunRolloutsJSON(t *testing.T) {
	for _, kv := range []string{"f32", "bf16"} {
		var out bytes.Buffer
		err := run(t.Context(), []string{"-random", "tiny", "-dtype", "f32", "-threads", "1", "-p", "0", "-n", "0",
			"-rollouts", "4", "-groups", "2", "-rp", "5", "-rn", "3", "-kv", kv, "-r", "1", "-json"}, &out, io.Discard)
		require.NoError(t, err)
		var r Result
		require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
		assert.Equal(t, "rollouts4/2:"+kv, r.Test)
		assert.Equal(t, 4, r.Batch)
		assert.Positive(t, r.AvgTS)
		// Two prompts of 5 tokens share one block each; every rollout adds
		// one block (64 positions) of its own: at most 2 + 4 blocks.
		size := 4.0
		if kv == "bf16" {
			size = 2
		}
		block := 64 * 2 * 4 * 2 * 32 * size / (1 << 20) // positions · K,V · layers · KVH·D · bytes
		assert.LessOrEqual(t, r.KVMiB, 6*block)
		assert.GreaterOrEqual(t, r.KVMiB, 4*block)
	}
}

func TestRunFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-model", "x", "-random", "tiny"},
		{"-random", "tiny", "-dtype", "q4"},
		{"-random", "tiny", "-b", "0"},
		{"-random", "tiny", "-p", "x"},
		{"-random", "tiny", "-r", "0"},
		{"-random", "tiny", "-temp", "-1"},
		{"-random", "tiny", "-temp", "NaN"},
		{"-random", "gpt2"},
		{"-random", "tiny", "-kv", "q8", "-p", "0", "-n", "0"},
		{"-random", "tiny", "-matmul", "fp8", "-p", "0", "-n", "0"},
		{"-random", "tiny", "-rollouts", "5", "-groups", "2"},
		{"-model", "/nonexistent"},
	} {
		err := run(t.Context(), args, io.Discard, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}
