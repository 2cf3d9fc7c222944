package grpo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

var guessTool = json.RawMessage(`{"type": "function", "function": {"name": "guess", "description": "Guess the secret number.", "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}}`)

// guessConversation is an expert game of "guess my number in 1..8" by
// binary search: tool calls, tool responses, a final answer.
func guessConversation(target int) Conversation {
	msgs := []tokenizer.Message{
		{Role: "system", Content: "You play number games."},
		{Role: "user", Content: "I picked a number from 1 to 8. Find it."},
	}
	lo, hi := 1, 8
	for {
		mid := (lo + hi) / 2
		msgs = append(msgs, tokenizer.Message{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{Name: "guess", Arguments: json.RawMessage(fmt.Sprintf(`{"number": %d}`, mid))}}})
		reply := "correct"
		switch {
		case target > mid:
			reply, lo = "higher", mid+1
		case target < mid:
			reply, hi = "lower", mid-1
		}
		msgs = append(msgs, tokenizer.Message{Role: "tool", Name: "guess", Content: reply})
		if reply == "correct" {
			break
		}
	}
	msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: fmt.Sprintf("The number is %d.", target)})
	return Conversation{Messages: msgs, Tools: []json.RawMessage{guessTool}}
}

func guessConversations() []Conversation {
	var out []Conversation
	for t := 1; t <= 8; t++ {
		out = append(out, guessConversation(t))
	}
	return out
}

func tinyChat(t *testing.T) *tokenizer.Chat {
	chat, err := tokenizer.NewChat(tokenizer.Tiny())
	require.NoError(t, err)
	return chat
}

// spans decodes the runs of scored and unscored tokens.
func spans(tok *tokenizer.Tokenizer, s model.TrainSeq) (scored, unscored []string) {
	flag := func(i int) bool { return i >= s.Start && s.Mask[i-s.Start] }
	for i := 0; i < len(s.IDs); {
		j := i
		for j < len(s.IDs) && flag(j) == flag(i) {
			j++
		}
		text := tok.Decode(s.IDs[i:j], false)
		if flag(i) {
			scored = append(scored, text)
		} else {
			unscored = append(unscored, text)
		}
		i = j
	}
	return scored, unscored
}

func TestEncodeConversationScoresAssistantTokensOnly(t *testing.T) {
	chat := tinyChat(t)
	conv := guessConversation(6) // guesses 4 (higher), 6 (correct)
	tests := []struct {
		name     string
		thinking tokenizer.Thinking
		want     []string
	}{
		{"thinking unset: the think block is generated", tokenizer.ThinkingUnset, []string{
			"<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": 4}}\n</tool_call><|im_end|>",
			"<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": 6}}\n</tool_call><|im_end|>",
			"<think>\n\n</think>\n\nThe number is 6.<|im_end|>",
		}},
		{"thinking off: the empty think block is the prompt's", tokenizer.ThinkingOff, []string{
			"<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": 4}}\n</tool_call><|im_end|>",
			"<tool_call>\n{\"name\": \"guess\", \"arguments\": {\"number\": 6}}\n</tool_call><|im_end|>",
			"The number is 6.<|im_end|>",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := EncodeConversation(chat, conv, tt.thinking)
			require.NoError(t, err)
			require.Len(t, s.Mask, len(s.IDs)-s.Start)
			require.True(t, s.Mask[0], "Start is the first assistant token")
			all, err := chat.Render(conv.Messages, tokenizer.RenderOptions{Tools: conv.Tools, EnableThinking: tt.thinking, KeepAllReasoning: true})
			require.NoError(t, err)
			assert.Equal(t, all, chat.Tokenizer().Decode(s.IDs, false), "the tokens are the whole rendering")
			scored, unscored := spans(chat.Tokenizer(), s)
			assert.Equal(t, tt.want, scored)
			masked := strings.Join(unscored, "")
			for _, m := range conv.Messages {
				if m.Role != "assistant" {
					assert.Contains(t, masked, m.Content, "%s content is masked", m.Role)
				}
			}
			assert.Contains(t, masked, `"name": "guess"`, "the tool schema in the system prompt is masked")
		})
	}
}

