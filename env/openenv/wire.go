package openenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/x/env"
)

// ErrorCode is the code of an OpenEnv error frame (WSErrorCode upstream).
// It implements error so that errors.Is(err, CodeCapacityReached) matches
// any *ServerError carrying that code.
type ErrorCode string

// The error codes an OpenEnv server sends in {"type":"error"} frames.
const (
	// CodeInvalidJSON: the frame is not JSON. The session stays open.
	CodeInvalidJSON ErrorCode = "INVALID_JSON"
	// CodeUnknownType: the frame's "type" is missing or unknown. Open.
	CodeUnknownType ErrorCode = "UNKNOWN_TYPE"
	// CodeValidationError: the frame or the action failed validation; the
	// ServerError's Errors list the fields. Open.
	CodeValidationError ErrorCode = "VALIDATION_ERROR"
	// CodeExecutionError: the env's reset, step or state failed. Open.
	CodeExecutionError ErrorCode = "EXECUTION_ERROR"
	// CodeCapacityReached: at connect, every session slot is taken. The
	// server closes the socket.
	CodeCapacityReached ErrorCode = "CAPACITY_REACHED"
	// CodeFactoryError: at connect, the env factory failed. Closed.
	CodeFactoryError ErrorCode = "FACTORY_ERROR"
	// CodeSessionError: anything else that ends the session (a binary
	// frame, a frame that is not a JSON object, an idle session reaped).
	// Closed.
	CodeSessionError ErrorCode = "SESSION_ERROR"
)

// Error returns the code itself.
func (c ErrorCode) Error() string { return string(c) }

// closesSession reports whether the server ends the session after sending
// an error frame with this code.
func (c ErrorCode) closesSession() bool {
	return c == CodeCapacityReached || c == CodeFactoryError || c == CodeSessionError
}

// ServerError is an {"type":"error"} frame received from a server. Use
// errors.Is(err, CodeXxx) to test the code and errors.As to read the
// details.
type ServerError struct {
	Code    ErrorCode
	Message string
	// Errors lists the failing fields of a VALIDATION_ERROR.
	Errors []FieldError
	// ActiveSessions and MaxSessions come with CAPACITY_REACHED.
	ActiveSessions int
	MaxSessions    int
	// FactoryName comes with FACTORY_ERROR.
	FactoryName string
	// Data is the whole data object of the frame, for fields not above.
	Data json.RawMessage
}

// Error formats the error like the Python client does.
func (e *ServerError) Error() string {
	return fmt.Sprintf("openenv server error: %s (code: %s)", e.Message, e.Code)
}

// Is matches an ErrorCode equal to e.Code, or a *ServerError with the same
// code; CAPACITY_REACHED also matches env.ErrUnavailable (a session may
// free up).
func (e *ServerError) Is(target error) bool {
	switch t := target.(type) {
	case ErrorCode:
		return t == e.Code
	case *ServerError:
		return t.Code == e.Code
	}
	return target == env.ErrUnavailable && e.Code == CodeCapacityReached
}

// wireErrorData is the data object of an error frame as written on the
// wire; field order follows upstream.
type wireErrorData struct {
	Message        string       `json:"message"`
	Code           ErrorCode    `json:"code"`
	Errors         []FieldError `json:"errors,omitempty"`
	ActiveSessions *int         `json:"active_sessions,omitempty"`
	MaxSessions    *int         `json:"max_sessions,omitempty"`
	FactoryName    string       `json:"factory_name,omitempty"`
}

// toWire converts e to the error frame's data object.
func (e *ServerError) toWire() wireErrorData {
	d := wireErrorData{Message: e.Message, Code: e.Code, Errors: e.Errors, FactoryName: e.FactoryName}
	if e.Code == CodeCapacityReached {
		a, m := e.ActiveSessions, e.MaxSessions
		d.ActiveSessions, d.MaxSessions = &a, &m
	}
	return d
}

// errorFrame encodes e as a complete {"type":"error","data":{…}} frame.
func errorFrame(e *ServerError) []byte {
	return mustFrame("error", e.toWire())
}

