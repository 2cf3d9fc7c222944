package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// baseStateSchema is upstream's State model schema, which /schema always
// reports as "state".
const baseStateSchema = `{"additionalProperties":true,"description":"Base class for environment state.\n\nRepresents internal environment state, separate from observations.","properties":{"episode_id":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"description":"Unique identifier for the current episode","title":"Episode Id"},"step_count":{"default":0,"description":"Number of steps taken in the current episode","minimum":0,"title":"Step Count","type":"integer"}},"title":"State","type":"object"}`

// readBody reads a POST body, bounded like the WebSocket read limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.readLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"detail": "request body too large"})
		} else {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "read request body: " + err.Error()})
		}
		return nil, false
	}
	return body, true
}

// handleHealth reports liveness and session capacity: 200 "healthy", or
// 503 "unhealthy" once Shutdown has begun.
func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	status, code := "healthy", http.StatusOK
	s.mu.Lock()
	if s.closing {
		status, code = "unhealthy", http.StatusServiceUnavailable
	}
	s.mu.Unlock()
	writeJSON(w, code, struct {
		Status         string `json:"status"`
		ActiveSessions int    `json:"active_sessions"`
		MaxSessions    int    `json:"max_sessions"`
	}{status, len(s.slots), s.cfg.maxSessions})
}

// metadata returns the factory's Metadata or upstream's defaults.
func (s *Server) metadata() Metadata {
	if d, ok := s.factory.(Describer); ok {
		return d.Metadata()
	}
	return Metadata{Name: s.cfg.name, Description: s.cfg.name + " environment", Version: "1.0.0"}
}

// handleMetadata serves GET /metadata.
func (s *Server) handleMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.metadata())
}

// handleSchema serves GET /schema.
func (s *Server) handleSchema(w http.ResponseWriter, _ *http.Request) {
	action, obs := s.schemas()
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{
		"action": action, "observation": obs, "state": json.RawMessage(baseStateSchema)})
}

// schemas are the action and observation JSON schemas of the factory when
// it is a Describer (each must be valid JSON), else {"type":"object"}.
func (s *Server) schemas() (action, observation json.RawMessage) {
	action, observation = json.RawMessage(`{"type":"object"}`), json.RawMessage(`{"type":"object"}`)
	if d, ok := s.factory.(Describer); ok {
		if a := d.ActionSchema(); json.Valid(a) {
			action = a
		}
		if o := d.ObservationSchema(); json.Valid(o) {
			observation = o
		}
	}
	return action, observation
}

