// Package pyjson writes and reads JSON the way OpenEnv's Python servers do,
// for the built-in environments: floats as Python's repr writes them,
// no HTML escaping, and action validation errors in pydantic's format.
package pyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/x/env/openenv"
)

// Float is a float64 that marshals as Python's repr: 0.0 not 0, 1e-05,
// 1e+16; NaN and ±Inf as null (pydantic's JSON mode).
type Float float64

// MarshalJSON writes f in Python's style.
func (f Float) MarshalJSON() ([]byte, error) { return AppendFloat(nil, float64(f)), nil }

// AppendFloat appends f in Python's repr style.
func AppendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	if abs := math.Abs(f); abs >= 1e16 || abs < 1e-4 {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, 64)
	if !bytes.ContainsRune(b[start:], '.') {
		b = append(b, ".0"...)
	}
	return b
}

// Marshal writes v as compact JSON without HTML escaping, like pydantic.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Member is one key of a JSON object, in input order.
type Member struct {
	Key   string
	Raw   json.RawMessage
	Value any // decoded with UseNumber
}

// Object parses a JSON object into its members in order. Duplicate keys
// keep the last value at the first key's position, as Python's json does
// for the value (its dict keeps the first position).
func Object(data json.RawMessage) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []Member
	index := map[string]int{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		key := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		vdec := json.NewDecoder(bytes.NewReader(raw))
		vdec.UseNumber()
		var v any
		if err := vdec.Decode(&v); err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		m := Member{Key: key, Raw: raw, Value: v}
		if i, dup := index[key]; dup {
			out[i] = m
			continue
		}
		index[key] = len(out)
		out = append(out, m)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: trailing data")
	}
	return out, nil
}

// Input is the whole input object of a failed validation, for "missing"
// errors, which quote it: members back to an ordered value.
func Input(members []Member) any { return ordered(members) }

// ordered marshals members in order.
type ordered []Member

// MarshalJSON writes the members as an object in order.
func (o ordered) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := Marshal(m.Key)
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, bytes.TrimSpace(m.Raw)...)
	}
	return append(b, '}'), nil
}

const pydanticURL = "https://errors.pydantic.dev/2.13/v/"

func fieldError(typ, loc, msg string, input any, ctx map[string]any) openenv.FieldError {
	return openenv.FieldError{Type: typ, Loc: []any{loc}, Msg: msg, Input: input, Ctx: ctx, URL: pydanticURL + typ}
}

// Missing is pydantic's error for an absent required field; input is the
// whole action object.
func Missing(loc string, input any) openenv.FieldError {
	return fieldError("missing", loc, "Field required", input, nil)
}

// ExtraForbidden is pydantic's error for a key the model does not have.
func ExtraForbidden(loc string, input any) openenv.FieldError {
	return fieldError("extra_forbidden", loc, "Extra inputs are not permitted", input, nil)
}

// String checks a str field; minLength > 0 adds pydantic's min_length.
func String(loc string, v any, minLength int) (string, []openenv.FieldError) {
	s, ok := v.(string)
	if !ok {
		return "", []openenv.FieldError{fieldError("string_type", loc, "Input should be a valid string", v, nil)}
	}
	if n := len([]rune(s)); n < minLength {
		unit := "characters"
		if minLength == 1 {
			unit = "character"
		}
		return "", []openenv.FieldError{fieldError("string_too_short", loc,
			fmt.Sprintf("String should have at least %d %s", minLength, unit), s, map[string]any{"min_length": minLength})}
	}
	return s, nil
}

// Int checks an int field in pydantic's lax mode: JSON integers, floats
// without a fraction, and decimal strings are accepted.
func Int(loc string, v any) (int64, []openenv.FieldError) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
			return 0, []openenv.FieldError{fieldError("int_parsing_size", loc, "Unable to parse input string as an integer, exceeded maximum size", v, nil)}
		}
		if f != math.Trunc(f) {
			return 0, []openenv.FieldError{fieldError("int_from_float", loc, "Input should be a valid integer, got a number with a fractional part", v, nil)}
		}
		return int64(f), nil
	case string:
		if i, err := strconv.ParseInt(x, 10, 64); err == nil {
			return i, nil
		}
		return 0, []openenv.FieldError{fieldError("int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", v, nil)}
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	}
	return 0, []openenv.FieldError{fieldError("int_type", loc, "Input should be a valid integer", v, nil)}
}

// Dict checks a dict field (e.g. every action's metadata).
func Dict(loc string, v any) []openenv.FieldError {
	if _, ok := v.(map[string]any); !ok {
		return []openenv.FieldError{fieldError("dict_type", loc, "Input should be a valid dictionary", v, nil)}
	}
	return nil
}

// Validation collects the errors of one action in pydantic's order: the
// model's fields in order (metadata first, as in OpenEnv's Action base),
// then keys the model lacks in input order.
type Validation struct {
	Vals    map[string]any // decoded values of the model's fields present
	Members []Member       // the whole input in order
	errs    []openenv.FieldError
	extra   []openenv.FieldError
}

// Action starts validating an action object against a model named model
// with the given field names (metadata is always allowed and checked). A
// value that is not a JSON object is a model_type error at once.
func Action(data json.RawMessage, model string, fields ...string) (*Validation, error) {
	members, err := Object(data)
	if err != nil {
		var input any = string(data)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&input) != nil {
			input = string(data)
		}
		return nil, &openenv.ValidationError{Errors: []openenv.FieldError{{
			Type: "model_type", Loc: []any{}, Msg: "Input should be a valid dictionary or instance of " + model,
			Input: input, Ctx: map[string]any{"class_name": model}, URL: pydanticURL + "model_type",
		}}}
	}
	allowed := map[string]bool{"metadata": true}
	for _, f := range fields {
		allowed[f] = true
	}
	v := &Validation{Vals: map[string]any{}, Members: members}
	for _, m := range members {
		if !allowed[m.Key] {
			v.extra = append(v.extra, ExtraForbidden(m.Key, m.Value))
			continue
		}
		v.Vals[m.Key] = m.Value
	}
	if md, ok := v.Vals["metadata"]; ok {
		v.Add(Dict("metadata", md)...)
	}
	return v, nil
}

// Require returns the value of a required field, adding a missing error
// when it is absent.
func (v *Validation) Require(field string) (any, bool) {
	x, ok := v.Vals[field]
	if !ok {
		v.Add(Missing(field, Input(v.Members)))
	}
	return x, ok
}

// Add records field errors.
func (v *Validation) Add(errs ...openenv.FieldError) { v.errs = append(v.errs, errs...) }

// Err is nil when the action is valid, else a *openenv.ValidationError.
func (v *Validation) Err() error {
	all := append(append([]openenv.FieldError(nil), v.errs...), v.extra...)
	if len(all) == 0 {
		return nil
	}
	return &openenv.ValidationError{Errors: all}
}
