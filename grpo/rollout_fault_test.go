package grpo

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

// stuckEnv is a tool env whose Reset or tool blocks, ignoring its context,
// until release is closed (when set); otherwise it plays like counterEnv.
// It panics instead when told to. closed records Close.
type stuckEnv struct {
	counterEnv
	hangReset, hangTool <-chan struct{}
	panicReset          bool
	obs                 string
	closed              atomic.Bool
}

// Reset blocks or panics as told; a row with "panic" panics too, and one
// with "long" gets a long observation.
func (s *stuckEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	if s.hangReset != nil {
		<-s.hangReset
	}
	if s.panicReset || row["panic"] == true {
		panic("the board fell over")
	}
	if _, err := s.counterEnv.Reset(ctx, row); err != nil {
		return "", err
	}
	if row["long"] == true {
		return strings.Repeat("many words ", 200), nil
	}
	return s.obs, nil
}

func (s *stuckEnv) Increment(ctx context.Context, a incrementArgs) (string, error) {
	if s.hangTool != nil {
		<-s.hangTool
	}
	return s.counterEnv.Increment(ctx, a)
}

func (s *stuckEnv) Close() error { s.closed.Store(true); return nil }

// faultyEnvs makes the envs of a fault test: make(n) builds the n-th env
// (0 is NewTrainer's probe); every env it made is kept.
type faultyEnvs struct {
	mu   sync.Mutex
	made []*stuckEnv
	make func(n int) *stuckEnv
}

func (f *faultyEnvs) New(context.Context) (env.Env, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.make(len(f.made))
	f.made = append(f.made, e)
	return e, nil
}

func (f *faultyEnvs) env(n int) *stuckEnv {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made[n]
}

// callOnce is a script whose rollouts call increment once, then stop.
func callOnce(_, turn int) string {
	if turn == 0 {
		return call("increment", `{"step": 1}`)
	}
	return "Done."
}

// logBuffer is a logger writing into a buffer safe to read afterwards.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRolloutStuckCallsAreAbandoned: a Reset or a tool that blocks and
// ignores its context is abandoned at ToolTimeout: the step goes on
// (the rollout is replayed on a fresh env), the stuck env is never pooled
// again and is discarded (closed) once its call returns, and the
// abandonment is logged and counted.
func TestRolloutStuckCallsAreAbandoned(t *testing.T) {
	for _, where := range []string{"reset", "tool"} {
		t.Run(where, func(t *testing.T) {
			release := make(chan struct{})
			f := &faultyEnvs{make: func(n int) *stuckEnv {
				e := &stuckEnv{}
				if n == 1 { // the first env made for a rollout: the probe serves the other
					if where == "reset" {
						e.hangReset = release
					} else {
						e.hangTool = release
					}
				}
				return e
			}}
			cfg := testConfig(2, 1)
			cfg.ToolTimeout = 200 * time.Millisecond
			var logs logBuffer
			tr, _ := newScripted(t, cfg, callOnce, WithEnv(f), WithReward("one", 1, constant(1)),
				WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			done := make(chan struct{})
			var rep *StepReport
			var err error
			go func() {
				defer close(done)
				rep, err = tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Step hung on a call that ignores its context")
			}
			require.NoError(t, err)
			abandoned := 0
			for i, r := range rep.Rollouts {
				require.NoError(t, r.Err, "rollout %d", i)
				assert.Equal(t, 1, r.ToolCalls)
				abandoned += r.Abandoned
				if r.Abandoned > 0 {
					assert.Equal(t, 2, r.Attempts, "the rollout whose call was abandoned is replayed")
				}
			}
			assert.Equal(t, 1, abandoned)
			assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsAbandoned])
			assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsReplayed])
			assert.Contains(t, logs.String(), "abandoned past its deadline")
			assert.Contains(t, logs.String(), "did not return by its deadline")

			stuck := f.env(1)
			assert.False(t, stuck.closed.Load(), "not closed under the stuck call")
			pool := tr.pools.(*env.Pool)
			for range 4 { // the stuck env is not handed out again
				in, err := pool.Acquire(context.Background())
				require.NoError(t, err)
				assert.NotSame(t, stuck, in.Env)
				defer in.Release()
			}
			close(release)
			assert.Eventually(t, stuck.closed.Load, 5*time.Second, time.Millisecond, "discarded once its call returned")
		})
	}
}