// withFreshEnv builds an env for one stateless HTTP call and closes it.
func (s *Server) withFreshEnv(w http.ResponseWriter, r *http.Request, f func(ctx context.Context, env Environment)) {
	env, err := s.factory.NewEnvironment(r.Context())
	if err != nil {
		http.Error(w, "Environment factory '"+s.cfg.name+"' failed to create instance: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer closeEnv(env, s.cfg.logger)
	f(r.Context(), env)
}

// handleState serves GET /state: the base State fields (episode_id,
// step_count) of a fresh env, as upstream, whose route declares the base
// State as its response model, so pydantic leaves out every field of an
// env's State subclass. An env's own state (Wordle's holds the secret word)
// is reachable only through the WebSocket session that owns the env.
func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	s.withFreshEnv(w, r, func(ctx context.Context, env Environment) {
		var st json.RawMessage
		_, err := safeCall(func() (Result, error) {
			var err error
			st, err = env.State(ctx)
			return Result{}, err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		base, err := baseState(st)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeRawJSON(w, http.StatusOK, base)
	})
}

// baseState keeps the fields of upstream's base State model from an env's
// state, with their defaults (null, 0) when absent.
func baseState(st json.RawMessage) ([]byte, error) {
	ms, err := parseObject(st)
	if err != nil {
		return nil, errors.New("environment returned a state that is not a JSON object")
	}
	id, steps := json.RawMessage("null"), json.RawMessage("0")
	for _, m := range ms {
		switch m.Key {
		case "episode_id":
			id = m.Value
		case "step_count":
			steps = m.Value
		}
	}
	b := append([]byte(`{"episode_id":`), compactOrSame(id)...)
	b = append(b, `,"step_count":`...)
	b = append(b, compactOrSame(steps)...)
	return append(b, '}'), nil
}

// detail writes FastAPI's 422 {"detail":[…]} body.
func detail(w http.ResponseWriter, errs []FieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string][]FieldError{"detail": errs})
}

// parseBody decodes a POST body as a JSON object; an empty body is {}.
// It answers 422 itself when the body is not an object.
func parseBody(w http.ResponseWriter, body []byte) ([]member, bool) {
	if len(body) == 0 {
		return nil, true
	}
	ms, err := parseObject(body)
	if err != nil {
		var no errNotObject
		if errors.As(err, &no) {
			fe := fieldError("model_attributes_type", "Input should be a valid dictionary or object to extract fields from", rawInput(body), "body")
			fe.URL = ""
			detail(w, []FieldError{fe})
			return nil, false
		}
		fe := FieldError{Type: "json_invalid", Loc: []any{"body", 0}, Msg: "JSON decode error",
			Input: map[string]any{}, Ctx: map[string]any{"error": jsonErrorText(err)}}
		detail(w, []FieldError{fe})
		return nil, false
	}
	return ms, true
}

// bodyFieldErrors checks the typed fields of ResetRequest/StepRequest.
func bodyFieldErrors(ms []member) []FieldError {
	var errs []FieldError
	for _, m := range ms {
		in := rawInput(m.Value)
		switch m.Key {
		case "seed":
			if string(m.Value) == "null" {
				continue
			}
			var n int64
			if err := json.Unmarshal(m.Value, &n); err != nil {
				errs = append(errs, FieldError{Type: "int_type", Loc: []any{"body", "seed"}, Msg: "Input should be a valid integer", Input: in})
			} else if n < 0 {
				errs = append(errs, FieldError{Type: "greater_than_equal", Loc: []any{"body", "seed"}, Msg: "Input should be greater than or equal to 0", Input: in, Ctx: map[string]any{"ge": 0}})
			}
		case "episode_id", "request_id":
			if string(m.Value) == "null" {
				continue
			}
			var str string
			if err := json.Unmarshal(m.Value, &str); err != nil {
				errs = append(errs, FieldError{Type: "string_type", Loc: []any{"body", m.Key}, Msg: "Input should be a valid string", Input: in})
			} else if len([]rune(str)) > 255 {
				errs = append(errs, FieldError{Type: "string_too_long", Loc: []any{"body", m.Key}, Msg: "String should have at most 255 characters", Input: in, Ctx: map[string]any{"max_length": 255}})
			}
		case "timeout_s":
			if string(m.Value) == "null" {
				continue
			}
			var f float64
			if err := json.Unmarshal(m.Value, &f); err != nil {
				errs = append(errs, FieldError{Type: "float_type", Loc: []any{"body", "timeout_s"}, Msg: "Input should be a valid number", Input: in})
			} else if f <= 0 {
				errs = append(errs, FieldError{Type: "greater_than", Loc: []any{"body", "timeout_s"}, Msg: "Input should be greater than 0", Input: in, Ctx: map[string]any{"gt": 0}})
			}
		}
	}
	return errs
}

// writeResult answers a stateless reset/step with the env's outcome.
func writeResult(w http.ResponseWriter, res Result, err error) {
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			detail(w, ve.Errors)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	data, err := observationData(res)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRawJSON(w, http.StatusOK, data)
}

// handleReset serves the stateless POST /reset: a fresh env, reset with the
// body's keys, then closed.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	ms, ok := parseBody(w, body)
	if !ok {
		return
	}
	if errs := bodyFieldErrors(ms); errs != nil {
		detail(w, errs)
		return
	}
	opts := json.RawMessage("{}")
	if len(ms) > 0 {
		opts = compactOrSame(body)
	}
	s.withFreshEnv(w, r, func(ctx context.Context, env Environment) {
		res, err := safeCall(func() (Result, error) { return env.Reset(ctx, opts) })
		writeResult(w, res, err)
	})
}

// handleStep serves the stateless POST /step: a fresh env (not reset, as
// upstream) runs body.action once and is closed. timeout_s bounds the step.
func (s *Server) handleStep(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	ms, ok := parseBody(w, body)
	if !ok {
		return
	}
	errs := bodyFieldErrors(ms)
	var action json.RawMessage
	var timeout float64
	for _, m := range ms {
		switch m.Key {
		case "action":
			action = m.Value
		case "timeout_s":
			_ = json.Unmarshal(m.Value, &timeout)
		}
	}
	switch {
	case action == nil:
		errs = append([]FieldError{{Type: "missing", Loc: []any{"body", "action"}, Msg: "Field required", Input: membersInput(ms)}}, errs...)
	case action[0] != '{':
		errs = append([]FieldError{{Type: "dict_type", Loc: []any{"body", "action"}, Msg: "Input should be a valid dictionary", Input: rawInput(action)}}, errs...)
	}
	if errs != nil {
		detail(w, errs)
		return
	}
	s.withFreshEnv(w, r, func(ctx context.Context, env Environment) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(min(timeout, 86400)*float64(time.Second)))
			defer cancel()
		}
		res, err := safeCall(func() (Result, error) { return env.Step(ctx, action) })
		writeResult(w, res, err)
	})
}

// handleMCP serves the stateless POST /mcp: the body is one JSON-RPC 2.0
// request, answered (always with 200, as upstream) by a fresh env that is
// an MCPHandler, or with -32603 "Environment does not support MCP". A body
// that is not JSON gets -32700, one that is not an object -32600.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	null := json.RawMessage("null")
	if _, err := parseObject(body); err != nil {
		var no errNotObject
		if errors.As(err, &no) {
			writeRawJSON(w, http.StatusOK, jsonRPCError(null, -32600, "Invalid Request: the body must be a JSON-RPC request object, got "+no.kind))
			return
		}
		writeRawJSON(w, http.StatusOK, jsonRPCError(null, -32700, "Parse error: "+jsonErrorText(err)))
		return
	}
	s.withFreshEnv(w, r, func(ctx context.Context, env Environment) {
		writeRawJSON(w, http.StatusOK, mcpReply(ctx, env, body))
	})
}