// parseServerError decodes an error frame's data object.
func parseServerError(data json.RawMessage) *ServerError {
	var d struct {
		Message        string       `json:"message"`
		Code           ErrorCode    `json:"code"`
		Errors         []FieldError `json:"errors"`
		ActiveSessions int          `json:"active_sessions"`
		MaxSessions    int          `json:"max_sessions"`
		FactoryName    string       `json:"factory_name"`
	}
	e := &ServerError{Data: append(json.RawMessage(nil), data...)}
	if err := json.Unmarshal(data, &d); err != nil {
		e.Code = CodeSessionError
		e.Message = fmt.Sprintf("malformed error frame from server: %v", err)
		return e
	}
	e.Code, e.Message, e.Errors = d.Code, d.Message, d.Errors
	e.ActiveSessions, e.MaxSessions, e.FactoryName = d.ActiveSessions, d.MaxSessions, d.FactoryName
	return e
}

// frame is the envelope of every WebSocket message in both directions.
type frame struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// marshalCompact writes v as compact JSON without HTML escaping, the way
// pydantic does (raw UTF-8, no spaces).
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// mustFrame encodes a frame whose data is a value of a type this package
// controls (no channels or funcs), so encoding cannot fail.
func mustFrame(typ string, data any) []byte {
	b, err := marshalCompact(data)
	if err != nil {
		panic(fmt.Sprintf("openenv: encoding a %s frame: %v", typ, err))
	}
	return rawFrame(typ, b)
}

// rawFrame builds {"type":typ,"data":data} around already-encoded data.
func rawFrame(typ string, data []byte) []byte {
	out := make([]byte, 0, len(data)+len(typ)+20)
	out = append(out, `{"type":"`...)
	out = append(out, typ...)
	out = append(out, `","data":`...)
	out = append(out, data...)
	return append(out, '}')
}

// appendPyFloat appends f the way Python's repr (and so pydantic) writes
// it: 0.0 not 0, 1e-05 not 1e-5 style exponents from 1e16 up and below
// 1e-4; NaN and ±Inf become null, as pydantic's JSON mode does.
func appendPyFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	abs := math.Abs(f)
	if abs >= 1e16 || abs < 1e-4 {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, 64)
	if !bytes.ContainsRune(b[start:], '.') {
		b = append(b, ".0"...)
	}
	return b
}

// observationData builds the data object of an observation frame (and the
// body of POST /reset and /step): {"observation":…,"reward":…,"done":…}.
func observationData(r Result) ([]byte, error) {
	return appendObservationData(nil, r)
}

