package model_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/x/kernels"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

// Generate continues two prompts in one continuous batch, one greedily and
// one sampled with a seed, then appends a tool response to the first and
// continues it without recomputing its prefix.
func ExampleModel_Generate() {
	dir, err := os.MkdirTemp("", "qwen3-example-*")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, _ := model.NamedConfig("tiny")
	cfg.NumLayers = 1
	if err := model.WriteRandom(dir, cfg, kernels.BF16, 1, model.RandomOptions{}); err != nil {
		log.Fatal(err)
	}
	m, err := model.Load(dir, ref.Backend{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	ctx := context.Background()
	chat := model.NewSequence(1, 10, 11, 12)
	story := model.NewSequence(2, 20, 21)
	out, err := m.Generate(ctx, []model.Request{
		{Seq: chat, MaxNewTokens: 4},
		{Seq: story, MaxNewTokens: 6, Stop: m.Config.EOSTokenIDs, Sampling: kernels.SamplingParams{Temperature: 0.8, TopP: 0.95}},
	}, model.BatchOptions{MaxBatch: 8})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(out[0].Tokens), len(out[1].LogProbs), len(chat.Tokens))

	chat.Append(30, 31, 32) // a tool response
	next, err := m.Generate(ctx, []model.Request{{Seq: chat, MaxNewTokens: 2}}, model.BatchOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(next[0].Tokens), len(chat.Tokens), chat.Cache.Len)
	// Output:
	// 4 6 7
	// 2 12 11
}

// LogProbs scores the completion part of a sequence by teacher forcing.
func ExampleModel_LogProbs() {
	m, err := model.Load("testdata/tiny_tied_f32", ref.Backend{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	tokens := []int32{1, 2, 3, 4, 5}
	// Score tokens 3 and 4 (a Mask, if given, would count from Start too).
	res, err := m.LogProbs(context.Background(), []model.Scored{{Tokens: tokens, Start: 3}}, model.LogProbsOptions{Entropy: true})
	if err != nil {
		log.Fatal(err)
	}
	lp := res[0].LogProbs
	fmt.Println(lp[0] == 0, lp[3] < 0, lp[4] < 0, res[0].Entropy[4] > 0)
	// Output: true true true true
}
