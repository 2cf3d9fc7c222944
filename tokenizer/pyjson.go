package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// pyValue is a JSON value as Python's json.loads builds it: objects keep key
// insertion order (a repeated key keeps its first position and last value),
// integers are exact, other numbers are float64.
type pyValue struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str  string
	num  json.Number
	b    bool
	keys []string
	vals []pyValue
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 512

// appendPyJSON re-serializes the JSON document raw the way Python's
// json.dumps(json.loads(raw), ensure_ascii=False) does: ", " and ": "
// separators, key order kept, non-ASCII kept raw.
func appendPyJSON(dst []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readPyValue(dec, 0)
	if err != nil {
		return dst, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return dst, errors.New("invalid JSON: data after the value")
	}
	return v.appendTo(dst)
}

func readPyValue(dec *json.Decoder, depth int) (pyValue, error) {
	if depth > maxJSONDepth {
		return pyValue{}, errors.New("invalid JSON: nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return pyValue{}, fmt.Errorf("invalid JSON: %w", err)
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := pyValue{kind: 'o'}
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return pyValue{}, fmt.Errorf("invalid JSON: %w", err)
				}
				k, ok := kt.(string)
				if !ok {
					return pyValue{}, errors.New("invalid JSON: object key is not a string")
				}
				val, err := readPyValue(dec, depth+1)
				if err != nil {
					return pyValue{}, err
				}
				if i, dup := index[k]; dup {
					v.vals[i] = val
					continue
				}
				index[k] = len(v.keys)
				v.keys = append(v.keys, k)
				v.vals = append(v.vals, val)
			}
			if _, err := dec.Token(); err != nil {
				return pyValue{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return v, nil
		case '[':
			v := pyValue{kind: 'a'}
			for dec.More() {
				val, err := readPyValue(dec, depth+1)
				if err != nil {
					return pyValue{}, err
				}
				v.vals = append(v.vals, val)
			}
			if _, err := dec.Token(); err != nil {
				return pyValue{}, fmt.Errorf("invalid JSON: %w", err)
			}
			return v, nil
		}
		return pyValue{}, fmt.Errorf("invalid JSON: unexpected %v", x)
	case string:
		return pyValue{kind: 's', str: x}, nil
	case json.Number:
		return pyValue{kind: 'n', num: x}, nil
	case bool:
		return pyValue{kind: 'b', b: x}, nil
	case nil:
		return pyValue{kind: 'z'}, nil
	}
	return pyValue{}, fmt.Errorf("invalid JSON: unexpected token %v", tok)
}

func (v pyValue) appendTo(dst []byte) ([]byte, error) {
	var err error
	switch v.kind {
	case 'o':
		dst = append(dst, '{')
		for i, k := range v.keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendPyString(dst, k)
			dst = append(dst, ": "...)
			if dst, err = v.vals[i].appendTo(dst); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case 'a':
		dst = append(dst, '[')
		for i, e := range v.vals {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			if dst, err = e.appendTo(dst); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case 's':
		return appendPyString(dst, v.str), nil
	case 'n':
		return appendPyNumber(dst, string(v.num))
	case 'b':
		if v.b {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	}
	return append(dst, "null"...), nil
}

// appendPyString quotes s as json.dumps(ensure_ascii=False) does.
func appendPyString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}

// appendPyNumber writes a JSON number as Python re-serializes it: integers
// exactly, everything else via float repr ("1.0", "1e-05", "1e+16",
// "Infinity").
func appendPyNumber(dst []byte, lit string) ([]byte, error) {
	if !strings.ContainsAny(lit, ".eE") {
		n, ok := new(big.Int).SetString(lit, 10)
		if !ok {
			return dst, fmt.Errorf("invalid JSON number %q", lit)
		}
		return n.Append(dst, 10), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return dst, fmt.Errorf("invalid JSON number %q", lit)
	}
	return appendPyFloat(dst, f), nil
}

// appendPyFloat writes Python's repr(float).
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	// Shortest round-trip digits and decimal exponent: d.ddd × 10^exp.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	if neg {
		dst = append(dst, '-')
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	if exp < 0 {
		dst = append(dst, "0."...)
		dst = append(dst, strings.Repeat("0", -exp-1)...)
		return append(dst, digits...)
	}
	if len(digits) <= exp+1 {
		dst = append(dst, digits...)
		dst = append(dst, strings.Repeat("0", exp+1-len(digits))...)
		return append(dst, ".0"...)
	}
	dst = append(dst, digits[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, digits[exp+1:]...)
}
