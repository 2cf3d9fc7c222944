package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Func is the implementation of a tool defined at run time: it receives the
// model's arguments as a JSON object and returns the tool response.
type Func func(ctx context.Context, args json.RawMessage) (string, error)

// Tool is one callable tool: its name, description and schema, and the
// function that runs it. A Tool is immutable and safe for concurrent use if
// its function is.
type Tool struct {
	name        string
	description string
	parameters  json.RawMessage
	ret         json.RawMessage // the result's schema; nil: none
	schema      json.RawMessage
	call        Func
}

// Name is the tool name the model uses in its call.
func (t Tool) Name() string { return t.name }

// Description is the tool description shown to the model.
func (t Tool) Description() string { return t.description }

// Parameters is the JSON schema of the arguments object:
// {"type":"object","properties":{…},"required":[…]}.
func (t Tool) Parameters() json.RawMessage { return t.parameters }

// Return is the JSON schema of the tool's result, the "return" of Schema;
// nil when the tool has none (see Schema). The caller must not modify the
// returned bytes.
func (t Tool) Return() json.RawMessage { return t.ret }

// WithReturn is t with ret as its result's schema, so that its Schema
// carries "return" as a discovered method's does: a tool listed by a
// remote environment then renders into the prompt byte for byte as the
// method it stands for. ret must be a JSON value (surrounding whitespace
// is dropped); nil removes the result's schema.
func (t Tool) WithReturn(ret json.RawMessage) (Tool, error) {
	if ret != nil {
		ret = bytes.TrimSpace(ret)
		if !json.Valid(ret) {
			return Tool{}, fmt.Errorf("tools: tool %q: the return schema is not valid JSON", t.name)
		}
		ret = append(json.RawMessage(nil), ret...)
	}
	t.ret = ret
	t.schema = functionSchema(t.name, t.description, t.parameters, ret)
	return t, nil
}

// Schema is the whole tool schema in get_json_schema's shape and key order:
// {"type":"function","function":{"name":…,"description":…,"parameters":…,
// "return":…}}; "return" (the result's schema, as get_json_schema writes
// for a return annotation) is present for discovered methods whose result
// type has one, absent for tools made with New unless given by WithReturn.
// The caller must not modify the returned bytes.
func (t Tool) Schema() json.RawMessage { return t.schema }

