package wordle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

// FuzzStep sends arbitrary action bytes to a Wordle session: the step
// either fails validation or returns a JSON observation whose transcript
// extends the previous one; nothing panics.
func FuzzStep(f *testing.F) {
	for _, s := range []string{`{"message":"[crane]"}`, `{"message":"crane"}`, `{"message":"I guess [xyzzy]"}`,
		`{"message":"[é\u00e9té]"}`, `{"message":""}`, `{"message":1}`, `[]`, `{"message":"[plant]","metadata":{}}`, `{`} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ctx := context.Background()
		e := wordle.NewEnvironment(wordle.DefaultDictionary(), pyjson.Seeds(1, 0))
		prev := ""
		for _, action := range []string{a, b, a} {
			r, err := e.Step(ctx, json.RawMessage(action))
			if err != nil {
				var ve *openenv.ValidationError
				require.True(t, errors.As(err, &ve), "%v", err)
				continue
			}
			var obs wordle.Observation
			require.NoError(t, r.DecodeObservation(&obs))
			require.True(t, strings.HasPrefix(obs.Content(), prev))
			prev = obs.Content()
			_, err = e.State(ctx)
			require.NoError(t, err)
		}
	})
}