// TestRolloutCancelWithStuckCall: with no deadline, a tool that never
// returns does not keep a cancelled Step from returning.
func TestRolloutCancelWithStuckCall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := &faultyEnvs{make: func(int) *stuckEnv { return &stuckEnv{hangTool: release} }}
	cfg := testConfig(2, 1)
	cfg.ToolTimeout = 0
	tr, _ := newScripted(t, cfg, callOnce, WithEnv(f), WithReward("one", 1, constant(1)))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	done := make(chan error, 1)
	begin := time.Now()
	go func() {
		_, err := tr.Step(ctx, []env.Row{{"prompt": "Go: "}})
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(begin), 2*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Step waited for a call that ignores its context")
	}
}

// TestRolloutResetPanics: a Reset that panics fails that attempt, not the
// process: the rollout is replayed; one whose every Reset panics is left
// out, its error naming the env, the panic and the row, and the step
// trains on the others.
func TestRolloutResetPanics(t *testing.T) {
	f := &faultyEnvs{make: func(n int) *stuckEnv { return &stuckEnv{panicReset: n == 1} }}
	tr, _ := newScripted(t, testConfig(2, 1), callOnce, WithEnv(f), WithReward("one", 1, constant(1)))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	for i, r := range rep.Rollouts {
		require.NoError(t, r.Err, "rollout %d", i)
	}
	assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsReplayed], "the attempt whose Reset panicked was played again")

	// Every Reset of one row panics: its rollouts are left out, the
	// others train.
	cfg := testConfig(2, 2)
	cfg.RolloutAttempts = 2
	var varying atomic.Int32
	tr2, _ := newScripted(t, cfg, callOnce, WithEnv(&faultyEnvs{make: func(int) *stuckEnv { return &stuckEnv{} }}),
		WithReward("v", 1, func(context.Context, *Rollout) (float64, error) { return float64(varying.Add(1)), nil }))
	rep, err = tr2.Step(context.Background(), []env.Row{{"prompt": "Go: "}, {"prompt": "Bad: ", "panic": true}})
	require.NoError(t, err)
	for i, r := range rep.Rollouts {
		if r.Row["panic"] != true {
			assert.NoError(t, r.Err, "rollout %d", i)
			continue
		}
		require.Error(t, r.Err, "rollout %d", i)
		assert.Contains(t, r.Err.Error(), "failed after 2 attempt(s)")
		assert.Contains(t, r.Err.Error(), "reset panicked: the board fell over")
		assert.Contains(t, r.Err.Error(), "row map[panic:true prompt:Bad: ]")
		var pe *env.PanicError
		assert.ErrorAs(t, r.Err, &pe)
	}
	assert.Equal(t, 2.0, rep.Metrics[0][MetricRolloutsFailed])
}