func TestEncodeConversationErrors(t *testing.T) {
	chat := tinyChat(t)
	tests := []struct {
		name string
		msgs []tokenizer.Message
		want string
	}{
		{"no assistant", []tokenizer.Message{{Role: "user", Content: "hi"}}, "no assistant turn"},
		{"assistant first", []tokenizer.Message{{Role: "assistant", Content: "hi"}}, "starts with an assistant"},
		{"unknown role", []tokenizer.Message{{Role: "robot", Content: "hi"}, {Role: "assistant", Content: "x"}}, "unknown role"},
		{"empty", nil, "no messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeConversation(chat, Conversation{Messages: tt.msgs}, tokenizer.ThinkingUnset)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSFTConfigValidate(t *testing.T) {
	require.NoError(t, DefaultSFTConfig().Validate())
	bad := DefaultSFTConfig()
	bad.NumEpochs, bad.BatchSize, bad.LRSchedule, bad.WarmupSteps, bad.WarmupRatio, bad.SaveSteps, bad.LoggingSteps = 0, 0, "step", 2, 0.1, 5, 0
	err := bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"num_train_epochs 0", "per_device_train_batch_size 0", `lr_scheduler_type "step"`, "not both", "need output_dir", "logging_steps 0"} {
		assert.Contains(t, err.Error(), want, "every problem is reported at once")
	}
}

func TestLoadConversations(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	var lines []string
	for _, c := range guessConversations()[:2] {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	require.NoError(t, os.WriteFile(good, []byte(strings.Join(lines, "\n")+"\n\n"), 0o644))
	got, err := LoadConversations(good)
	require.NoError(t, err)
	require.Len(t, got, 2)
	// Marshal compacts the arguments' JSON; the rendering is what counts.
	opts := tokenizer.RenderOptions{Tools: got[1].Tools, KeepAllReasoning: true}
	want, err := tinyChat(t).Render(guessConversations()[1].Messages, opts)
	require.NoError(t, err)
	have, err := tinyChat(t).Render(got[1].Messages, opts)
	require.NoError(t, err)
	assert.Equal(t, want, have)

	tests := []struct{ name, content, want string }{
		{"malformed", lines[0] + "\n{\"messages\": [\n", "bad.jsonl:2"},
		{"no messages", "{\"tools\": []}\n", "bad.jsonl:1: no messages"},
		{"empty", "\n", "no conversations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "bad.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
			_, err := LoadConversations(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// tinyModelDir writes the tiny Qwen3 shape with random F32 weights once
// per test.
func tinyModelDir(t *testing.T) string {
	dir := t.TempDir()
	cfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	require.NoError(t, model.WriteRandom(dir, cfg, kernels.F32, 7, model.RandomOptions{}))
	return dir
}

// loadTiny loads the tiny model on a 1-thread CPU backend, so two loads
// compute bit-identical results.
func loadTiny(t *testing.T, dir string) *model.Model {
	m, err := model.Load(dir, cpu.New(1))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSFTShortRuns: a warm-up ratio never takes every step (one SFT step
// at ratio 0.1 trains at the peak rate), and warm-up steps that do are
// reported in the config's terms.
func TestSFTShortRuns(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, tinyModelDir(t))
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedule, cfg.WarmupRatio, cfg.BatchSize = 1, 3e-3, model.ScheduleCosine, 0.1, 2
	rep, err := SFT(ctx, m, tokenizer.Tiny(), guessConversations(), cfg)
	require.NoError(t, err)
	require.Len(t, rep.History, 1)
	assert.Equal(t, 3e-3, rep.History[0].Metrics[MetricLearningRate], "no warm-up in a 1-step run: the peak rate")

	cfg.WarmupRatio, cfg.WarmupSteps = 0, 1
	_, err = SFT(ctx, m, tokenizer.Tiny(), guessConversations(), cfg)
	assert.ErrorContains(t, err, "WarmupSteps 1 is not less than the run's 1 steps")
}

func TestSFTLossFalls(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	m := loadTiny(t, tinyModelDir(t))
	out := t.TempDir()
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.LearningRate, cfg.LRSchedule, cfg.WarmupSteps = 30, 3e-3, model.ScheduleCosine, 3
	cfg.BatchSize, cfg.GradientAccumulationSteps = 2, 2
	cfg.OutputDir, cfg.SaveSteps, cfg.SaveTotalLimit = out, 10, 2
	var progress strings.Builder
	cfg.Progress = &progress
	var seen []int
	rep, err := SFT(ctx, m, tokenizer.Tiny(), guessConversations(), cfg, func(step int, m Metrics) error {
		seen = append(seen, step)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, rep.History, 30)
	assert.Equal(t, 30, rep.Steps)
	assert.Equal(t, []int{10, 20, 30}, seen, "logging_steps 10")
	first, last := rep.History[0].Metrics[MetricLoss], rep.History[29].Metrics[MetricLoss]
	t.Logf("SFT loss %.3f -> %.3f in 30 steps", first, last)
	assert.Greater(t, first, 6.0, "starts near ln 4096 = 8.3")
	assert.Less(t, last, first/3, "falls clearly")
	for _, k := range []string{MetricLoss, MetricEntropy, MetricLearningRate, MetricGradNorm, MetricNumTokens, MetricEpoch, MetricStepTime, MetricTimeBackward, MetricTimeOptimizer} {
		assert.Contains(t, rep.History[0].Metrics, k)
	}
	assert.InDelta(t, 30*4/8.0, rep.History[29].Metrics[MetricEpoch], 1e-12)

	logged, err := ReadMetrics(filepath.Join(out, MetricsFile))
	require.NoError(t, err)
	require.Len(t, logged, 3)
	for k, line := range logged {
		steps := make([]Metrics, 10)
		for i := range steps {
			steps[i] = rep.History[10*k+i].Metrics
		}
		want, err := WindowMetrics(steps)
		require.NoError(t, err)
		assert.Equal(t, 10*(k+1), line.Step)
		assertMetricsEqual(t, want, line.Metrics, "line %d: the window's combination", k)
	}
	assert.FileExists(t, filepath.Join(out, PlotFile))
	cks, err := Checkpoints(out)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(out, "checkpoint-20"), filepath.Join(out, "checkpoint-30")}, cks, "keeps the newest 2")
	assert.FileExists(t, filepath.Join(out, "checkpoint-30", "model.safetensors"))
	assert.Contains(t, progress.String(), "sft step 30/30 (100%) loss")
}

// TestSFTLossIsAssistantOnly checks the first step's loss against the
// model's own log-probs of every token: it is the mean over the assistant
// tokens exactly, and not the mean over all tokens.
func TestSFTLossIsAssistantOnly(t *testing.T) {
	ctx := context.Background()
	dir := tinyModelDir(t)
	convs := guessConversations()[:2]
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.BatchSize, cfg.LRSchedule = 1, 2, model.ScheduleConstant
	rep, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), convs, cfg)
	require.NoError(t, err)
	got := rep.History[0].Metrics[MetricLoss]

	m := loadTiny(t, dir)
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: true})
	require.NoError(t, err)
	var seqs, whole []model.TrainSeq
	for _, c := range convs {
		s, err := EncodeConversation(tinyChat(t), c, cfg.EnableThinking)
		require.NoError(t, err)
		seqs = append(seqs, s)
		whole = append(whole, model.TrainSeq{IDs: s.IDs, Start: 1})
	}
	logp, _, err := tr.LogProbs(ctx, whole, true)
	require.NoError(t, err)
	var asst, all float64
	var nAsst, nAll int
	for i, s := range seqs {
		for j, lp := range logp[i] {
			pos := j + 1
			all -= float64(lp)
			nAll++
			if pos >= s.Start && s.Mask[pos-s.Start] {
				asst -= float64(lp)
				nAsst++
			}
		}
	}
	// Both are float64 sums of the same float32 log-probs, computed in
	// batches of different shape: 1e-6 relative covers float32 rounding.
	assert.InEpsilon(t, asst/float64(nAsst), got, 1e-6)
	assert.Greater(t, math.Abs(all/float64(nAll)-got), 1e-3, "the non-assistant tokens are not in the loss")
	assert.Less(t, nAsst, nAll/2)
}

// TestSFTMaskedTokensGetNoGradient trains one step on a conversation and
// on the same conversation followed by a user turn: the user's tokens come
// after every assistant token, so they change no scored prediction, and
// only a loss on them could change the gradient. The gradient norms agree;
// scoring those tokens as a control changes it.
func TestSFTMaskedTokensGetNoGradient(t *testing.T) {
	ctx := context.Background()
	dir := tinyModelDir(t)
	conv := guessConversation(3)
	longer := conv
	longer.Messages = append(slices.Clone(conv.Messages), tokenizer.Message{Role: "user", Content: "Well played! Shall we play another round of this game?"})
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.BatchSize, cfg.LRSchedule = 1, 1, model.ScheduleConstant
	gradNorm := func(c Conversation) float64 {
		rep, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), []Conversation{c}, cfg)
		require.NoError(t, err)
		return rep.History[0].Metrics[MetricGradNorm]
	}
	short, long := gradNorm(conv), gradNorm(longer)
	// The extra tokens only lengthen the batch; 1e-6 relative covers
	// kernels whose summation order depends on the token count.
	assert.InEpsilon(t, short, long, 1e-6)

	// Control: the same tokens scored do change the gradient.
	m := loadTiny(t, dir)
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: true})
	require.NoError(t, err)
	s, err := EncodeConversation(tinyChat(t), longer, cfg.EnableThinking)
	require.NoError(t, err)
	all := slices.Repeat([]bool{true}, len(s.Mask))
	for i := range s.Mask {
		all[i] = s.Mask[i] || i >= len(s.Mask)-20
	}
	scored := countTrue(s.Mask)
	seqs := []model.TrainSeq{{IDs: s.IDs, Start: s.Start, Mask: all}}
	loss := model.SFTLoss(seqs)
	for j := range loss.Weight[0] {
		loss.Weight[0][j] = 1 / float32(scored) // the short run's normalisation
	}
	_, err = tr.Accumulate(ctx, seqs, loss)
	require.NoError(t, err)
	assert.Greater(t, math.Abs(model.GradNorm(tr.Params())-short)/short, 1e-3)
}

