package model_test

import (
	"context"
	"fmt"
	"log"

	"github.com/x/kernels/ref"
	"github.com/x/model"
)

// ExampleNewTrainable shows one GRPO-style step with LoRA: reference
// log-probs with the adapters off, a forward with saved activations, the
// loss's per-token weights d loss / d logp, a backward and an AdamW step.
func ExampleNewTrainable() {
	ctx := context.Background()
	m, err := model.Load("testdata/tiny_tied_f32", ref.Backend{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	lora := model.LoRAConfig{R: 4, Alpha: 8}
	if err := model.AttachLoRA(m, lora, 42); err != nil {
		log.Fatal(err)
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{Checkpoint: true})
	if err != nil {
		log.Fatal(err)
	}
	opt, err := model.NewAdamW(m.Backend, tr.Params(), model.DefaultAdamWConfig(1e-3))
	if err != nil {
		log.Fatal(err)
	}
	// Prompt of 3 tokens, completion of 4; the third completion token is a
	// tool response and takes no loss.
	seqs := []model.TrainSeq{{IDs: []int32{5, 17, 99, 3, 250, 7, 42}, Start: 3, Mask: []bool{true, true, false, true}}}
	refLogp, _, err := tr.LogProbs(ctx, seqs, false) // KL reference: adapters off
	if err != nil {
		log.Fatal(err)
	}
	logp, _, err := tr.Forward(ctx, seqs)
	if err != nil {
		log.Fatal(err)
	}
	advantage := float32(1.5)
	dlogp := [][]float32{make([]float32, len(logp[0]))}
	for i := range dlogp[0] {
		dlogp[0][i] = -advantage / 3 // loss = −A·mean(logp) over the 3 scored tokens
	}
	if err := tr.Backward(ctx, dlogp); err != nil {
		log.Fatal(err)
	}
	st, err := opt.Step()
	if err != nil {
		log.Fatal(err)
	}
	tr.ZeroGrad()
	fmt.Println("trainable tensors:", len(tr.Params()))
	fmt.Println("fresh adapter equals reference:", logp[0][0] == refLogp[0][0])
	fmt.Println("optimizer step:", st.Step, "gradient non-zero:", st.GradNorm > 0)
	// Output:
	// trainable tensors: 28
	// fresh adapter equals reference: true
	// optimizer step: 1 gradient non-zero: true
}
