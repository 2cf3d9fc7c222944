package grpo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// buttonEnv is a one-tool game whose answer is known: press("blue") wins,
// any other colour is a tool error.
type buttonEnv struct{ won bool }

type pressArgs struct {
	Color string `json:"color" desc:"the button's colour"`
}

func (b *buttonEnv) Reset(context.Context, env.Row) (string, error) {
	b.won = false
	return "Press the winning button.", nil
}

func (b *buttonEnv) Press(_ context.Context, a pressArgs) (string, error) {
	if a.Color != "blue" {
		return "", errors.New("wrong button")
	}
	b.won = true
	return "You win.", nil
}

func (b *buttonEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Press": "Press a button."}
}

func buttonWon(_ context.Context, r *Rollout) (float64, error) {
	if r.Env.(*buttonEnv).won {
		return 1, nil
	}
	return 0, nil
}

// turnSums sums the log-probs of each model turn (each run of mask-true
// tokens) of a rollout's completion.
func turnSums(lp []float32, mask []bool) []float64 {
	var out []float64
	for t, m := range mask {
		if !m {
			continue
		}
		if t == 0 || !mask[t-1] {
			out = append(out, 0)
		}
		out[len(out)-1] += float64(lp[t])
	}
	return out
}

// warmed writes the tiny model fine-tuned for 40 SFT steps (every
// weight) on the games scripted by turns, played on a buttonEnv under
// cfg, to a folder and returns it, so that the check starts from a policy
// that plays them, not from random weights (whose log-probs are all near
// log(1/vocab) and whose first Adam step moves every weight by the rate
// whatever its gradient's size).
func warmed(t *testing.T, cfg Config, games ...[]tokenizer.Message) string {
	t.Helper()
	m, tok := tinyModel(t, 1)
	set, err := env.Tools(&buttonEnv{})
	require.NoError(t, err)
	var convs []Conversation
	for _, g := range games {
		r, err := PlayScript(context.Background(), &buttonEnv{}, env.Row{}, Turns(g...), PlayOptions{Tokenizer: tok, Config: &cfg})
		require.NoError(t, err)
		convs = append(convs, Conversation{Messages: slices.Concat(r.Prompt, r.Completion), Tools: set.Schemas()})
	}
	sc := DefaultSFTConfig()
	sc.MaxSteps, sc.LearningRate, sc.BatchSize, sc.EnableThinking, sc.LoggingSteps = 40, 3e-3, 2, cfg.EnableThinking, 1
	_, err = SFT(context.Background(), m, tok, convs, sc)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, model.SaveCheckpoint(dir, m))
	return dir
}

// loadModel loads a model saved by warmed on a 2-thread CPU backend.
func loadModel(t *testing.T, dir string) *model.Model {
	t.Helper()
	be := cpu.New(2)
	m, err := model.Load(dir, be)
	require.NoError(t, err)
	t.Cleanup(func() {
		m.Close()
		be.Close()
	})
	return m
}

// spanSum sums lp over the tokens of the first occurrence of ids in
// completion (which lp is aligned with); ok false when ids do not occur.
func spanSum(completion, ids []int32, lp []float32) (float64, bool) {
	for i := 0; i+len(ids) <= len(completion); i++ {
		if slices.Equal(completion[i:i+len(ids)], ids) {
			s := 0.0
			for j := range ids {
				s += float64(lp[i+j])
			}
			return s, true
		}
	}
	return 0, false
}