// TestSFTTrainsCarriedAdapters: a model that already carries adapters
// trains them (as NewTrainer does) and checkpoints them in PEFT format; a
// LoRA config of another shape is an error.
func TestSFTTrainsCarriedAdapters(t *testing.T) {
	ctx := context.Background()
	dir := tinyModelDir(t)
	m := loadTiny(t, dir)
	require.NoError(t, model.AttachLoRA(m, model.LoRAConfig{R: 4, Alpha: 8}, 3))
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.BatchSize, cfg.LRSchedule = 1, 2, model.ScheduleConstant
	cfg.OutputDir, cfg.SaveSteps = t.TempDir(), 1
	_, err := SFT(ctx, m, tokenizer.Tiny(), guessConversations()[:2], cfg)
	require.NoError(t, err)
	saved, err := model.LoadAdapter(filepath.Join(cfg.OutputDir, "checkpoint-1"), loadTiny(t, dir))
	require.NoError(t, err)
	assert.Equal(t, 4, saved.R)
	assert.InDelta(t, 8, saved.Alpha, 1e-9)

	cfg.OutputDir, cfg.SaveSteps = "", 0
	cfg.LoRA = &model.LoRAConfig{R: 2, Alpha: 8}
	_, err = SFT(ctx, m, tokenizer.Tiny(), guessConversations()[:2], cfg)
	assert.ErrorContains(t, err, "carries adapters of rank 4")
}

