package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkArgs validates the model's arguments against the argument shape s
// of tool (nil: the tool takes none) and returns them ready for
// json.Unmarshal. The messages are worded for the model.
func checkArgs(tool string, s *shape, args json.RawMessage) (json.RawMessage, error) {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || string(a) == "null" {
		a = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(a))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments of %s are not valid JSON: %v", tool, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("arguments of %s have trailing data after the JSON object", tool)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments of %s must be a JSON object, got %s", tool, valueKind(v))
	}
	if s == nil {
		if len(obj) > 0 {
			return nil, fmt.Errorf("%s takes no arguments, got %s", tool, excerpt(strings.Join(sortedKeys(obj), ", ")))
		}
		return a, nil
	}
	if err := s.checkObject(tool, "", obj); err != nil {
		return nil, err
	}
	return a, nil
}

// checkObject validates a struct-shaped object. path is "" at top level.
func (s *shape) checkObject(tool, path string, obj map[string]any) error {
	for _, k := range sortedKeys(obj) {
		if _, ok := s.byName[k]; !ok {
			return fmt.Errorf("%s got an unexpected argument %s; expected %s", tool, quote(join(path, k)), s.expected(path))
		}
	}
	for _, f := range s.fields {
		v, ok := obj[f.name]
		if !ok {
			if f.required {
				return fmt.Errorf("%s is missing required argument %s", tool, quote(join(path, f.name)))
			}
			continue
		}
		if err := f.shape.check(tool, join(path, f.name), v); err != nil {
			return err
		}
	}
	return nil
}

// expected lists the argument names of an object shape for a message.
func (s *shape) expected(path string) string {
	if len(s.fields) == 0 {
		return "no arguments"
	}
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = strconv.Quote(join(path, f.name))
	}
	return strings.Join(names, ", ")
}

// check validates one JSON value (decoded with UseNumber) against s.
func (s *shape) check(tool, path string, v any) error {
	if v == nil {
		if s.nullable {
			return nil
		}
		return fmt.Errorf("argument %s of %s must not be null", quote(path), tool)
	}
	bad := func() error {
		return fmt.Errorf("argument %s of %s must be %s, got %s", quote(path), tool, article(s.typ), valueKind(v))
	}
	switch s.typ {
	case tAny:
		return nil
	case tString:
		str, ok := v.(string)
		if !ok {
			return bad()
		}
		if len(s.enum) > 0 {
			b, _ := json.Marshal(str)
			return s.checkEnum(tool, path, string(b))
		}
	case tBoolean:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case tInteger:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		if s.unsigned {
			if _, err := strconv.ParseUint(n.String(), 10, s.bits); err != nil {
				return intError(tool, path, n, s, err)
			}
		} else if _, err := strconv.ParseInt(n.String(), 10, s.bits); err != nil {
			return intError(tool, path, n, s, err)
		}
		if len(s.enum) > 0 {
			i, _ := strconv.ParseInt(n.String(), 10, 64)
			return s.checkEnum(tool, path, strconv.FormatInt(i, 10))
		}
	case tNumber:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil || math.IsInf(f, 0) || s.bits == 32 && math.Abs(f) > math.MaxFloat32 {
			return fmt.Errorf("argument %s of %s: %s is out of range", quote(path), tool, excerpt(n.String()))
		}
	case tArray:
		arr, ok := v.([]any)
		if !ok {
			return bad()
		}
		if s.gt.Kind() == reflect.Array && len(arr) > s.gt.Len() {
			return fmt.Errorf("argument %s of %s has %d items, at most %d allowed", quote(path), tool, len(arr), s.gt.Len())
		}
		for i, e := range arr {
			if err := s.elem.check(tool, fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case tMap:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for _, k := range sortedKeys(m) {
			if err := s.elem.check(tool, join(path, k), m[k]); err != nil {
				return err
			}
		}
	case tObject:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		return s.checkObject(tool, path, m)
	}
	return nil
}

// checkEnum checks a canonical JSON value against the enum.
func (s *shape) checkEnum(tool, path, canon string) error {
	for _, e := range s.enum {
		if e == canon {
			return nil
		}
	}
	return fmt.Errorf("argument %s of %s must be one of %s, got %s", quote(path), tool, strings.Join(s.enum, ", "), excerpt(canon))
}

// intError explains why n does not fit an integer shape.
func intError(tool, path string, n json.Number, s *shape, err error) error {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return fmt.Errorf("argument %s of %s: %s is out of range", quote(path), tool, excerpt(n.String()))
	}
	if s.unsigned && strings.HasPrefix(n.String(), "-") {
		return fmt.Errorf("argument %s of %s must be a non-negative integer, got %s", quote(path), tool, excerpt(n.String()))
	}
	return fmt.Errorf("argument %s of %s must be an integer, got %s", quote(path), tool, excerpt(n.String()))
}

// join extends a dotted argument path.
func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// article names a JSON type with its article for messages.
func article(t jsonType) string {
	switch t {
	case tString:
		return "a string"
	case tInteger:
		return "an integer"
	case tNumber:
		return "a number"
	case tBoolean:
		return "a boolean"
	case tArray:
		return "an array"
	}
	return "an object"
}

// valueKind names the JSON type of a decoded value.
func valueKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// maxQuote is the most bytes of the model's own input an error message
// quotes: enough to recognise a mistake, never its whole argument (a reply
// echoing 100 MB would fill the context, the logs and the wire).
const maxQuote = 64

// excerpt returns s, or its first maxQuote bytes (cut at a rune boundary)
// followed by how long it was.
func excerpt(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	cut := maxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// quote is excerpt in Go quotes, for argument names and paths.
func quote(s string) string { return strconv.Quote(excerpt(s)) }
