package grpo

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/env/openenv"
)

// envServer is an OpenEnv server of counter envs on a fixed loopback
// address that a test can kill and start again.
type envServer struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	oe   *openenv.Server
	hs   *http.Server
	done chan struct{}
}

func startEnvServer(t *testing.T) *envServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &envServer{t: t, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(s.kill)
	return s
}

func (s *envServer) url() string { return "http://" + s.addr }

func (s *envServer) serve(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oe = openenv.NewServer(openenv.FromFactory(counters(), "counter"))
	s.hs = &http.Server{Handler: s.oe}
	s.done = make(chan struct{})
	go func(hs *http.Server, done chan struct{}) {
		defer close(done)
		_ = hs.Serve(ln)
	}(s.hs, s.done)
}

// kill ends every session and stops listening.
func (s *envServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.oe.Shutdown(ctx)
	_ = s.hs.Close()
	<-s.done
	s.hs = nil
}

// restart listens again on the same address.
func (s *envServer) restart() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Errorf("restart the env server on %s: %v", s.addr, err)
		return
	}
	s.serve(ln)
}

// TestStepEnvServerKilledAndRestarted: the OpenEnv server dies after every
// rollout called its tool for the first time, and comes back shortly after.
// Every rollout lost its session; each is replayed from the start on a
// fresh env, and the step trains on complete rollouts. The default retry
// settings ride it out: the tries that find the server down are not
// attempts. make faults runs the same with 3 s and 30 s outages.
func TestStepEnvServerKilledAndRestarted(t *testing.T) {
	restartDuringStep(t, 300*time.Millisecond)
}

// restartDuringStep is TestStepEnvServerKilledAndRestarted with the server
// down for outage, under the default retry settings.
func restartDuringStep(t *testing.T, outage time.Duration) {
	srv := startEnvServer(t)
	cfg := testConfig(2, 2)
	cfg.ToolTimeout = 5 * time.Second
	script := func(_, turn int) string {
		if turn == 0 {
			return call("increment", `{"step": 1}`)
		}
		return "Done."
	}
	tr, d := newScripted(t, cfg, script, WithEnv(openenv.RemoteFactory(srv.url())), WithReward("one", 1, constant(1)))
	var restarted sync.WaitGroup
	var once sync.Once
	var down time.Time
	d.onStep = func() {
		once.Do(func() {
			srv.kill() // the first turns are decoded; their tool calls will find no session
			down = time.Now()
			restarted.Add(1)
			go func() {
				defer restarted.Done()
				time.Sleep(outage)
				srv.restart()
			}()
		})
	}
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "A: "}, {"prompt": "B: "}})
	restarted.Wait()
	require.NoError(t, err)
	t.Logf("server down %v; step done %v after it went down", outage, time.Since(down).Round(time.Millisecond))
	for i, r := range rep.Rollouts {
		require.NoError(t, r.Err, "rollout %d", i)
		assert.Equal(t, 2, r.Attempts, "rollout %d was replayed once; the tries that found no server are not attempts", i)
		assert.Equal(t, 1, r.ToolCalls, "rollout %d: the replay starts from scratch", i)
		assert.Zero(t, r.ToolFailures)
		assert.Contains(t, r.Completion[1].Content, "1")
	}
	assert.Zero(t, rep.Metrics[0][MetricRolloutsFailed])
	assert.Equal(t, 4.0, rep.Metrics[0][MetricRolloutsReplayed])
	assert.Equal(t, 1, tr.State().GlobalStep)
}

// TestStepEnvServerGone: the server dies for good; every rollout fails on
// every attempt, and the step is an error that says so, with the cause.
// When only some fail, they are left out of the loss and the baseline.
func TestStepEnvServerGone(t *testing.T) {
	srv := startEnvServer(t)
	cfg := testConfig(2, 1)
	cfg.RolloutAttempts = 2
	cfg.RolloutRetryBudget = time.Second
	cfg.ToolTimeout = 2 * time.Second
	script := func(_, turn int) string {
		if turn == 0 {
			return call("increment", `{"step": 1}`)
		}
		return "Done."
	}
	tr, d := newScripted(t, cfg, script, WithEnv(openenv.RemoteFactory(srv.url())), WithReward("one", 1, constant(1)))
	d.onStep = srv.kill
	before := snapshot(tr.Params())
	begin := time.Now()
	_, err := tr.Step(context.Background(), []env.Row{{"prompt": "A: "}})
	require.Error(t, err)
	assert.Less(t, time.Since(begin), 5*time.Second, "a dead server ends the step once the retry budget is spent")
	assert.Contains(t, err.Error(), "all 2 rollouts failed")
	assert.Contains(t, err.Error(), "no attempt within RolloutRetryBudget 1s of its first env failure (1 attempt(s) played, ")
	assert.Contains(t, err.Error(), "tries found the env unavailable)")
	assert.Contains(t, err.Error(), "connection refused")
	assert.ErrorIs(t, err, env.ErrUnavailable)
	assert.False(t, changed(t, before, tr.Params()))
	assert.Zero(t, tr.State().GlobalStep)
}

// flakyEnv fails its episode on its first tool call when marked.
type flakyEnv struct {
	counterEnv
	fail bool
}

func (f *flakyEnv) Increment(ctx context.Context, a incrementArgs) (string, error) {
	if f.fail {
		return "", errors.Join(ErrEnvFailed, errors.New("disk full"))
	}
	return f.counterEnv.Increment(ctx, a)
}

// TestStepFailedRolloutLeftOut: one rollout fails every attempt; it is out
// of its group's baseline (the others' advantages are those of a group
// without it) and counted, and the step still trains.
func TestStepFailedRolloutLeftOut(t *testing.T) {
	var mu sync.Mutex
	made := 0
	f := env.FactoryFunc(func(context.Context) (env.Env, error) {
		mu.Lock()
		defer mu.Unlock()
		made++
		// The probe (1), 2 and 3 start the three rollouts; env 2 and its
		// replacement 4 fail.
		return &flakyEnv{fail: made == 2 || made == 4}, nil
	})
	cfg := testConfig(3, 1)
	cfg.RolloutAttempts = 2
	script := func(_, turn int) string {
		if turn == 0 {
			return call("increment", `{"step": 1}`)
		}
		return "Done."
	}
	i := 0
	varying := func(context.Context, *Rollout) (float64, error) { i++; return float64(i), nil }
	tr, _ := newScripted(t, cfg, script, WithEnv(f), WithReward("v", 1, varying))
	rep, err := tr.Step(context.Background(), []env.Row{{"prompt": "Go: "}})
	require.NoError(t, err)
	failed := -1
	for k, r := range rep.Rollouts {
		if r.Err != nil {
			require.Equal(t, -1, failed, "one failure")
			failed = k
			assert.ErrorContains(t, r.Err, "disk full")
		}
	}
	require.NotEqual(t, -1, failed)
	assert.Equal(t, 1.0, rep.Metrics[0][MetricRolloutsFailed])
	assert.Zero(t, rep.Advantages[failed])
	// The two scored rollouts (rewards 1 and 2) form the baseline alone.
	var adv []float64
	for k, a := range rep.Advantages {
		if k != failed {
			adv = append(adv, a)
		}
	}
	assert.InDelta(t, 0, adv[0]+adv[1], 1e-9)
	assert.InDelta(t, 0.5/(0.7071067811865476+1e-4), max(adv[0], adv[1]), 1e-6, "(2 − 1.5) / (std of {1, 2} + 1e-4)")
}