func TestSFTErrors(t *testing.T) {
	ctx := context.Background()
	dir := tinyModelDir(t)
	cfg := DefaultSFTConfig()
	cfg.MaxSteps = 1
	_, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), nil, cfg)
	assert.ErrorContains(t, err, "no conversations")

	short := cfg
	short.MaxLength = 8
	_, err = SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), guessConversations(), short)
	assert.ErrorContains(t, err, "within max_length 8")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = SFT(cancelled, loadTiny(t, dir), tokenizer.Tiny(), guessConversations(), cfg)
	assert.ErrorIs(t, err, context.Canceled)

	resume := cfg
	resume.OutputDir, resume.ResumeFrom = t.TempDir(), "latest"
	_, err = SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), guessConversations(), resume)
	assert.ErrorContains(t, err, "no checkpoint-<step> folder")
}

// TestSFTCancelSavesCheckpoint cancels a run during step 3: it returns
// the context's error with a checkpoint of step 2, which "latest" resumes.
func TestSFTCancelSavesCheckpoint(t *testing.T) {
	dir := tinyModelDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := DefaultSFTConfig()
	cfg.MaxSteps, cfg.BatchSize, cfg.LRSchedule = 4, 1, model.ScheduleConstant
	cfg.OutputDir, cfg.SaveSteps, cfg.LoggingSteps = t.TempDir(), 10, 1
	rep, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), guessConversations()[:2], cfg, func(step int, _ Metrics) error {
		if step == 2 {
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 2, rep.Steps)
	latest, err := LatestCheckpoint(cfg.OutputDir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cfg.OutputDir, "checkpoint-2"), latest)

	cfg.ResumeFrom = "latest"
	rep, err = SFT(context.Background(), loadTiny(t, dir), tokenizer.Tiny(), guessConversations()[:2], cfg)
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Steps)
	require.Len(t, rep.History, 2)
	logged, err := ReadMetrics(filepath.Join(cfg.OutputDir, MetricsFile))
	require.NoError(t, err)
	assert.Len(t, logged, 4, "the resumed run appends to the metrics log")
}

