package env_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/x/env"
)

func TestRowInt(t *testing.T) {
	row := env.Row{
		"int": 7, "i64": int64(-3), "u8": uint8(9), "f": 42.0, "frac": 1.5, "num": json.Number("12"),
		"numf": json.Number("3.0"), "str": "15", "word": "abc", "null": nil, "big": uint64(1 << 63), "bool": true,
	}
	tests := []struct {
		key    string
		want   int64
		ok     bool
		errMsg string
	}{
		{"int", 7, true, ""}, {"i64", -3, true, ""}, {"u8", 9, true, ""}, {"f", 42, true, ""},
		{"num", 12, true, ""}, {"numf", 3, true, ""}, {"str", 15, true, ""},
		{"absent", 0, false, ""}, {"null", 0, false, ""},
		{"frac", 0, false, `column "frac" = 1.5 (float64) is not an integer`},
		{"word", 0, false, `column "word" = abc (string) is not an integer`},
		{"big", 0, false, "is not an integer"},
		{"bool", 0, false, "(bool) is not an integer"},
	}
	for _, tc := range tests {
		v, ok, err := row.Int(tc.key)
		if tc.errMsg != "" {
			assert.ErrorContains(t, err, tc.errMsg, tc.key)
			continue
		}
		assert.NoError(t, err, tc.key)
		assert.Equal(t, tc.want, v, tc.key)
		assert.Equal(t, tc.ok, ok, tc.key)
	}
}

func TestRowString(t *testing.T) {
	row := env.Row{"s": "plant", "n": 3, "null": nil}
	v, ok, err := row.String("s")
	assert.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "plant", v)
	_, ok, err = row.String("absent")
	assert.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = row.String("null")
	assert.NoError(t, err)
	assert.False(t, ok)
	_, _, err = row.String("n")
	assert.ErrorContains(t, err, `column "n" = 3 (int) is not a string`)
}