// New makes a tool defined at run time, e.g. one listed by a remote
// environment. parameters is the JSON schema of its arguments object (an
// object schema; nil means no arguments); it is kept byte for byte apart
// from surrounding whitespace. Calls pass fn the arguments object
// unchanged after checking that it is a JSON object; fn validates the rest.
func New(name, description string, parameters json.RawMessage, fn Func) (Tool, error) {
	if name == "" {
		return Tool{}, errors.New("tools: new tool: empty name")
	}
	if fn == nil {
		return Tool{}, fmt.Errorf("tools: new tool %q: nil function", name)
	}
	if description == "" {
		return Tool{}, fmt.Errorf("tools: new tool %q: empty description", name)
	}
	params := bytes.TrimSpace(parameters)
	if len(params) == 0 {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	if !json.Valid(params) || params[0] != '{' {
		return Tool{}, fmt.Errorf("tools: new tool %q: parameters must be a JSON object schema", name)
	}
	params = append([]byte(nil), params...)
	return Tool{
		name:        name,
		description: description,
		parameters:  params,
		schema:      functionSchema(name, description, params, nil),
		call: func(ctx context.Context, args json.RawMessage) (string, error) {
			if err := requireObject(args); err != nil {
				return "", &CallError{Tool: name, Kind: BadArguments, Err: err}
			}
			return fn(ctx, normalizeArgs(args))
		},
	}, nil
}

// functionSchema writes {"type":"function","function":{"name",
// "description","parameters"[,"return"]}}; ret may be nil.
func functionSchema(name, description string, params, ret []byte) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"function","function":{"name":`)
	writeString(&b, name)
	b.WriteString(`,"description":`)
	writeString(&b, description)
	b.WriteString(`,"parameters":`)
	b.Write(params)
	if ret != nil {
		b.WriteString(`,"return":`)
		b.Write(ret)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// Set is the tools of one environment instance (or any collection of
// tools), in a fixed order. A Set is immutable; Call is safe for concurrent
// use when the tools are (an environment's methods usually are not, and
// the trainer calls one rollout's tools from one goroutine).
type Set struct {
	tools  []Tool
	byName map[string]int
}

// NewSet makes a Set of the given tools in the given order. Two tools with
// the same name are an error.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{tools: make([]Tool, 0, len(tools)), byName: make(map[string]int, len(tools))}
	for _, t := range tools {
		if t.call == nil {
			return nil, fmt.Errorf("tools: tool %q was not made by tools.New or Discover", t.name)
		}
		if _, dup := s.byName[t.name]; dup {
			return nil, fmt.Errorf("tools: two tools named %q", t.name)
		}
		s.byName[t.name] = len(s.tools)
		s.tools = append(s.tools, t)
	}
	return s, nil
}

// Join makes one Set of several, in order (TRL offers standalone tools
// before the environment's). A name present in two sets is an error. Nil
// sets are skipped.
func Join(sets ...*Set) (*Set, error) {
	var all []Tool
	for _, s := range sets {
		if s != nil {
			all = append(all, s.tools...)
		}
	}
	return NewSet(all...)
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}

// Tools returns the tools in order. The caller must not modify the slice.
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	return s.tools
}

// Names returns the tool names in order.
func (s *Set) Names() []string {
	names := make([]string, s.Len())
	for i, t := range s.Tools() {
		names[i] = t.name
	}
	return names
}

// Schemas returns each tool's schema in order, ready for a chat template's
// tools list. The caller must not modify the bytes.
func (s *Set) Schemas() []json.RawMessage {
	out := make([]json.RawMessage, s.Len())
	for i, t := range s.Tools() {
		out[i] = t.schema
	}
	return out
}

// Lookup returns the tool named name.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return Tool{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Tool{}, false
	}
	return s.tools[i], true
}

// Call runs the tool named name with the model's JSON arguments (an object;
// empty or null means {}) and returns the tool response for the model.
//
// On failure the response is {"error": "<what went wrong>"} and err is a
// *CallError saying which kind of failure it was; the response is always
// what the model should see, so a caller may use it whatever err is. Call
// recovers a panicking tool, so it never panics itself.
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) (response string, err error) {
	t, ok := s.Lookup(name)
	if !ok {
		msg := fmt.Sprintf("Tool %s not found.", excerpt(name))
		if names := s.Names(); len(names) > 0 {
			msg += " Available tools: " + strings.Join(names, ", ") + "."
		}
		ce := &CallError{Tool: name, Kind: NotFound, Err: errors.New(msg)}
		return ErrorResponse(ce), ce
	}
	if ctx == nil {
		ce := &CallError{Tool: name, Kind: Failed, Err: errors.New("nil context")}
		return ErrorResponse(ce), ce
	}
	if cerr := ctx.Err(); cerr != nil {
		ce := &CallError{Tool: name, Kind: Failed, Err: fmt.Errorf("not run: %w", cerr)}
		return ErrorResponse(ce), ce
	}
	defer func() {
		if p := recover(); p != nil {
			ce := &CallError{Tool: name, Kind: Panicked, Err: fmt.Errorf("tool %s panicked: %v", name, p)}
			response, err = ErrorResponse(ce), ce
		}
	}()
	out, callErr := t.call(ctx, args)
	if callErr != nil {
		var ce *CallError
		if !errors.As(callErr, &ce) {
			ce = &CallError{Tool: name, Kind: Failed, Err: callErr}
		}
		return ErrorResponse(ce), ce
	}
	return out, nil
}

// Kind says why a call failed.
type Kind int

const (
	// NotFound: no tool has the name the model used.
	NotFound Kind = iota + 1
	// BadArguments: the arguments are not a JSON object, have unknown or
	// missing keys, or values of the wrong type.
	BadArguments
	// Failed: the tool ran and returned an error (or its result could not be
	// rendered, or the context was already done).
	Failed
	// Panicked: the tool panicked; the panic was recovered.
	Panicked
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case NotFound:
		return "not_found"
	case BadArguments:
		return "bad_arguments"
	case Failed:
		return "failed"
	case Panicked:
		return "panicked"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// CallError is the error of a failed tool call.
type CallError struct {
	Tool string // the name the model called
	Kind Kind
	Err  error // what went wrong, worded for the model
}

// Error is the message shown to the model.
func (e *CallError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// ErrorResponse renders err as the tool response {"error": "<message>"}.
func ErrorResponse(err error) string {
	var b bytes.Buffer
	b.WriteString(`{"error": `)
	writeString(&b, err.Error())
	b.WriteString(`}`)
	return b.String()
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// requireObject checks that args is empty, null or a JSON object.
func requireObject(args json.RawMessage) error {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || string(a) == "null" {
		return nil
	}
	if !json.Valid(a) {
		return errors.New("arguments are not valid JSON")
	}
	if a[0] != '{' {
		return fmt.Errorf("arguments must be a JSON object, got %s", jsonKind(a[0]))
	}
	return nil
}

// normalizeArgs maps empty and null arguments to {}.
func normalizeArgs(args json.RawMessage) json.RawMessage {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || string(a) == "null" {
		return json.RawMessage("{}")
	}
	return a
}

// jsonKind names the JSON type that starts with byte c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