// TestSFTResumeBitExact stops a LoRA run at a checkpoint, resumes it on a
// freshly loaded model, and requires the final adapter file to equal the
// uninterrupted run's byte for byte.
func TestSFTResumeBitExact(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	ctx := context.Background()
	dir := tinyModelDir(t)
	convs := guessConversations()
	base := DefaultSFTConfig()
	base.MaxSteps, base.LearningRate, base.LRSchedule, base.WarmupSteps = 6, 1e-2, model.ScheduleCosine, 2
	base.BatchSize, base.GradientAccumulationSteps, base.SaveSteps = 3, 1, 3 // 3 × 6 = 18 examples: crosses an epoch
	base.LoRA = &model.LoRAConfig{R: 4, Alpha: 8}

	full := base
	full.OutputDir = t.TempDir()
	_, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), convs, full)
	require.NoError(t, err)

	// The interrupted run is the full run's checkpoint-3: resume it on a
	// fresh model into another folder.
	resumed := base
	resumed.OutputDir = t.TempDir()
	resumed.ResumeFrom = filepath.Join(full.OutputDir, "checkpoint-3")
	rep, err := SFT(ctx, loadTiny(t, dir), tokenizer.Tiny(), convs, resumed)
	require.NoError(t, err)
	assert.Equal(t, 6, rep.Steps)
	require.Len(t, rep.History, 3, "only steps 4..6 ran")
	assert.Equal(t, 4, rep.History[0].Step)
	wantLog, err := ReadMetrics(filepath.Join(full.OutputDir, MetricsFile))
	require.NoError(t, err)
	assert.Equal(t, wantLog[len(wantLog)-1].Metrics[MetricNumTokens], rep.History[2].Metrics[MetricNumTokens],
		"num_tokens is cumulative over the run, resumed or not")

	want, err := os.ReadFile(filepath.Join(full.OutputDir, "checkpoint-6", model.AdapterWeightsFile))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(resumed.OutputDir, "checkpoint-6", model.AdapterWeightsFile))
	require.NoError(t, err)
	assert.True(t, string(want) == string(got), "resumed adapter equals the uninterrupted run's byte for byte")
	wantOpt, err := os.ReadFile(filepath.Join(full.OutputDir, "checkpoint-6", OptimizerStateFile))
	require.NoError(t, err)
	gotOpt, err := os.ReadFile(filepath.Join(resumed.OutputDir, "checkpoint-6", OptimizerStateFile))
	require.NoError(t, err)
	assert.True(t, string(wantOpt) == string(gotOpt), "and so does the optimizer state")
}
