package openenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/x/env"
	"github.com/x/tools"
)

// FromFactory serves tool-style environments (env.Env, whose exported
// methods are tools, see package tools) as OpenEnv environments with the
// MCP-style actions of upstream's MCPEnvironment:
//
//	{"type":"list_tools"} → {"tools":[{"name","description","input_schema"}]}
//	{"type":"call_tool","tool_name":…,"arguments":{…}}
//	    → {"tool_name","result","error"}, result in FastMCP's CallToolResult
//	      shape ({"content":[{"type":"text","text":…}],"structured_content",
//	      "data","is_error"}), error {"error_type","message"} or null
//
// Reset passes the reset data (minus seed and episode_id) to Env.Reset as
// the env.Row and answers {"text": <initial observation>}. Every reply's
// reward is the env's Reward when it is an env.Rewarder, else null; done
// is always false (tool envs have no terminal flag). {"type":"mcp"} frames
// with JSON-RPC tools/list and tools/call are served too. opts are passed
// to tools.Discover.
func FromFactory(f env.Factory, name string, opts ...tools.Option) EnvironmentFactory {
	return &toolFactory{f: f, name: name, opts: opts}
}

// toolFactory is the EnvironmentFactory FromFactory returns.
type toolFactory struct {
	f    env.Factory
	name string
	opts []tools.Option
}

// NewEnvironment makes an env and discovers its tools.
func (tf *toolFactory) NewEnvironment(ctx context.Context) (Environment, error) {
	e, err := tf.f.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("new %s env: %w", tf.name, err)
	}
	set, err := env.Tools(e, tf.opts...)
	if err != nil {
		if c, ok := e.(env.Closer); ok {
			_ = c.Close()
		}
		return nil, fmt.Errorf("discover %s tools: %w", tf.name, err)
	}
	return &toolEnvironment{env: e, tools: set, opts: tf.opts}, nil
}

// Metadata describes the served env.
func (tf *toolFactory) Metadata() Metadata {
	return Metadata{Name: tf.name, Description: tf.name + " environment (MCP-style tools)", Version: "1.0.0"}
}

// ActionSchema is the union of ListToolsAction and CallToolAction.
func (tf *toolFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"oneOf":[{"type":"object","properties":{"type":{"const":"list_tools"},"metadata":{"type":"object"}},"required":["type"],"additionalProperties":false},{"type":"object","properties":{"type":{"const":"call_tool"},"tool_name":{"type":"string"},"arguments":{"type":"object"},"metadata":{"type":"object"}},"required":["type","tool_name"],"additionalProperties":false}],"title":"MCPAction"}`)
}

// ObservationSchema covers both observation shapes.
func (tf *toolFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"tools":{"type":"array"},"tool_name":{"type":"string"},"result":{},"error":{}},"title":"MCPObservation"}`)
}

// toolEnvironment is one session of a tool-style env.
type toolEnvironment struct {
	env       env.Env
	tools     *tools.Set
	opts      []tools.Option // for an env.DynamicTools env, rediscovered after each Reset
	episodeID string
	steps     int
}

// toolInfo is one entry of a list_tools observation. ReturnSchema is our
// extension: the tool's "return" schema (tools.Tool.Return), sent only to
// a client that asks for it (returnSchemasKey in the action's metadata),
// because upstream's Tool model forbids extra fields.
type toolInfo struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	ReturnSchema json.RawMessage `json:"return_schema,omitempty"`
}

// returnSchemasKey, set to true in a list_tools action's metadata, asks a
// server of ours for each tool's return schema, so that a remote env's
// tools render into the prompt exactly as the env's methods do locally.
// Upstream servers ignore it (metadata is free-form there).
const returnSchemasKey = "return_schemas"

// Reset starts an episode with the reset data as the row.
func (te *toolEnvironment) Reset(ctx context.Context, opts json.RawMessage) (Result, error) {
	row := env.Row{}
	if err := json.Unmarshal(opts, &row); err != nil {
		return Result{}, fmt.Errorf("reset data: %w", err)
	}
	te.episodeID = ""
	if id, ok := row["episode_id"].(string); ok {
		te.episodeID = id
	}
	delete(row, "episode_id")
	delete(row, "seed")
	if te.episodeID == "" {
		te.episodeID = newEpisodeID()
	}
	te.steps = 0
	text, err := te.env.Reset(ctx, row)
	if err != nil {
		return Result{}, err
	}
	if _, ok := te.env.(env.DynamicTools); ok {
		if te.tools, err = env.Tools(te.env, te.opts...); err != nil {
			return Result{}, err
		}
	}
	obs, err := marshalCompact(struct {
		Text string `json:"text"`
	}{text})
	if err != nil {
		return Result{}, err
	}
	zero := 0.0
	return Result{Observation: obs, Reward: &zero}, nil
}

