package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
)

// MCPHandler is an optional Environment capability: it answers the
// JSON-RPC 2.0 requests of {"type":"mcp","data":{…}} frames (tools/list,
// tools/call). The reply is the JSON-RPC response object. Environments
// without it get upstream's -32603 "Environment does not support MCP".
type MCPHandler interface {
	HandleMCP(ctx context.Context, request json.RawMessage) json.RawMessage
}

// reply is what the server does after one frame: send frame (if not nil),
// then end the session with close code 1000 if closeAfter.
type reply struct {
	frame      []byte
	closeAfter bool
}

// The frame keys each message type allows (pydantic models with
// extra="forbid").
var (
	keysTypeData = map[string]bool{"type": true, "data": true}
	keysTypeOnly = map[string]bool{"type": true}
)

// handleFrame answers one text frame for env. It never panics on any
// input: bad frames get OpenEnv's error frames, env panics become
// EXECUTION_ERROR. It is the socket-free core of a session.
func handleFrame(ctx context.Context, env Environment, msg []byte) reply {
	members, err := parseObject(msg)
	if err != nil {
		var no errNotObject
		if errors.As(err, &no) {
			return errorReply(&ServerError{Code: CodeSessionError,
				Message: "message must be a JSON object with a \"type\" key, got " + no.kind})
		}
		return errorReply(&ServerError{Code: CodeInvalidJSON, Message: "Invalid JSON: " + jsonErrorText(err)})
	}
	var typ string
	var data json.RawMessage
	hasData := false
	for _, m := range members {
		switch m.Key {
		case "type":
			typ = frameType(m.Value)
		case "data":
			data, hasData = m.Value, true
		}
	}
	switch typ {
	case "reset":
		if errs := frameErrors(members, keysTypeData, false, data, hasData); errs != nil {
			return validationReply(errs)
		}
		if !hasData || string(data) == "{}" {
			data = json.RawMessage("{}")
		}
		res, err := safeCall(func() (Result, error) { return env.Reset(ctx, data) })
		return resultReply(res, err)
	case "step":
		if errs := frameErrors(members, keysTypeData, true, data, hasData); errs != nil {
			return validationReply(errs)
		}
		res, err := safeCall(func() (Result, error) { return env.Step(ctx, data) })
		return resultReply(res, err)
	case "state":
		if errs := frameErrors(members, keysTypeOnly, false, nil, false); errs != nil {
			return validationReply(errs)
		}
		var st json.RawMessage
		_, err := safeCall(func() (Result, error) {
			var err error
			st, err = env.State(ctx)
			return Result{}, err
		})
		if err != nil {
			return errorReply(&ServerError{Code: CodeExecutionError, Message: err.Error()})
		}
		if _, perr := parseObject(st); perr != nil {
			return errorReply(&ServerError{Code: CodeExecutionError,
				Message: fmt.Sprintf("environment returned a state that is not a JSON object: %.80q", st)})
		}
		return reply{frame: rawFrame("state", compactOrSame(st))}
	case "close":
		if errs := frameErrors(members, keysTypeOnly, false, nil, false); errs != nil {
			return validationReply(errs)
		}
		return reply{closeAfter: true}
	case "mcp":
		if errs := frameErrors(members, keysTypeData, true, data, hasData); errs != nil {
			return validationReply(errs)
		}
		return reply{frame: rawFrame("mcp", mcpReply(ctx, env, data))}
	}
	return errorReply(&ServerError{Code: CodeUnknownType, Message: "Unknown message type: " + typ})
}

// frameType decodes a frame's "type" value. The known types, written
// plainly, are matched without decoding (no allocation per frame); any
// other value is decoded as a JSON string, or kept as written when it is
// not one (for the UNKNOWN_TYPE message).
func frameType(v json.RawMessage) string {
	switch string(v) {
	case `"step"`:
		return "step"
	case `"reset"`:
		return "reset"
	case `"state"`:
		return "state"
	case `"close"`:
		return "close"
	case `"mcp"`:
		return "mcp"
	}
	var typ string
	if err := json.Unmarshal(v, &typ); err != nil {
		return string(v)
	}
	return typ
}

