package openenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/x/env/openenv"
)

// counter is a minimal Environment: each step adds the action's "add" to a
// total; the episode ends at 10.
type counter struct{ total, steps int }

func (c *counter) Reset(ctx context.Context, opts json.RawMessage) (openenv.Result, error) {
	c.total, c.steps = 0, 0
	return openenv.Result{Observation: json.RawMessage(`{"total":0}`)}, nil
}

func (c *counter) Step(ctx context.Context, action json.RawMessage) (openenv.Result, error) {
	var a struct {
		Add *int `json:"add"`
	}
	if err := json.Unmarshal(action, &a); err != nil || a.Add == nil {
		return openenv.Result{}, &openenv.ValidationError{Errors: []openenv.FieldError{
			{Type: "missing", Loc: []any{"add"}, Msg: "Field required", Input: action}}}
	}
	c.total += *a.Add
	c.steps++
	reward := float64(c.total) / 10
	return openenv.Result{
		Observation: fmt.Appendf(nil, `{"total":%d}`, c.total),
		Reward:      &reward,
		Done:        c.total >= 10,
	}, nil
}

func (c *counter) State(ctx context.Context) (json.RawMessage, error) {
	return fmt.Appendf(nil, `{"episode_id":null,"step_count":%d}`, c.steps), nil
}

// Example_serve serves a Go environment over the OpenEnv protocol. Any
// OpenEnv client (Python's EnvClient, TRL, or this package's Client) can
// then play it at ws://host/ws. In a program, use
// http.ListenAndServe(":8000", srv) and call srv.Shutdown on exit.
func Example_serve() {
	factory := openenv.EnvironmentFactoryFunc(func(ctx context.Context) (openenv.Environment, error) {
		return &counter{}, nil
	})
	srv := openenv.NewServer(factory, openenv.WithMaxSessions(64), openenv.WithName("counter"))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	c, err := openenv.Dial(ctx, hs.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Reset(ctx, nil); err != nil {
		log.Fatal(err)
	}
	for {
		res, err := c.Step(ctx, map[string]int{"add": 4})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s reward=%.1f done=%v\n", res.Observation, *res.Reward, res.Done)
		if res.Done {
			break
		}
	}
	// Output:
	// {"total":4} reward=0.4 done=false
	// {"total":8} reward=0.8 done=false
	// {"total":12} reward=1.2 done=true
}

// Example_client plays an OpenEnv environment generically: actions and
// observations as JSON maps, typed errors by code, and the session-loss
// rule (after ErrSessionLost only Reset continues, on a new session).
func Example_client() {
	factory := openenv.EnvironmentFactoryFunc(func(ctx context.Context) (openenv.Environment, error) {
		return &counter{}, nil
	})
	srv := openenv.NewServer(factory)
	hs := httptest.NewServer(srv) // stands in for e.g. "https://openenv-echo-env.hf.space"
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	ctx := context.Background()
	c, err := openenv.Dial(ctx, hs.URL, openenv.WithBearerToken("optional"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Reset(ctx, map[string]any{"seed": 7}); err != nil {
		log.Fatal(err)
	}
	res, err := c.Step(ctx, map[string]any{"add": 3})
	if err != nil {
		log.Fatal(err)
	}
	var obs map[string]any
	if err := res.DecodeObservation(&obs); err != nil {
		log.Fatal(err)
	}
	fmt.Println("total:", obs["total"])

	_, err = c.Step(ctx, map[string]any{"oops": 1})
	var se *openenv.ServerError
	if errors.As(err, &se) && errors.Is(err, openenv.CodeValidationError) {
		fmt.Println("rejected:", se.Errors[0].Loc, se.Errors[0].Msg)
	}
	if errors.Is(err, openenv.ErrSessionLost) {
		fmt.Println("episode lost: call Reset")
	}
	st, err := c.State(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(st))
	// Output:
	// total: 3
	// rejected: [add] Field required
	// {"episode_id":null,"step_count":1}
}