// observationFrame builds a whole {"type":"observation","data":…} frame
// in one buffer.
func observationFrame(r Result) ([]byte, error) {
	const head = `{"type":"observation","data":`
	b := append(make([]byte, 0, len(head)+len(r.Observation)+64+1), head...)
	b, err := appendObservationData(b, r)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendObservationData appends the data object of an observation frame
// to dst (nil: a buffer of the right size is made).
func appendObservationData(dst []byte, r Result) ([]byte, error) {
	obs := bytes.TrimSpace(r.Observation)
	if len(obs) == 0 {
		obs = []byte("{}")
	} else if obs[0] != '{' || !json.Valid(obs) {
		return nil, fmt.Errorf("environment returned an observation that is not a JSON object: %.80q", obs)
	}
	if need := len(dst) + len(obs) + 64; cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	out := append(dst, `{"observation":`...)
	out = append(out, obs...)
	out = append(out, `,"reward":`...)
	if r.Reward == nil {
		out = append(out, "null"...)
	} else {
		out = appendPyFloat(out, *r.Reward)
	}
	out = append(out, `,"done":`...)
	out = strconv.AppendBool(out, r.Done)
	return append(out, '}'), nil
}

// parseObservationData decodes the data object of an observation frame.
// reward may be a number, a bool (Observation.reward allows bool|int|float)
// or null.
func parseObservationData(data json.RawMessage) (Result, error) {
	ms, err := parseObject(data)
	if err != nil {
		return Result{}, fmt.Errorf("decode observation frame: %w", err)
	}
	var res Result
	var reward []byte
	for _, m := range ms {
		switch m.Key {
		case "observation":
			res.Observation = m.Value
		case "reward":
			reward = m.Value
		case "done":
			switch string(m.Value) {
			case "true":
				res.Done = true
			case "false", "null":
			default:
				return Result{}, fmt.Errorf("decode observation frame: done is %s, not a boolean", jsonKind(m.Value))
			}
		}
	}
	if len(res.Observation) == 0 || string(res.Observation) == "null" {
		res.Observation = json.RawMessage("{}")
	} else if res.Observation[0] != '{' {
		return Result{}, fmt.Errorf("decode observation frame: observation is %s, not an object", jsonKind(res.Observation))
	}
	switch r := string(reward); r {
	case "", "null":
	case "true", "false":
		v := 0.0
		if r == "true" {
			v = 1
		}
		res.Reward = &v
	default:
		v, err := strconv.ParseFloat(r, 64)
		if err != nil {
			return Result{}, fmt.Errorf("decode observation frame: reward %.40q is not a number", r)
		}
		res.Reward = &v
	}
	return res, nil
}

// parseFrame splits a frame into its type and data.
func parseFrame(raw []byte) (typ string, data json.RawMessage, err error) {
	ms, err := parseObject(raw)
	if err != nil {
		return "", nil, err
	}
	for _, m := range ms {
		switch m.Key {
		case "type":
			if err := json.Unmarshal(m.Value, &typ); err != nil {
				return "", nil, fmt.Errorf("frame type is %s, not a string", jsonKind(m.Value))
			}
		case "data":
			data = m.Value
		}
	}
	return typ, data, nil
}

// member is one key/value of a JSON object, in document order.
type member struct {
	Key   string
	Value json.RawMessage
}

// errNotObject reports valid JSON that is not an object; kind names its
// JSON type.
type errNotObject struct{ kind string }

// Error names the JSON type found.
func (e errNotObject) Error() string { return "a JSON object is required, got " + e.kind }

// parseObject splits a JSON object into its members in document order
// (duplicate keys keep the last value, like Python's json). It returns a
// *json.SyntaxError-wrapping error for invalid JSON and errNotObject for
// valid JSON of another type. Values are subslices of b.
func parseObject(b []byte) ([]member, error) {
	if !json.Valid(b) {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, errNotObject{kind: jsonKind(b[i:])}
	}
	// b is valid JSON, so a plain scan needs no error handling. Frames
	// have a handful of keys: duplicates are found by a linear search
	// until there are many.
	ms := make([]member, 0, 4)
	var index map[string]int
	i = skipSpace(b, i+1)
	for b[i] != '}' {
		end := scanValue(b, i)
		key := commonKey(b[i+1 : end-1])
		if bytes.IndexByte(b[i:end], '\\') >= 0 || !utf8.Valid(b[i:end]) {
			_ = json.Unmarshal(b[i:end], &key)
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // ':'
		end = scanValue(b, i)
		v := json.RawMessage(b[i:end])
		j := -1
		if index != nil {
			if k, ok := index[key]; ok {
				j = k
			}
		} else {
			for k := range ms {
				if ms[k].Key == key {
					j = k
					break
				}
			}
		}
		if j >= 0 {
			ms[j].Value = v
		} else {
			ms = append(ms, member{Key: key, Value: v})
			if index != nil {
				index[key] = len(ms) - 1
			} else if len(ms) == 16 {
				index = make(map[string]int, 32)
				for k := range ms {
					index[ms[k].Key] = k
				}
			}
		}
		i = skipSpace(b, end)
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return ms, nil
}

// commonKey returns raw (a key's bytes between its quotes) as a string,
// without allocating for the keys every frame has.
func commonKey(raw []byte) string {
	switch string(raw) {
	case "type":
		return "type"
	case "data":
		return "data"
	case "observation":
		return "observation"
	case "reward":
		return "reward"
	case "done":
		return "done"
	}
	return string(raw)
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanValue returns the end of the valid JSON value starting at b[i].
func scanValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; ; j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = scanValue(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i // a number, true, false or null
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}

// jsonKind names the JSON type of a valid value by its first byte.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	}
	return "a number"
}

// pydanticURL is the documentation link pydantic 2.13 puts on errors.
const pydanticURL = "https://errors.pydantic.dev/2.13/v/"

// fieldError builds a pydantic-style error entry.
func fieldError(typ, msg string, input any, loc ...any) FieldError {
	return FieldError{Type: typ, Loc: loc, Msg: msg, Input: input, URL: pydanticURL + typ}
}

// rawInput decodes a raw JSON value for a FieldError's input, keeping
// numbers exact.
func rawInput(v json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return string(v)
	}
	return out
}

// jsonErrorText describes a JSON syntax error with its byte offset.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (char %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

// appendCompact appends src with insignificant whitespace removed.
func appendCompact(dst, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
