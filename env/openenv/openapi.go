package openenv

import (
	"encoding/json"
	"net/http"
	"strings"
)

// handleOpenAPI serves GET /openapi.json: an OpenAPI 3.1 description of the
// HTTP routes, as FastAPI serves for the Python server (the same paths and
// methods). WebSocket /ws is not an OpenAPI operation; the info
// description names it. Action and observation schemas come from the
// factory when it is a Describer.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.openAPI())
}

// openAPI builds the document handleOpenAPI serves.
func (s *Server) openAPI() map[string]any {
	md := s.metadata()
	rawAction, rawObs := s.schemas()
	defs := map[string]any{}
	action, obs := hoistDefs(rawAction, defs), hoistDefs(rawObs, defs)
	object := map[string]any{"type": "object"}
	jsonBody := func(schema any) map[string]any {
		return map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
	}
	ok := func(desc string, schema any) map[string]any {
		r := jsonBody(schema)
		r["description"] = desc
		return r
	}
	result := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"observation": obs,
			"reward":      map[string]any{"anyOf": []any{map[string]any{"type": "number"}, map[string]any{"type": "null"}}},
			"done":        map[string]any{"type": "boolean"},
		},
		"required": []string{"observation", "reward", "done"},
	}
	invalid := ok("Validation Error: {\"detail\":[pydantic-style errors]}", object)
	optionalString := map[string]any{"anyOf": []any{map[string]any{"type": "string", "maxLength": 255}, map[string]any{"type": "null"}}}
	resetReq := map[string]any{
		"type": "object", "additionalProperties": true,
		"properties": map[string]any{
			"seed":       map[string]any{"anyOf": []any{map[string]any{"type": "integer", "minimum": 0}, map[string]any{"type": "null"}}},
			"episode_id": optionalString,
		},
	}
	stepReq := map[string]any{
		"type": "object", "additionalProperties": true,
		"properties": map[string]any{
			"action":     action,
			"timeout_s":  map[string]any{"anyOf": []any{map[string]any{"type": "number", "exclusiveMinimum": 0}, map[string]any{"type": "null"}}},
			"request_id": optionalString,
		},
		"required": []string{"action"},
	}
	get := func(summary string, resp map[string]any) map[string]any {
		return map[string]any{"get": map[string]any{"summary": summary, "responses": map[string]any{"200": resp}}}
	}
	post := func(summary string, body map[string]any, responses map[string]any) map[string]any {
		return map[string]any{"post": map[string]any{"summary": summary, "requestBody": body, "responses": responses}}
	}
	resetBody, stepBody := jsonBody(resetReq), jsonBody(stepReq)
	stepBody["required"] = true
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   md.Name,
			"version": md.Version,
			"description": md.Description + ". Sessions run over the WebSocket GET /ws (one env per socket; OpenEnv " +
				"frames reset, step, state, close, mcp), which OpenAPI does not describe. The HTTP /reset, /step and " +
				"/state are stateless: each builds a fresh env.",
		},
		"paths": map[string]any{
			"/health": get("Liveness and session capacity", ok("Healthy", map[string]any{
				"type": "object",
				"properties": map[string]any{
					"status":          map[string]any{"type": "string", "enum": []string{"healthy", "unhealthy"}},
					"active_sessions": map[string]any{"type": "integer"},
					"max_sessions":    map[string]any{"type": "integer"},
				},
			})),
			"/metadata": get("Environment metadata", ok("Metadata", object)),
			"/schema":   get("Action, observation and state JSON schemas", ok("Schemas", object)),
			"/state":    get("State of a fresh environment", ok("State", object)),
			"/reset": post("Reset a fresh environment (stateless)", resetBody,
				map[string]any{"200": ok("Observation", result), "422": invalid}),
			"/step": post("Step a fresh environment once (stateless)", stepBody,
				map[string]any{"200": ok("Observation", result), "422": invalid}),
			"/mcp": post("JSON-RPC 2.0 MCP request to a fresh environment (stateless)", jsonBody(object),
				map[string]any{"200": ok("JSON-RPC response (errors too)", object)}),
		},
	}
	components := map[string]any{}
	if len(defs) > 0 {
		components["schemas"] = defs
	}
	if s.cfg.token != "" {
		health := doc["paths"].(map[string]any)["/health"].(map[string]any)["get"].(map[string]any)
		health["security"] = []any{} // /health never asks for the token
		components["securitySchemes"] = map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}
		doc["security"] = []any{map[string]any{"bearer": []string{}}}
	}
	if len(components) > 0 {
		doc["components"] = components
	}
	return doc
}

// hoistDefs makes a standalone JSON schema embeddable in the OpenAPI
// document, as FastAPI does: its $defs move to components/schemas (added
// to defs) and its "#/$defs/X" references become "#/components/schemas/X",
// which resolve from the document's root. schema is valid JSON (schemas
// checks it).
func hoistDefs(schema json.RawMessage, defs map[string]any) any {
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return schema
	}
	if m, ok := v.(map[string]any); ok {
		if d, ok := m["$defs"].(map[string]any); ok {
			for k, def := range d {
				defs[k] = rewriteRefs(def)
			}
			delete(m, "$defs")
		}
	}
	return rewriteRefs(v)
}

// rewriteRefs points every local $defs reference in v at components/schemas.
func rewriteRefs(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if ref, ok := e.(string); ok && k == "$ref" && strings.HasPrefix(ref, "#/$defs/") {
				x[k] = "#/components/schemas/" + strings.TrimPrefix(ref, "#/$defs/")
				continue
			}
			x[k] = rewriteRefs(e)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteRefs(e)
		}
	}
	return v
}