// Step runs a list_tools or call_tool action.
func (te *toolEnvironment) Step(ctx context.Context, action json.RawMessage) (Result, error) {
	ms, err := parseObject(action)
	if err != nil {
		return Result{}, &ValidationError{Errors: []FieldError{
			fieldError("model_type", "Input should be an object", rawInput(action))}}
	}
	fields := map[string]json.RawMessage{}
	for _, m := range ms {
		fields[m.Key] = m.Value
	}
	var typ string
	if raw, ok := fields["type"]; !ok {
		return Result{}, &ValidationError{Errors: []FieldError{
			fieldError("union_tag_not_found", "Unable to extract tag using discriminator 'type'", rawInput(action))}}
	} else if json.Unmarshal(raw, &typ) != nil || typ != "list_tools" && typ != "call_tool" {
		fe := fieldError("union_tag_invalid", "Input tag "+string(raw)+" found using 'type' does not match any of the expected tags: 'list_tools', 'call_tool'", rawInput(action))
		return Result{}, &ValidationError{Errors: []FieldError{fe}}
	}
	allowed := map[string]bool{"type": true, "metadata": true}
	if typ == "call_tool" {
		allowed["tool_name"], allowed["arguments"] = true, true
	}
	var errs []FieldError
	var toolName string
	args := json.RawMessage("{}")
	if typ == "call_tool" {
		if raw, ok := fields["tool_name"]; !ok {
			errs = append(errs, fieldError("missing", "Field required", rawInput(action), typ, "tool_name"))
		} else if json.Unmarshal(raw, &toolName) != nil {
			errs = append(errs, fieldError("string_type", "Input should be a valid string", rawInput(raw), typ, "tool_name"))
		}
		if raw, ok := fields["arguments"]; ok {
			if raw[0] != '{' {
				errs = append(errs, fieldError("dict_type", "Input should be a valid dictionary", rawInput(raw), typ, "arguments"))
			}
			args = raw
		}
	}
	for _, m := range ms {
		if !allowed[m.Key] {
			errs = append(errs, fieldError("extra_forbidden", "Extra inputs are not permitted", rawInput(m.Value), typ, m.Key))
		}
	}
	if errs != nil {
		return Result{}, &ValidationError{Errors: errs}
	}
	te.steps++
	var obs any
	if typ == "list_tools" {
		var meta map[string]any
		_ = json.Unmarshal(fields["metadata"], &meta) // free-form; anything else means no extension
		withReturn, _ := meta[returnSchemasKey].(bool)
		obs = struct {
			Tools []toolInfo `json:"tools"`
		}{te.toolList(withReturn)}
	} else {
		obs = te.callTool(ctx, toolName, args)
	}
	b, err := marshalCompact(obs)
	if err != nil {
		return Result{}, err
	}
	res := Result{Observation: b}
	if r, ok := te.env.(env.Rewarder); ok {
		v, err := r.Reward(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("reward: %w", err)
		}
		res.Reward = &v
	}
	return res, nil
}

// toolList describes every tool, with its return schema when withReturn.
func (te *toolEnvironment) toolList(withReturn bool) []toolInfo {
	list := make([]toolInfo, 0, te.tools.Len())
	for _, t := range te.tools.Tools() {
		ti := toolInfo{Name: t.Name(), Description: t.Description(), InputSchema: t.Parameters()}
		if withReturn {
			ti.ReturnSchema = t.Return()
		}
		list = append(list, ti)
	}
	return list
}

// callToolObservation is upstream's CallToolObservation.
type callToolObservation struct {
	ToolName string          `json:"tool_name"`
	Result   *callToolResult `json:"result"`
	Error    *toolError      `json:"error"`
}

// callToolResult is FastMCP's CallToolResult as pydantic dumps it.
type callToolResult struct {
	Content           []textContent     `json:"content"`
	StructuredContent map[string]string `json:"structured_content"`
	Data              string            `json:"data"`
	IsError           bool              `json:"is_error"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolError is upstream's ToolError.
type toolError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// callTool runs one tool; failures become the observation's error.
func (te *toolEnvironment) callTool(ctx context.Context, name string, args json.RawMessage) callToolObservation {
	out, err := te.tools.Call(ctx, name, args)
	if err != nil {
		kind := "execution_error"
		var ce *tools.CallError
		if errors.As(err, &ce) {
			switch ce.Kind {
			case tools.NotFound:
				kind = "tool_not_found"
			case tools.BadArguments:
				kind = "invalid_args"
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			kind = "timeout"
		}
		return callToolObservation{ToolName: name, Error: &toolError{ErrorType: kind, Message: err.Error()}}
	}
	return callToolObservation{ToolName: name, Result: &callToolResult{
		Content:           []textContent{{Type: "text", Text: out}},
		StructuredContent: map[string]string{"result": out},
		Data:              out,
	}}
}

// State reports the episode id and step count.
func (te *toolEnvironment) State(ctx context.Context) (json.RawMessage, error) {
	var id any
	if te.episodeID != "" {
		id = te.episodeID
	}
	return marshalCompact(map[string]any{"episode_id": id, "step_count": te.steps})
}

// Close closes the env if it holds resources.
func (te *toolEnvironment) Close() error {
	if c, ok := te.env.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// HandleMCP answers JSON-RPC tools/list and tools/call.
func (te *toolEnvironment) HandleMCP(ctx context.Context, request json.RawMessage) json.RawMessage {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(request, &req); err != nil {
		return jsonRPCError(json.RawMessage("null"), -32600, "Invalid Request: "+err.Error())
	}
	id := req.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if req.JSONRPC != "2.0" {
		return jsonRPCError(id, -32600, `Invalid Request: jsonrpc must be "2.0"`)
	}
	var result any
	switch req.Method {
	case "tools/list":
		type mcpTool struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		list := make([]mcpTool, 0, te.tools.Len())
		for _, t := range te.tools.Tools() {
			list = append(list, mcpTool{t.Name(), t.Description(), t.Parameters()})
		}
		result = map[string]any{"tools": list}
	case "tools/call":
		if _, ok := te.tools.Lookup(req.Params.Name); !ok {
			return jsonRPCError(id, -32602, "Unknown tool: "+req.Params.Name)
		}
		te.steps++
		out, err := te.tools.Call(ctx, req.Params.Name, req.Params.Arguments)
		result = map[string]any{"content": []textContent{{Type: "text", Text: out}}, "isError": err != nil}
	default:
		return jsonRPCError(id, -32601, "Method not found: "+req.Method)
	}
	b, err := marshalCompact(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		return jsonRPCError(id, -32603, err.Error())
	}
	return b
}

// newEpisodeID makes a random episode id.
func newEpisodeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
