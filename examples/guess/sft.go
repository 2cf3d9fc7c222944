package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/model"
	"github.com/x/tokenizer"
	"github.com/x/tools"
)

// expertGame plays one game by binary search and returns its tokens exactly
// as a rollout would hold them: the prompt, then each assistant turn, then
// the tool-response tokens, ..., with only the assistant turns scored.
func (p *player) expertGame(ctx context.Context, seed int64) (model.TrainSeq, error) {
	e := guess.NewEnv(p.rules, nil)
	set, err := tools.Discover(e)
	if err != nil {
		return model.TrainSeq{}, err
	}
	intro, err := e.Reset(ctx, env.Row{"seed": seed})
	if err != nil {
		return model.TrainSeq{}, err
	}
	msgs := []tokenizer.Message{{Role: "user", Content: intro}}
	ids, err := p.promptIDs(intro)
	if err != nil {
		return model.TrainSeq{}, err
	}
	start := len(ids)
	var mask []bool
	lo, hi := 1, e.Game.Rules.Max
	for {
		var turn tokenizer.Message
		var args json.RawMessage
		if e.Game.Found {
			turn = tokenizer.Message{Role: "assistant", Content: fmt.Sprintf("Found it: the number is %d.", e.Game.Target)}
		} else {
			args = json.RawMessage(fmt.Sprintf(`{"number": %d}`, (lo+hi)/2))
			turn = tokenizer.Message{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Name: "guess", Arguments: args}}}
		}
		msgs = append(msgs, turn)
		full, err := p.chat.RenderIDs(msgs, p.opts)
		if err != nil {
			return model.TrainSeq{}, err
		}
		completion, err := completionIDs(ids, full, p.stop[0])
		if err != nil {
			return model.TrainSeq{}, err
		}
		ids = append(ids, completion...)
		mask = append(mask, slices.Repeat([]bool{true}, len(completion))...)
		if args == nil {
			break
		}

		mid := (lo + hi) / 2
		resp, err := set.Call(ctx, "guess", args)
		if err != nil {
			return model.TrainSeq{}, fmt.Errorf("expert guess %d: %w", mid, err)
		}
		if e.Game.Target > mid {
			lo = mid + 1
		} else {
			hi = mid - 1
		}
		reply := tokenizer.Message{Role: "tool", Name: "guess", Content: resp}
		msgs = append(msgs, reply)
		suffix, err := p.chat.ToolSuffixIDs([]tokenizer.Message{reply}, p.opts)
		if err != nil {
			return model.TrainSeq{}, err
		}
		ids = append(ids, suffix...)
		mask = append(mask, make([]bool, len(suffix))...)
		if e.Game.Done() && !e.Game.Found {
			return model.TrainSeq{}, fmt.Errorf("expert lost game %d (target %d)", seed, e.Game.Target)
		}
	}
	return model.TrainSeq{IDs: ids, Start: start, Mask: mask}, nil
}

// completionIDs returns what the model would have generated for the last
// assistant turn of full: the tokens after prefix, up to and including the
// turn's end token. It checks that the template kept prefix intact, which
// is what makes a rollout's tokens the rendering of its conversation.
func completionIDs(prefix, full []int32, end int32) ([]int32, error) {
	if len(full) < len(prefix) || !slices.Equal(full[:len(prefix)], prefix) {
		return nil, fmt.Errorf("the chat template did not keep the %d-token prefix", len(prefix))
	}
	rest := full[len(prefix):]
	i := slices.Index(rest, end)
	if i < 0 {
		return nil, fmt.Errorf("the assistant turn has no end token")
	}
	return rest[:i+1], nil
}

// finetune trains every weight of the model on expert games with AdamW and
// a cosine schedule, minimising the mean negative log-likelihood of the
// assistant tokens.
func (p *player) finetune(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.Steps == 0 {
		return nil
	}
	tr, err := model.NewTrainable(p.model, model.TrainOptions{Full: true})
	if err != nil {
		return err
	}
	acfg := model.DefaultAdamWConfig(cfg.LR)
	acfg.Schedule = model.Schedule{Kind: model.ScheduleCosine, LR: cfg.LR, WarmupSteps: max(cfg.Steps/10, 1), TotalSteps: cfg.Steps}
	opt, err := model.NewAdamW(p.backend, tr.Params(), acfg)
	if err != nil {
		return err
	}
	begin := time.Now()
	tokens := 0
	for step := range cfg.Steps {
		seqs := make([]model.TrainSeq, cfg.Batch)
		scored := 0
		for i := range seqs {
			if seqs[i], err = p.expertGame(ctx, int64(cfg.Seed)*1_000_003+int64(step*cfg.Batch+i)); err != nil {
				return err
			}
			scored += count(seqs[i].Mask)
			tokens += len(seqs[i].IDs)
		}
		res, err := tr.Accumulate(ctx, seqs, model.SFTLoss(seqs)) // mean NLL of the masked-in tokens
		if err != nil {
			return err
		}
		st, err := opt.Step()
		if err != nil {
			return err
		}
		tr.ZeroGrad()
		if (step+1)%cfg.LogEvery == 0 || step == 0 || step+1 == cfg.Steps {
			fmt.Fprintf(out, "step %4d  loss %.4f  lr %.2e  grad-norm %.2f  %.0f tok/s\n",
				step+1, res.Loss, st.LR, st.GradNorm, float64(tokens)/time.Since(begin).Seconds())
		}
	}
	return nil
}

func count(mask []bool) int {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	return n
}
