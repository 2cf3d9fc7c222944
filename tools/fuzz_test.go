package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCallArgs feeds arbitrary argument bytes to every tool of board: a
// call either succeeds or fails with a *CallError whose response is the
// JSON {"error": …}; it never panics. When place accepts arguments, they
// must also be accepted by encoding/json's strict decoder, so the check
// never lets through what the decoder would reject.
func FuzzCallArgs(f *testing.F) {
	for _, seed := range []string{
		`{"direction":"left"}`, `{"direction":"right","steps":3}`, `{}`, `null`, ``, `[]`, `"x"`,
		`{"row":1,"col":2,"weight":0.5,"piece":{"kind":"rook","color":"b"},"tags":["a"],"attrs":{"x":true},"grid":[1,2],"level":2,"notes":{"n":[1,-3]},"extra":{"any":[1]}}`,
		`{"row":1e3,"col":2,"weight":1,"piece":{"kind":"k"}}`, `{"direction":"left","direction":"right"}`,
		`{"row":-0,"col":0,"weight":-1.5e-7,"piece":{"kind":""},"level":1}`, "{\"direction\":\"l\u00e9ft\"}",
	} {
		f.Add("place", seed)
		f.Add("move", seed)
		f.Add("count", seed)
	}
	f.Fuzz(func(t *testing.T, tool, args string) {
		s, err := Discover(&board{})
		require.NoError(t, err)
		resp, err := s.Call(context.Background(), tool, json.RawMessage(args))
		if err != nil {
			var ce *CallError
			require.True(t, errors.As(err, &ce), "error %v is not a *CallError", err)
			var body map[string]string
			require.NoError(t, json.Unmarshal([]byte(resp), &body), resp)
			want, _ := json.Marshal(err.Error()) // invalid UTF-8 becomes U+FFFD in both
			var wantMsg string
			require.NoError(t, json.Unmarshal(want, &wantMsg))
			require.Equal(t, wantMsg, body["error"])
			return
		}
		if tool == "place" {
			var a PlaceArgs
			require.NoError(t, json.Unmarshal([]byte(args), &a))
			require.True(t, json.Valid([]byte(resp)), resp)
		}
	})
}
