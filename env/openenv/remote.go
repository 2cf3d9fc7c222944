package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/x/env"
	"github.com/x/tools"
)

// RemoteEnv is an env.Env played over OpenEnv against an MCP-style server
// (one served with FromFactory, or an upstream MCPEnvironment such as the
// current echo_env): its tools are whatever list_tools reports at each
// Reset, and a tool call is a call_tool step. It owns one Client, so one
// rollout uses it at a time.
//
// Against a server of ours the tools carry their return schemas too, so
// an env served with FromFactory renders into the prompt byte for byte as
// the same env in process. An upstream server lists no return schemas: its
// tools' schemas then lack the "return" field a Python method's return
// annotation would give under TRL.
//
// Its tools are dynamic, so tools.Discover cannot see them: use ToolSet.
// (Discover on a RemoteEnv needs tools.Exclude("ToolSet").)
type RemoteEnv struct {
	client *Client
	set    *tools.Set
	reward *float64
}

// NewRemoteEnv plays the server c is connected to.
func NewRemoteEnv(c *Client) *RemoteEnv { return &RemoteEnv{client: c} }

// RemoteFactory is an env.Factory whose envs are RemoteEnvs, each with its
// own connection to the server at url.
func RemoteFactory(url string, opts ...Option) env.Factory {
	return env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		c, err := Dial(ctx, url, opts...)
		if err != nil {
			return nil, err
		}
		return NewRemoteEnv(c), nil
	})
}

// Reset starts an episode with row as the reset data, then lists the
// server's tools. It returns the reset observation's "text" (FromFactory's
// shape), "" for an empty observation, else the observation JSON.
func (r *RemoteEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	if row == nil {
		row = env.Row{}
	}
	res, err := r.client.Reset(ctx, row)
	if err != nil {
		return "", fmt.Errorf("remote env reset: %w", err)
	}
	r.reward = res.Reward
	var obs map[string]json.RawMessage
	if err := res.DecodeObservation(&obs); err != nil {
		return "", err
	}
	text := ""
	if raw, ok := obs["text"]; ok && len(obs) == 1 {
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", fmt.Errorf("remote env reset: observation text: %w", err)
		}
	} else if len(obs) > 0 {
		text = string(res.Observation)
	}
	set, err := r.listTools(ctx)
	if err != nil {
		return "", err
	}
	r.set = set
	return text, nil
}

// listTools asks the server for its tools and binds each to a call_tool
// step.
func (r *RemoteEnv) listTools(ctx context.Context) (*tools.Set, error) {
	res, err := r.client.Step(ctx, map[string]any{"type": "list_tools", "metadata": map[string]bool{returnSchemasKey: true}})
	if err != nil {
		return nil, fmt.Errorf("remote env list_tools: %w", err)
	}
	var list struct {
		Tools []toolInfo `json:"tools"`
	}
	if err := res.DecodeObservation(&list); err != nil {
		return nil, fmt.Errorf("remote env list_tools: %w", err)
	}
	ts := make([]tools.Tool, 0, len(list.Tools))
	for _, ti := range list.Tools {
		name := ti.Name
		desc := ti.Description
		if desc == "" {
			desc = name
		}
		t, err := tools.New(name, desc, ti.InputSchema, func(ctx context.Context, args json.RawMessage) (string, error) {
			return r.callTool(ctx, name, args)
		})
		if err == nil && ti.ReturnSchema != nil {
			t, err = t.WithReturn(ti.ReturnSchema)
		}
		if err != nil {
			return nil, fmt.Errorf("remote env tool %q: %w", name, err)
		}
		ts = append(ts, t)
	}
	set, err := tools.NewSet(ts...)
	if err != nil {
		return nil, fmt.Errorf("remote env tools: %w", err)
	}
	return set, nil
}

// callTool runs one call_tool step and renders its result as text.
func (r *RemoteEnv) callTool(ctx context.Context, name string, args json.RawMessage) (string, error) {
	res, err := r.client.Step(ctx, struct {
		Type      string          `json:"type"`
		ToolName  string          `json:"tool_name"`
		Arguments json.RawMessage `json:"arguments"`
	}{"call_tool", name, args})
	if err != nil {
		return "", err
	}
	if res.Reward != nil {
		r.reward = res.Reward
	}
	var obs struct {
		Result json.RawMessage `json:"result"`
		Error  *toolError      `json:"error"`
	}
	if err := res.DecodeObservation(&obs); err != nil {
		return "", err
	}
	if obs.Error != nil {
		return "", errors.New(obs.Error.Message)
	}
	var result struct {
		Data    json.RawMessage `json:"data"`
		Content []textContent   `json:"content"`
		IsError bool            `json:"is_error"`
	}
	if err := json.Unmarshal(obs.Result, &result); err != nil || len(obs.Result) == 0 || obs.Result[0] != '{' {
		return string(obs.Result), nil // a result that is not a CallToolResult: as sent
	}
	text := ""
	var s string
	switch {
	case len(result.Data) > 0 && json.Unmarshal(result.Data, &s) == nil:
		text = s
	case len(result.Content) > 0:
		text = result.Content[0].Text
	default:
		text = string(result.Data)
	}
	if result.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// ToolSet returns the tools listed at the last Reset (nil before the
// first).
func (r *RemoteEnv) ToolSet() *tools.Set { return r.set }

// Reward is the last reward the server reported (0 when it sent none).
func (r *RemoteEnv) Reward(ctx context.Context) (float64, error) {
	if r.reward == nil {
		return 0, nil
	}
	return *r.reward, nil
}

// Close closes the connection (and with it the server-side session).
func (r *RemoteEnv) Close() error { return r.client.Close() }
