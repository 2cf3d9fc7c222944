package env

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Int returns the integer in column key. ok is false when the column is
// absent or null; a value that is not a whole number is an error. Numbers
// may be any Go integer or float type, json.Number or a decimal string, as
// datasets decode them.
func (r Row) Int(key string) (v int64, ok bool, err error) {
	raw, present := r[key]
	if !present || raw == nil {
		return 0, false, nil
	}
	bad := func() (int64, bool, error) {
		return 0, false, fmt.Errorf("env: row column %q = %v (%T) is not an integer", key, raw, raw)
	}
	switch x := raw.(type) {
	case int:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int32:
		return int64(x), true, nil
	case int64:
		return x, true, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return bad()
		}
		return int64(x), true, nil
	case uint8:
		return int64(x), true, nil
	case uint16:
		return int64(x), true, nil
	case uint32:
		return int64(x), true, nil
	case uint64:
		if x > math.MaxInt64 {
			return bad()
		}
		return int64(x), true, nil
	case float32:
		return floatInt(float64(x), bad)
	case float64:
		return floatInt(x, bad)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, true, nil
		}
		if f, err := x.Float64(); err == nil {
			return floatInt(f, bad)
		}
		return bad()
	case string:
		i, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return bad()
		}
		return i, true, nil
	}
	return bad()
}

func floatInt(f float64, bad func() (int64, bool, error)) (int64, bool, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
		return bad()
	}
	return int64(f), true, nil
}

// String returns the string in column key. ok is false when the column is
// absent or null; a value of another type is an error.
func (r Row) String(key string) (v string, ok bool, err error) {
	raw, present := r[key]
	if !present || raw == nil {
		return "", false, nil
	}
	s, isString := raw.(string)
	if !isString {
		return "", false, fmt.Errorf("env: row column %q = %v (%T) is not a string", key, raw, raw)
	}
	return s, true, nil
}
