package pyjson

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/env/openenv"
)

// FuzzAction validates arbitrary bytes as an action with one required
// string field: the result is a valid action or a ValidationError whose
// errors all marshal; a parsed object re-marshals to valid JSON.
func FuzzAction(f *testing.F) {
	for _, s := range []string{`{"message":"hi"}`, `{}`, `{"message":""}`, `{"message":1,"x":[1,{"y":null}]}`,
		`{"metadata":{"a":1},"message":"m"}`, `[1]`, `"s"`, `{"a":1,"a":2}`, `{`, ``, `{"message":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		v, err := Action(json.RawMessage(data), "EchoAction", "message")
		if err == nil {
			if m, ok := v.Require("message"); ok {
				_, fe := String("message", m, 1)
				v.Add(fe...)
			}
			in, merr := Marshal(Input(v.Members))
			require.NoError(t, merr)
			require.True(t, json.Valid(in), string(in))
			err = v.Err()
		}
		if err != nil {
			var ve *openenv.ValidationError
			require.True(t, errors.As(err, &ve))
			require.NotEmpty(t, ve.Errors)
			_, merr := Marshal(ve.Errors)
			require.NoError(t, merr)
		}
	})
}