// TestRewardFaults: a reward function that panics, or blocks past
// RewardTimeout ignoring its context, fails its rollout (left out,
// logged, counted) and not the step; an abandoned reward's env is
// discarded once the call returns.
func TestRewardFaults(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int32
	tests := []struct {
		name string
		fn   RewardFunc
		want string
	}{
		{"panic", func(context.Context, *Rollout) (float64, error) {
			if calls.Add(1) == 2 {
				panic("judge crashed")
			}
			return float64(calls.Load()), nil
		}, `reward "judge" on rollout 1 (group 0, row map[prompt:Go: ]) panicked: judge crashed`},
		{"blocks", func(context.Context, *Rollout) (float64, error) {
			if calls.Add(1) == 2 {
				<-release
			}
			return float64(calls.Load()), nil
		}, `reward "judge" on rollout 1 (group 0, row map[prompt:Go: ]): grpo: call abandoned: it did not return by its deadline (context deadline exceeded)`},
		{"times out", func(ctx context.Context, _ *Rollout) (float64, error) {
			if calls.Add(1) == 2 {
				<-ctx.Done() // returns the deadline's error: abandoned or not, the rollout fails
				return 0, ctx.Err()
			}
			return float64(calls.Load()), nil
		}, `reward "judge" on rollout 1 (group 0, row map[prompt:Go: ])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			f := &faultyEnvs{make: func(int) *stuckEnv { return &stuckEnv{} }}
			cfg := testConfig(3, 1)
			cfg.RewardTimeout = 200 * time.Millisecond
			tr, _ := newScripted(t, cfg, callOnce, WithEnv(f), WithReward("judge", 1, tt.fn))
			begin := time.Now()
			rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
			require.NoError(t, err)
			assert.Less(t, time.Since(begin), 5*time.Second)
			require.Error(t, rep.Rollouts[1].Err)
			assert.Contains(t, rep.Rollouts[1].Err.Error(), tt.want)
			assert.NoError(t, rep.Rollouts[0].Err)
			assert.NoError(t, rep.Rollouts[2].Err)
			assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsFailed])
			assert.Zero(t, rep.Advantages[1])
			if tt.name != "panic" {
				assert.ErrorIs(t, rep.Rollouts[1].Err, context.DeadlineExceeded)
			}
			if tt.name == "blocks" {
				assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsAbandoned])
				assert.Equal(t, 1, rep.Rollouts[1].Abandoned)
			}
		})
	}
}

// rewardEnv owns its reward, which panics when boom is set.
type rewardEnv struct {
	counterEnv
	boom bool
}

func (e *rewardEnv) Increment(ctx context.Context, a incrementArgs) (string, error) {
	return e.counterEnv.Increment(ctx, a)
}

func (e *rewardEnv) Reward(context.Context) (float64, error) {
	if e.boom {
		panic("scoreboard missing")
	}
	return float64(e.n), nil
}

// TestEnvRewardPanics: an env whose own Reward panics fails its rollout,
// named in the error, not the step.
func TestEnvRewardPanics(t *testing.T) {
	var made atomic.Int32
	f := env.FactoryFunc(func(context.Context) (env.Env, error) {
		return &rewardEnv{boom: made.Add(1) == 2}, nil
	})
	tr, _ := newScripted(t, testConfig(2, 1), callOnce, WithEnv(f))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	failed := 0
	for _, r := range rep.Rollouts {
		if r.Err != nil {
			failed++
			assert.ErrorContains(t, r.Err, `reward "rewardEnv" of the env of rollout`)
			assert.ErrorContains(t, r.Err, "reward panicked: scoreboard missing")
		}
	}
	assert.Equal(t, 1, failed)
	assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsFailed])
}

// TestRolloutObservationOverContext: an env whose Reset returns an
// observation longer than the model's context fails that rollout only
// (before, its prompt's prefill failed the whole step).
func TestRolloutObservationOverContext(t *testing.T) {
	tok := tokenizer.Tiny()
	mcfg, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	mcfg.VocabSize, mcfg.EOSTokenIDs, mcfg.MaxPositions = tok.VocabSize(), []int32{tok.EOS()}, 256
	dir := t.TempDir()
	require.NoError(t, model.WriteRandom(dir, mcfg, kernels.F32, 1, model.RandomOptions{}))
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(dir, be)
	require.NoError(t, err)
	defer m.Close()

	cfg := testConfig(2, 2)
	tr, err := NewTrainer(m, tok, cfg, WithEnv(&faultyEnvs{make: func(int) *stuckEnv { return &stuckEnv{obs: "Count."} }}),
		WithReward("v", 1, func(_ context.Context, r *Rollout) (float64, error) { return float64(len(r.CompletionIDs) % 3), nil }))
	require.NoError(t, err)
	defer tr.Close()
	_, fn := scripted(tok, callOnce)
	tr.eng.decoder = fn
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Short: "}, {"prompt": "Long: ", "long": true}})
	require.NoError(t, err)
	for i, r := range rep.Rollouts {
		if r.Row["long"] != true {
			assert.NoError(t, r.Err, "rollout %d", i)
			continue
		}
		require.Error(t, r.Err, "rollout %d", i)
		assert.ErrorIs(t, r.Err, model.ErrContextLength)
		assert.Contains(t, r.Err.Error(), "leaving no room in the model's context of 256")
		assert.Contains(t, r.Err.Error(), "row map[long:true prompt:Long: ]")
	}
	assert.Equal(t, 2.0, rep.Metrics[0][MetricRolloutsFailed])
}

// TestRetryBackoff: exponential from 250 ms to 8 s, jittered over the
// upper half; the tries of the default 60 s budget reach past 30 s.
func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		k      int
		lo, hi time.Duration
	}{
		{1, 125 * time.Millisecond, 250 * time.Millisecond},
		{2, 250 * time.Millisecond, 500 * time.Millisecond},
		{6, 4 * time.Second, 8 * time.Second},
		{7, 4 * time.Second, 8 * time.Second},
		{60, 4 * time.Second, 8 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.lo, retryBackoff(tt.k, 0), "k %d", tt.k)
		assert.InDelta(t, float64(tt.hi), float64(retryBackoff(tt.k, 0.999999)), float64(time.Microsecond*10), "k %d", tt.k)
	}
	var worst time.Duration // the latest the try after a 30 s outage can start
	k := 1
	for ; worst < 30*time.Second; k++ {
		worst += retryBackoff(k, 0.999999)
	}
	assert.Less(t, worst, DefaultConfig().RolloutRetryBudget, "the default budget outlasts a 30 s outage")
	assert.Equal(t, 60*time.Second, DefaultConfig().RolloutRetryBudget)
}
