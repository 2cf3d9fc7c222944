package tokenizer

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected values are Python 3.11's json.dumps(json.loads(in), ensure_ascii=False).
func TestPyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1", "1"}, {"-0", "0"}, {"0.0", "0.0"}, {"-0.0", "-0.0"}, {"1.0", "1.0"}, {"1.50", "1.5"},
		{"1e5", "100000.0"}, {"1E5", "100000.0"}, {"1e-5", "1e-05"}, {"1e-4", "0.0001"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"1e16", "1e+16"}, {"1e15", "1000000000000000.0"}, {"9999999999999999.0", "1e+16"},
		{"1.5e300", "1.5e+300"}, {"1e400", "Infinity"}, {"-1e400", "-Infinity"}, {"1e-400", "0.0"},
		{"0.1", "0.1"}, {"3.14159", "3.14159"}, {"2.5e-7", "2.5e-07"}, {"100.0", "100.0"},
		{"1234.5678e2", "123456.78"}, {"5e-324", "5e-324"}, {"1.7976931348623157e308", "1.7976931348623157e+308"},
		{`{"b": 1, "a": [true, false, null], "b": {"x": "\u00e9\n\u0001\u2028/\\\""}, "c":{}, "d":[]}`,
			"{\"b\": {\"x\": \"\u00e9\\n\\u0001\u2028/\\\\\\\"\"}, \"a\": [true, false, null], \"c\": {}, \"d\": []}"},
		{` {"z":1,"a":2} `, `{"z": 1, "a": 2}`},
	} {
		got, err := appendPyJSON(nil, []byte(tc.in))
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, string(got), tc.in)
	}
	for _, bad := range []string{"", "{", `{"a" 1}`, "[1,]", "1 2", `{"a":1}}`, "nul", `"\x01"`} {
		_, err := appendPyJSON(nil, []byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzPyJSON checks that re-serialization accepts exactly valid JSON and
// keeps its meaning.
func FuzzPyJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x"], "b": null}`, `"\u00e9"`, `1e-7`, `[{"k": {}}]`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := appendPyJSON(nil, data)
		if !json.Valid(data) {
			assert.Error(t, err)
			return
		}
		var in, back any
		if json.Unmarshal(data, &in) != nil {
			return // e.g. numbers beyond float64: Python keeps them as Infinity
		}
		if err != nil {
			t.Fatalf("valid JSON %q rejected: %v", data, err)
		}
		require.NoError(t, json.Unmarshal(out, &back), "output %q is not JSON", out)
		assert.True(t, reflect.DeepEqual(in, back), "%q → %q", data, out)
	})
}
