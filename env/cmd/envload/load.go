package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// roundTripTimeout bounds one request/reply; a session that waits longer
// counts as lost.
const roundTripTimeout = 30 * time.Second

// stepFrames returns the step frames env is driven with, in turn (an
// episode that ends is reset).
func stepFrames(env string) ([][]byte, error) {
	var as []string
	switch env {
	case "echo":
		as = []string{`{"message":"hello"}`}
	case "wordle":
		as = []string{`{"message":"[crane]"}`, `{"message":"[slate]"}`, `{"message":"[pious]"}`, `{"message":"[mound]"}`, `{"message":"[tangy]"}`, `{"message":"[light]"}`}
	case "catch":
		as = []string{`{"action_id":1}`}
	case "guess":
		for g := 1; g <= 20; g++ { // the default range, in order: every game ends
			as = append(as, fmt.Sprintf(`{"guess":%d}`, g))
		}
	default:
		return nil, fmt.Errorf("-env %q: no load actions for it (have catch, echo, guess, wordle)", env)
	}
	out := make([][]byte, len(as))
	for i, a := range as {
		out[i] = []byte(`{"type":"step","data":` + a + `}`)
	}
	return out, nil
}

// resetFrame starts an episode.
const resetFrame = `{"type":"reset"}`

// reply is the part of a server frame the load generator looks at.
type reply struct {
	Type string `json:"type"`
	Data struct {
		Done    bool   `json:"done"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
}

// loadSession is one WebSocket session of the load.
type loadSession struct {
	ws *websocket.Conn
}

// roundTrip sends one frame and reads the reply; an error frame is an
// error.
func (s *loadSession) roundTrip(frame []byte) (reply, error) {
	deadline := time.Now().Add(roundTripTimeout)
	_ = s.ws.SetWriteDeadline(deadline)
	if err := s.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		return reply{}, fmt.Errorf("send: %w", err)
	}
	_ = s.ws.SetReadDeadline(deadline)
	_, msg, err := s.ws.ReadMessage()
	if err != nil {
		return reply{}, fmt.Errorf("read reply: %w", err)
	}
	var r reply
	if err := json.Unmarshal(msg, &r); err != nil {
		return reply{}, fmt.Errorf("decode reply %.80q: %w", msg, err)
	}
	if r.Type == "error" {
		return r, fmt.Errorf("server error %s: %s", r.Data.Code, r.Data.Message)
	}
	return r, nil
}

// close ends the session politely.
func (s *loadSession) close() {
	_ = s.ws.SetWriteDeadline(time.Now().Add(time.Second))
	_ = s.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"close"}`))
	_ = s.ws.Close()
}

// openSessions connects n sessions to wsURL and resets each, at most
// parallel at a time. It returns the sessions that opened and the errors
// of those that did not.
func openSessions(ctx context.Context, wsURL string, n, parallel int) ([]*loadSession, []error) {
	dialer := &websocket.Dialer{
		HandshakeTimeout: roundTripTimeout,
		ReadBufferSize:   1024,
		WriteBufferSize:  1024,
		WriteBufferPool:  &sync.Pool{},
	}
	var mu sync.Mutex
	var open []*loadSession
	var errs []error
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := openSession(ctx, dialer, wsURL)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			open = append(open, s)
		}()
	}
	wg.Wait()
	return open, errs
}

// openSession dials one session and resets it, both within ctx.
func openSession(ctx context.Context, dialer *websocket.Dialer, wsURL string) (*loadSession, error) {
	ws, resp, err := dialer.DialContext(ctx, wsURL, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	s := &loadSession{ws: ws}
	// The end of ctx cuts the reset's round trip short. A session whose
	// reset raced with it counts as not opened: the cut may land later.
	stop := context.AfterFunc(ctx, func() { _ = ws.NetConn().SetDeadline(time.Now()) })
	_, err = s.roundTrip([]byte(resetFrame))
	if !stop() && err == nil {
		err = errors.New("the opening time ran out")
	}
	if err != nil {
		_ = ws.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("first reset: %w", err)
	}
	return s, nil
}

// driveResult is what one session did under load.
type driveResult struct {
	latencies []time.Duration // one per step
	resets    int
	err       error // why the session was lost, nil if it was not
}

// drive steps s until deadline, maxSteps steps (0: no limit), the shared
// budget of steps runs out or ctx ends, resetting when an episode ends and
// pausing think between requests.
func drive(ctx context.Context, s *loadSession, steps [][]byte, start <-chan struct{}, deadline time.Time, maxSteps int, think time.Duration, budget *atomic.Int64) driveResult {
	var r driveResult
	<-start
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline) && (maxSteps == 0 || len(r.latencies) < maxSteps) && budget.Add(-1) >= 0; i++ {
		t0 := time.Now()
		rep, err := s.roundTrip(steps[i%len(steps)])
		if err != nil {
			r.err = err
			return r
		}
		r.latencies = append(r.latencies, time.Since(t0))
		if rep.Data.Done {
			if _, err := s.roundTrip([]byte(resetFrame)); err != nil {
				r.err = fmt.Errorf("reset after an episode: %w", err)
				return r
			}
			r.resets++
		}
		if think > 0 {
			t := time.NewTimer(think)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return r
}

// latencyStats are nearest-rank percentiles of step latencies.
type latencyStats struct {
	p50, p99, max time.Duration
}

// percentiles sorts lat and returns its p50, p99 and max (zero when empty).
func percentiles(lat []time.Duration) latencyStats {
	if len(lat) == 0 {
		return latencyStats{}
	}
	slices.Sort(lat)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(lat))+0.999999) - 1 // nearest rank, 1-based
		return lat[min(max(i, 0), len(lat)-1)]
	}
	return latencyStats{p50: rank(0.50), p99: rank(0.99), max: lat[len(lat)-1]}
}

// errSummary joins up to three distinct errors for a report.
func errSummary(errs []error) error {
	seen := map[string]bool{}
	var out []error
	for _, e := range errs {
		if s := e.Error(); !seen[s] && len(out) < 3 {
			seen[s] = true
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}