// TestToolWinnerGainsProbability is the gradient check on a hand-built
// batch whose right answer is known: of two rollouts of one prompt, one
// calls the tool with the winning argument and wins, the other loses,
// either by stopping without a call or by calling twice with losing
// arguments. For every loss type, with LoRA and with every weight, at a
// sampling temperature below 1:
//
//   - on the real batch, the loss's gradient in each model token's
//     log-prob is exactly −A·W (W the loss type's normalisation) and 0 on
//     every tool-response token: the mask and the sign are right;
//   - when the loser stops, one optimizer step raises the winner's
//     calling turn and lowers the loser's turn, and, under the
//     token-summed losses (dapo, dr_grpo), the winner's closing turn too
//     (under grpo's per-sequence mean the short loser's tokens weigh more
//     each, and the closing turn, which shares its end token, may lose);
//   - when the loser calls with other arguments, one step raises the
//     winning argument's probability and lowers the losing ones'.
//
// When the loser calls twice, the tool-call syntax it shares with the
// winner is pushed down twice and up once: the winner's calling turn can
// then lose probability as a whole even as its winning argument gains,
// the per-batch face of the "fewer calls" pressure DESIGN.md describes
// ("Why policies collapsed to doing less"); the test logs it.
func TestToolWinnerGainsProbability(t *testing.T) {
	winner := []tokenizer.Message{CallTurn("press", `{"color": "blue"}`), TextTurn("Won.")}
	scripts := []struct {
		name   string
		loser  []tokenizer.Message
		losing []string // the loser's arguments
	}{
		{"loser stops", []tokenizer.Message{TextTurn("I give up.")}, nil},
		{"loser calls twice", []tokenizer.Message{CallTurn("press", `{"color": "red"}`), CallTurn("press", `{"color": "green"}`), TextTurn("Lost.")}, []string{"red", "green"}},
	}
	for _, sc := range scripts {
		cfg := testConfig(2, 1)
		dir := warmed(t, cfg, winner, sc.loser)
		// bnpo is dapo here: one micro-batch holds the whole generation.
		for _, lt := range []LossType{LossDAPO, LossGRPO, LossDrGRPO} {
			for _, lora := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/lora=%v", sc.name, lt, lora), func(t *testing.T) {
					cfg := testConfig(2, 1)
					cfg.LossType = lt
					cfg.Temperature = 0.5
					cfg.LearningRate = 1e-4
					opts := []Option{WithEnv(env.FactoryFunc(func(context.Context) (env.Env, error) { return &buttonEnv{}, nil })),
						WithReward("won", 1, buttonWon)}
					if lora {
						opts = append(opts, WithLoRA(model.LoRAConfig{R: 4, Alpha: 8}))
						cfg.LearningRate = 1e-3 // B starts at 0: the first step moves only B
					}
					m, tok := loadModel(t, dir), tokenizer.Tiny()
					script := func(r, turn int) string {
						g := winner
						if r%2 == 1 {
							g = sc.loser
						}
						msg := g[min(turn, len(g)-1)]
						if len(msg.ToolCalls) > 0 {
							return call(msg.ToolCalls[0].Name, string(msg.ToolCalls[0].Arguments))
						}
						return msg.Content
					}
					tr, _ := newScriptedOn(t, m, tok, cfg, script, opts...)
					ctx := context.Background()
					rows := []env.Row{{}}

					// The real batch and its loss gradient, before any step.
					gen := generateOnce(t, tr, rows)
					rs := gen.rollouts
					require.Len(t, rs, 2)
					require.Equal(t, 1, rs[0].ToolCalls)
					seqs := make([]trainSeq, 2)
					for k, r := range rs {
						seqs[k] = trainSeq{ids: slices.Concat(r.PromptIDs, r.CompletionIDs), start: len(r.PromptIDs), mask: r.Mask}
						if r.ToolCalls > 0 {
							assert.Contains(t, r.Mask, false, "rollout %d: its tool responses are in the completion, masked", k)
						}
					}
					adv, err := ComputeAdvantages([]float64{1, 0}, nil, 2, cfg.ScaleRewards)
					require.NoError(t, err)
					require.Greater(t, adv.A[0], 0.0)
					require.Less(t, adv.A[1], 0.0)
					lp, err := tr.pol.logProbs(ctx, seqs, true)
					require.NoError(t, err)
					tokens := rs[0].ModelTokens() + rs[1].ModelTokens()
					in := LossInput{LogP: lp, Mask: [][]bool{rs[0].Mask, rs[1].Mask}, Adv: adv.A}
					in.Weight, err = LossWeights(lt, cfg.LossNorm(tokens, max(len(rs[0].Mask), len(rs[1].Mask))), in.Mask)
					require.NoError(t, err)
					out, err := specLoss(cfg.LossParams(), in)
					require.NoError(t, err)
					for k := range rs {
						for j, m := range in.Mask[k] {
							if !m {
								assert.Zero(t, out.DLogP[k][j], "rollout %d token %d: a tool token gets no gradient", k, j)
								assert.Zero(t, in.Weight[k][j], "rollout %d token %d", k, j)
								continue
							}
							assert.InDelta(t, -adv.A[k]*in.Weight[k][j], float64(out.DLogP[k][j]), 1e-7, "rollout %d token %d: dL/dlogp = −A·W", k, j)
						}
					}

					// One step on the same batch (the script is deterministic).
					before, err := tr.pol.logProbs(ctx, seqs, true)
					require.NoError(t, err)
					rep, err := tr.Step(ctx, rows)
					require.NoError(t, err)
					require.Equal(t, []float64{1, 0}, rep.Rewards)
					after, err := tr.pol.logProbs(ctx, seqs, true)
					require.NoError(t, err)
					b, a := turnSums(before[0], rs[0].Mask), turnSums(after[0], rs[0].Mask)
					require.Len(t, a, 2)
					t.Logf("winner's turns %.2f -> %.2f; loser's %.2f -> %.2f", b, a, turnSums(before[1], rs[1].Mask), turnSums(after[1], rs[1].Mask))
					arg := func(k int, word string, lp [][]float32) float64 {
						s, ok := spanSum(rs[k].CompletionIDs, tok.Encode(word), lp[k])
						require.True(t, ok, "rollout %d has %q", k, word)
						return s
					}
					if sc.losing != nil {
						assert.Greater(t, arg(0, "blue", after), arg(0, "blue", before), "the winning argument gains probability")
						for _, w := range sc.losing {
							assert.Less(t, arg(1, w, after), arg(1, w, before), "the losing argument %q loses probability", w)
						}
						return
					}
					assert.Greater(t, a[0], b[0], "the winner's calling turn gains probability")
					if lt != LossGRPO {
						assert.Greater(t, a[1], b[1], "the winner's closing turn gains probability")
					}
					assert.Less(t, turnSums(after[1], rs[1].Mask)[0], turnSums(before[1], rs[1].Mask)[0], "the loser's turn loses probability")
				})
			}
		}
	}
}
