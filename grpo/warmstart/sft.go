package warmstart

import (
	"context"
	"fmt"

	"github.com/x/grpo"
	"github.com/x/model"
)

// SFT fine-tunes p's model on convs (grpo.SFT with cfg) and, when
// cfg.LoRA trains adapters, merges them into the weights, so that the
// model GRPO starts from is the warm-started one, and so is GRPO's KL
// reference (the model with GRPO's own adapters off).
func SFT(ctx context.Context, p *Policy, convs []grpo.Conversation, cfg grpo.SFTConfig, cbs ...grpo.Callback) (*grpo.SFTReport, error) {
	rep, err := grpo.SFT(ctx, p.Model, p.Tokenizer, convs, cfg, cbs...)
	if err != nil {
		return rep, fmt.Errorf("warmstart: %w", err)
	}
	if cfg.LoRA != nil {
		if err := model.MergeLoRA(p.Model); err != nil {
			return rep, fmt.Errorf("warmstart: merge the SFT adapters: %w", err)
		}
	}
	return rep, nil
}
