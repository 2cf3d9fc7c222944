package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
	"github.com/x/tools"
)

// notesEnv is a tool-style env: two tools, its own reward.
type notesEnv struct {
	notes  []string
	closed *atomic.Int64
}

type addArgs struct {
	Text string `json:"text" desc:"the note to add"`
}

func (n *notesEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	n.notes = nil
	if _, ok := row["seed"]; ok {
		return "", errors.New("seed must not reach the row")
	}
	return fmt.Sprintf("topic: %v", row["topic"]), nil
}

func (n *notesEnv) Add(ctx context.Context, a addArgs) (string, error) {
	if a.Text == "" {
		return "", errors.New("empty note")
	}
	n.notes = append(n.notes, a.Text)
	return fmt.Sprintf("%d notes", len(n.notes)), nil
}

func (n *notesEnv) Count(ctx context.Context) (int, error) { return len(n.notes), nil }

func (n *notesEnv) Reward(ctx context.Context) (float64, error) {
	return float64(len(n.notes)) / 2, nil
}

func (n *notesEnv) ToolDescriptions() map[string]string {
	return map[string]string{"Add": "Add a note.", "Count": "Count the notes."}
}

func (n *notesEnv) Close() error { n.closed.Add(1); return nil }

func TestFromFactoryServesToolEnvs(t *testing.T) {
	checkGoroutines(t)
	var closed atomic.Int64
	f := FromFactory(env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return &notesEnv{closed: &closed}, nil
	}), "notes")
	_, hs := startServer(t, f)
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)

	res, err := c.Reset(ctx, map[string]any{"topic": "go", "seed": 3, "episode_id": "e-9"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"topic: go"}`, string(res.Observation))

	res, err = c.Step(ctx, map[string]any{"type": "list_tools"})
	require.NoError(t, err)
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	require.NoError(t, res.DecodeObservation(&list))
	require.Len(t, list.Tools, 2)
	assert.Equal(t, "add", list.Tools[0].Name)
	assert.Equal(t, "Add a note.", list.Tools[0].Description)
	assert.Contains(t, string(list.Tools[0].InputSchema), `"text"`)
	assert.Equal(t, "count", list.Tools[1].Name)
	assert.NotContains(t, string(res.Observation), "return_schema", "upstream's Tool model forbids extra fields: the extension is sent only on request")

	res, err = c.Step(ctx, map[string]any{"type": "list_tools", "metadata": map[string]any{"return_schemas": true}})
	require.NoError(t, err)
	var withReturn struct {
		Tools []struct {
			ReturnSchema json.RawMessage `json:"return_schema"`
		} `json:"tools"`
	}
	require.NoError(t, res.DecodeObservation(&withReturn))
	require.Len(t, withReturn.Tools, 2)
	assert.JSONEq(t, `{"type":"string"}`, string(withReturn.Tools[0].ReturnSchema), "add returns a string")
	assert.JSONEq(t, `{"type":"integer"}`, string(withReturn.Tools[1].ReturnSchema), "count returns an int")

	tests := []struct {
		name   string
		action string
		want   string // observation, JSON
		reward float64
	}{
		{"call", `{"type":"call_tool","tool_name":"add","arguments":{"text":"hi"}}`,
			`{"tool_name":"add","result":{"content":[{"type":"text","text":"1 notes"}],"structured_content":{"result":"1 notes"},"data":"1 notes","is_error":false},"error":null}`, 0.5},
		{"no arguments", `{"type":"call_tool","tool_name":"count"}`,
			`{"tool_name":"count","result":{"content":[{"type":"text","text":"1"}],"structured_content":{"result":"1"},"data":"1","is_error":false},"error":null}`, 0.5},
		{"unknown tool", `{"type":"call_tool","tool_name":"nope","arguments":{}}`,
			`{"tool_name":"nope","result":null,"error":{"error_type":"tool_not_found","message":"Tool nope not found. Available tools: add, count."}}`, 0.5},
		{"bad arguments", `{"type":"call_tool","tool_name":"add","arguments":{"txt":"x"}}`, "", 0.5},
		{"tool error", `{"type":"call_tool","tool_name":"add","arguments":{"text":""}}`,
			`{"tool_name":"add","result":null,"error":{"error_type":"execution_error","message":"empty note"}}`, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Step(ctx, json.RawMessage(tt.action))
			require.NoError(t, err)
			if tt.want != "" {
				assert.JSONEq(t, tt.want, string(res.Observation))
			} else {
				assert.Contains(t, string(res.Observation), `"error_type":"invalid_args"`)
			}
			require.NotNil(t, res.Reward)
			assert.Equal(t, tt.reward, *res.Reward)
		})
	}

	for _, bad := range []string{`{"type":"dance"}`, `{"tool_name":"add"}`, `{"type":"call_tool"}`,
		`{"type":"list_tools","extra":1}`, `{"type":"call_tool","tool_name":"add","arguments":[1]}`} {
		_, err := c.Step(ctx, json.RawMessage(bad))
		assert.ErrorIs(t, err, CodeValidationError, bad)
	}

	st, err := c.State(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"episode_id":"e-9","step_count":7}`, string(st), "two list_tools and five call_tool steps")

	reply, err := c.MCP(ctx, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "add", "arguments": map[string]any{"text": "via mcp"}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"2 notes"}],"isError":false}}`, string(reply))
	reply, err = c.MCP(ctx, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	require.NoError(t, err)
	assert.Contains(t, string(reply), `"inputSchema"`)
	reply, err = c.MCP(ctx, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "resources/list"})
	require.NoError(t, err)
	assert.Contains(t, string(reply), `-32601`)

	require.NoError(t, c.Close())
	assert.Eventually(t, func() bool { return closed.Load() == 1 }, 2*time.Second, time.Millisecond)
}

func TestFromFactoryDiscoveryError(t *testing.T) {
	checkGoroutines(t)
	f := FromFactory(env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return &badToolEnv{}, nil
	}), "bad")
	_, hs := startServer(t, f, WithName("bad"))
	c := dial(t, hs.URL)
	_, err := c.Reset(ctxTimeout(t, 5*time.Second), nil)
	assert.ErrorIs(t, err, CodeFactoryError)
	assert.ErrorContains(t, err, "discover bad tools")
}

// badToolEnv has an exported method that is not a tool.
type badToolEnv struct{}

func (badToolEnv) Reset(ctx context.Context, row env.Row) (string, error) { return "", nil }
func (badToolEnv) Helper(x int) int                                       { return x }

func TestRemoteEnvPlaysToolServer(t *testing.T) {
	checkGoroutines(t)
	var closed atomic.Int64
	f := FromFactory(env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return &notesEnv{closed: &closed}, nil
	}), "notes")
	_, hs := startServer(t, f)
	ctx := ctxTimeout(t, 5*time.Second)
	e, err := RemoteFactory(hs.URL).New(ctx)
	require.NoError(t, err)
	r := e.(*RemoteEnv)
	assert.Nil(t, r.ToolSet())

	text, err := r.Reset(ctx, env.Row{"topic": "remote"})
	require.NoError(t, err)
	assert.Equal(t, "topic: remote", text)
	require.NotNil(t, r.ToolSet())
	assert.Equal(t, []string{"add", "count"}, r.ToolSet().Names())
	local, err := env.Tools(&notesEnv{closed: &atomic.Int64{}})
	require.NoError(t, err)
	assert.Equal(t, local.Schemas(), r.ToolSet().Schemas(), "the served env's tools are the local env's, byte for byte, \"return\" included")

	tests := []struct {
		tool, args, want string
		failed           bool
	}{
		{"add", `{"text":"a"}`, "1 notes", false},
		{"add", `{"text":"b"}`, "2 notes", false},
		{"count", `{}`, "2", false},
		{"add", `{"text":""}`, `{"error": "empty note"}`, true},
		{"nope", `{}`, `{"error": "Tool nope not found. Available tools: add, count."}`, true},
	}
	for _, tt := range tests {
		out, err := r.ToolSet().Call(ctx, tt.tool, json.RawMessage(tt.args))
		assert.Equal(t, tt.want, out, tt.tool+tt.args)
		assert.Equal(t, tt.failed, err != nil, tt.tool+tt.args)
	}
	reward, err := r.Reward(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1.0, reward, "two notes, reward len/2 from the server")

	require.NoError(t, r.Close())
	assert.Eventually(t, func() bool { return closed.Load() == 1 }, 2*time.Second, time.Millisecond)
}

// TestFromFactoryMatchesUpstreamMCPShapes compares our call_tool
// observations with upstream's MCP echo frames (testdata/
// echo_mcp_expected.json, derived from source): the same keys at every
// level and the same error_type for an unknown tool.
func TestFromFactoryMatchesUpstreamMCPShapes(t *testing.T) {
	checkGoroutines(t)
	b, err := readTestdata("echo_mcp_expected.json")
	require.NoError(t, err)
	var rec struct {
		Frames []struct {
			Send json.RawMessage `json:"send"`
			Recv struct {
				Type string `json:"type"`
				Data struct {
					Observation map[string]any `json:"observation"`
					Reward      *float64       `json:"reward"`
					Done        bool           `json:"done"`
				} `json:"data"`
			} `json:"recv"`
		} `json:"frames"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	var closed atomic.Int64
	_, hs := startServer(t, FromFactory(env.FactoryFunc(func(ctx context.Context) (env.Env, error) {
		return &notesEnv{closed: &closed}, nil
	}), "notes"))
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)
	_, err = c.Reset(ctx, nil)
	require.NoError(t, err)
	ours := map[string]string{
		"list_tools": `{"type":"list_tools"}`,
		"call_ok":    `{"type":"call_tool","tool_name":"add","arguments":{"text":"Hi"}}`,
		"call_nope":  `{"type":"call_tool","tool_name":"nope","arguments":{}}`,
	}
	keysOf := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	n := 0
	for _, f := range rec.Frames {
		var send struct {
			Type string `json:"type"`
			Data struct {
				Type     string `json:"type"`
				ToolName string `json:"tool_name"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(f.Send, &send))
		if send.Type != "step" {
			continue
		}
		key := send.Data.Type
		if key == "call_tool" {
			key = "call_ok"
			if send.Data.ToolName == "nope" {
				key = "call_nope"
			}
		}
		res, err := c.Step(ctx, json.RawMessage(ours[key]))
		require.NoError(t, err, key)
		var obs map[string]any
		require.NoError(t, res.DecodeObservation(&obs))
		want := f.Recv.Data.Observation
		assert.Equal(t, keysOf(want), keysOf(obs), key)
		switch key {
		case "call_ok":
			assert.Equal(t, keysOf(want["result"].(map[string]any)), keysOf(obs["result"].(map[string]any)), key)
			assert.Nil(t, obs["error"])
		case "call_nope":
			assert.Nil(t, obs["result"])
			assert.Equal(t, "tool_not_found", obs["error"].(map[string]any)["error_type"])
		case "list_tools":
			tool := obs["tools"].([]any)[0].(map[string]any)
			assert.Equal(t, keysOf(want["tools"].([]any)[0].(map[string]any)), keysOf(tool))
		}
		assert.False(t, res.Done)
		n++
	}
	assert.Equal(t, 3, n, "list_tools, call_tool, unknown tool")
}

// shoutEnv defines its tool at Reset (named by the row), as a RemoteEnv
// does, so it is an env.DynamicTools.
type shoutEnv struct{ set *tools.Set }

func (s *shoutEnv) Reset(ctx context.Context, row env.Row) (string, error) {
	name, _, err := row.String("tool")
	if err != nil {
		return "", err
	}
	tool, err := tools.New(name, "Shout the text.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"what to shout"}},"required":["text"]}`),
		func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return strings.ToUpper(a.Text), nil
		})
	if err != nil {
		return "", err
	}
	s.set, err = tools.NewSet(tool)
	return "ready", err
}

func (s *shoutEnv) ToolSet() *tools.Set { return s.set }

func TestFromFactoryServesDynamicTools(t *testing.T) {
	f := FromFactory(env.FactoryFunc(func(ctx context.Context) (env.Env, error) { return &shoutEnv{}, nil }), "shout")
	_, hs := startServer(t, f)
	c := dial(t, hs.URL)
	ctx := ctxTimeout(t, 5*time.Second)

	for _, name := range []string{"shout", "yell"} { // each reset defines the tools anew
		_, err := c.Reset(ctx, map[string]any{"tool": name})
		require.NoError(t, err)
		res, err := c.Step(ctx, map[string]any{"type": "list_tools"})
		require.NoError(t, err)
		assert.Contains(t, string(res.Observation), `"name":"`+name+`"`)
		res, err = c.Step(ctx, map[string]any{"type": "call_tool", "tool_name": name, "arguments": map[string]any{"text": "hi"}})
		require.NoError(t, err)
		assert.Contains(t, string(res.Observation), `"data":"HI"`)
	}
}
