package catch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/env/catch"
	"github.com/x/env/internal/pyjson"
)

// FuzzStep sends arbitrary actions to a catch session: a step fails or
// returns an observation of 50 values; nothing panics.
func FuzzStep(f *testing.F) {
	for _, s := range []string{`{"action_id":0}`, `{"action_id":"2"}`, `{"action_id":1.0,"game_name":"catch","game_params":{}}`,
		`{"action_id":9}`, `{"action_id":-1}`, `{}`, `{"action_id":1e30}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, action string) {
		ctx := context.Background()
		e := catch.NewEnvironment(pyjson.Seeds(1, 0))
		for range 10 {
			r, err := e.Step(ctx, json.RawMessage(action))
			if err != nil {
				return
			}
			var obs catch.Observation
			require.NoError(t, r.DecodeObservation(&obs))
			require.Len(t, obs.InfoState, 50)
		}
	})
}