// frameErrors validates a frame's keys the way upstream's pydantic models
// do: data (when allowed) must be an object and is required if
// dataRequired; any other key is extra_forbidden. Errors come in pydantic's
// order: the data field first, then extras in document order.
func frameErrors(members []member, allowed map[string]bool, dataRequired bool, data json.RawMessage, hasData bool) []FieldError {
	var errs []FieldError
	if allowed["data"] {
		switch {
		case !hasData && dataRequired:
			errs = append(errs, fieldError("missing", "Field required", membersInput(members), "data"))
		case hasData && (len(data) == 0 || data[0] != '{'):
			errs = append(errs, fieldError("dict_type", "Input should be a valid dictionary", rawInput(data), "data"))
		}
	}
	for _, m := range members {
		if !allowed[m.Key] {
			errs = append(errs, fieldError("extra_forbidden", "Extra inputs are not permitted", rawInput(m.Value), m.Key))
		}
	}
	return errs
}

// membersInput rebuilds a frame object for a FieldError's input, keeping
// key order.
func membersInput(members []member) any {
	b := []byte{'{'}
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := marshalCompact(m.Key)
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, m.Value...)
	}
	b = append(b, '}')
	return json.RawMessage(compactOrSame(b))
}

// compactOrSame strips insignificant whitespace from valid JSON.
func compactOrSame(b []byte) []byte {
	var buf = make([]byte, 0, len(b))
	out, err := appendCompact(buf, b)
	if err != nil {
		return b
	}
	return out
}

// safeCall runs an environment method, turning a panic into an error so
// that one broken env cannot take the server down.
func safeCall(f func() (Result, error)) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("environment panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return f()
}

// resultReply turns an env's reset/step outcome into a frame.
func resultReply(res Result, err error) reply {
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return validationReply(ve.Errors)
		}
		return errorReply(&ServerError{Code: CodeExecutionError, Message: err.Error()})
	}
	frame, err := observationFrame(res)
	if err != nil {
		return errorReply(&ServerError{Code: CodeExecutionError, Message: err.Error()})
	}
	return reply{frame: frame}
}

// validationReply is upstream's VALIDATION_ERROR frame.
func validationReply(errs []FieldError) reply {
	if errs == nil {
		errs = []FieldError{}
	}
	return errorReply(&ServerError{Code: CodeValidationError, Message: "Invalid message", Errors: errs})
}

// errorReply sends e, closing the session for codes that end it.
func errorReply(e *ServerError) reply {
	return reply{frame: errorFrame(e), closeAfter: e.Code.closesSession()}
}

// mcpReply answers an mcp frame's JSON-RPC request.
func mcpReply(ctx context.Context, env Environment, req json.RawMessage) []byte {
	var id json.RawMessage
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(req, &head) == nil && len(head.ID) > 0 {
		id = head.ID
	} else {
		id = json.RawMessage("null")
	}
	if h, ok := env.(MCPHandler); ok {
		var out json.RawMessage
		_, err := safeCall(func() (Result, error) {
			out = h.HandleMCP(ctx, req)
			return Result{}, nil
		})
		if err == nil && json.Valid(out) {
			return compactOrSame(out)
		}
		msg := "MCP handler returned invalid JSON"
		if err != nil {
			msg = err.Error()
		}
		return jsonRPCError(id, -32603, msg)
	}
	return jsonRPCError(id, -32603, "Environment does not support MCP")
}

// jsonRPCError builds a JSON-RPC 2.0 error response.
func jsonRPCError(id json.RawMessage, code int, msg string) []byte {
	m, _ := marshalCompact(msg)
	out := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s,"data":null}}`, compactOrSame(id), code, m)
	return out
}
