package pyjson

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env/openenv"
)

func TestAppendFloat(t *testing.T) {
	fourteen, tenth, fifth := 14.0, 0.1, 0.2 // variables: constants would fold exactly
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -1: "-1.0", 0.5: "0.5", 1.3: "1.3", fourteen * tenth: "1.4000000000000001",
		tenth + fifth: "0.30000000000000004", 1e16: "1e+16", 1e-5: "1e-05", 123456.0: "123456.0",
		math.NaN(): "null", math.Inf(1): "null", math.Copysign(0, -1): "-0.0",
	} {
		assert.Equal(t, want, string(AppendFloat(nil, f)), "%v", f)
	}
	b, err := Marshal(struct {
		A Float   `json:"a"`
		B []Float `json:"b"`
		S string  `json:"s"`
	}{0, []Float{1, 0.4}, "<&>"})
	require.NoError(t, err)
	assert.Equal(t, `{"a":0.0,"b":[1.0,0.4],"s":"<&>"}`, string(b))
}

func TestObject(t *testing.T) {
	ms, err := Object(json.RawMessage(`{"b": 1, "a": [2], "b": "x"}`))
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, "b", ms[0].Key)
	assert.Equal(t, "x", ms[0].Value, "a duplicate key keeps the last value")
	assert.Equal(t, "a", ms[1].Key)
	in, err := Marshal(Input(ms))
	require.NoError(t, err)
	assert.Equal(t, `{"b":"x","a":[2]}`, string(in))
	for _, bad := range []string{`[1]`, `{"a":}`, `{"a":1} x`, ``, `{"a":1`} {
		_, err := Object(json.RawMessage(bad))
		assert.Error(t, err, bad)
	}
}

func errsOf(t *testing.T, err error) []openenv.FieldError {
	t.Helper()
	var ve *openenv.ValidationError
	require.ErrorAs(t, err, &ve)
	return ve.Errors
}

func TestActionValidation(t *testing.T) {
	v, err := Action(json.RawMessage(`{"bogus":1,"message":"","metadata":[]}`), "EchoAction", "message")
	require.NoError(t, err)
	if m, ok := v.Require("message"); ok {
		_, fe := String("message", m, 1)
		v.Add(fe...)
	}
	got := errsOf(t, v.Err())
	require.Len(t, got, 3)
	assert.Equal(t, "dict_type", got[0].Type)
	assert.Equal(t, "string_too_short", got[1].Type)
	assert.Equal(t, "String should have at least 1 character", got[1].Msg)
	assert.Equal(t, map[string]any{"min_length": 1}, got[1].Ctx)
	assert.Equal(t, "extra_forbidden", got[2].Type)
	assert.Equal(t, "https://errors.pydantic.dev/2.13/v/extra_forbidden", got[2].URL)

	v, err = Action(json.RawMessage(`{}`), "EchoAction", "message")
	require.NoError(t, err)
	_, ok := v.Require("message")
	assert.False(t, ok)
	got = errsOf(t, v.Err())
	assert.Equal(t, "missing", got[0].Type)
	in, _ := Marshal(got[0].Input)
	assert.Equal(t, `{}`, string(in))

	_, err = Action(json.RawMessage(`[1]`), "EchoAction", "message")
	got = errsOf(t, err)
	assert.Equal(t, "model_type", got[0].Type)

	v, err = Action(json.RawMessage(`{"message":"hi","metadata":{"k":1}}`), "EchoAction", "message")
	require.NoError(t, err)
	assert.NoError(t, v.Err())
}

func TestScalars(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		typ  string
	}{
		{json.Number("2"), 2, ""}, {json.Number("2.0"), 2, ""}, {"7", 7, ""}, {true, 1, ""},
		{json.Number("2.5"), 0, "int_from_float"}, {"x", 0, "int_parsing"}, {nil, 0, "int_type"},
		{[]any{}, 0, "int_type"}, {json.Number("1e400"), 0, "int_parsing_size"},
	} {
		got, fe := Int("action_id", tc.in)
		if tc.typ == "" {
			assert.Empty(t, fe, "%v", tc.in)
			assert.Equal(t, tc.want, got)
			continue
		}
		require.Len(t, fe, 1, "%v", tc.in)
		assert.Equal(t, tc.typ, fe[0].Type)
	}
	_, fe := String("message", 3, 0)
	require.Len(t, fe, 1)
	assert.Equal(t, "string_type", fe[0].Type)
	_, fe = String("message", "ab", 3)
	assert.Equal(t, "String should have at least 3 characters", fe[0].Msg)
	assert.Len(t, Dict("game_params", map[string]any{}), 0)
}

func TestUUID4(t *testing.T) {
	a, b := UUID4(Seeds(1, 0)), UUID4(Seeds(1, 0))
	assert.Equal(t, a, b, "same seed, same id")
	assert.NotEqual(t, a, UUID4(Seeds(1, 1)))
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, a)
}
