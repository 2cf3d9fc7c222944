package openenv

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

// TestHTTPRoutesAsPython checks the routes where a Python user would notice
// a difference from upstream's server: POST /mcp (JSON-RPC, always 200),
// /ws without an upgrade (404 JSON), /openapi.json, and the methods each
// route refuses.
func TestHTTPRoutesAsPython(t *testing.T) {
	checkGoroutines(t)
	_, plain := startServer(t, &echoFactory{})
	var closed atomic.Int64
	tools := FromFactory(env.FactoryFunc(func(context.Context) (env.Env, error) { return &notesEnv{closed: &closed}, nil }), "notes")
	_, mcp := startServer(t, tools)
	_, authed := startServer(t, &echoFactory{}, RequireBearerToken("tok"))

	tests := []struct {
		name, method, path, body string
		url                      string
		status                   int
		want                     string // JSON the body must equal
		check                    func(t *testing.T, body map[string]any)
	}{
		{name: "mcp on a non-MCP env", method: "POST", path: "/mcp", url: plain.URL,
			body:   `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`,
			status: 200, want: `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Environment does not support MCP","data":null}}`},
		{name: "mcp parse error", method: "POST", path: "/mcp", url: plain.URL, body: `{"jsonrpc":`,
			status: 200, check: func(t *testing.T, b map[string]any) {
				assert.Nil(t, b["id"])
				assert.Equal(t, -32700.0, b["error"].(map[string]any)["code"])
			}},
		{name: "mcp not an object", method: "POST", path: "/mcp", url: plain.URL, body: `[1]`,
			status: 200, check: func(t *testing.T, b map[string]any) {
				assert.Equal(t, -32600.0, b["error"].(map[string]any)["code"])
			}},
		{name: "mcp tools/list on a tool env", method: "POST", path: "/mcp", url: mcp.URL,
			body:   `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`,
			status: 200, check: func(t *testing.T, b map[string]any) {
				assert.Equal(t, "a", b["id"])
				var names []string
				for _, tl := range b["result"].(map[string]any)["tools"].([]any) {
					names = append(names, tl.(map[string]any)["name"].(string))
				}
				assert.ElementsMatch(t, []string{"add", "count"}, names)
			}},
		{name: "GET /mcp", method: "GET", path: "/mcp", url: plain.URL, status: 405, want: `{"detail":"Method Not Allowed"}`},
		{name: "GET /ws without upgrade", method: "GET", path: "/ws", url: plain.URL, status: 404, want: `{"detail":"Not Found"}`},
		{name: "POST /ws", method: "POST", path: "/ws", url: plain.URL, status: 404, want: `{"detail":"Not Found"}`},
		{name: "openapi", method: "GET", path: "/openapi.json", url: plain.URL, status: 200, check: func(t *testing.T, b map[string]any) {
			assert.Equal(t, "3.1.0", b["openapi"])
			paths := b["paths"].(map[string]any)
			assert.Len(t, paths, 7)
			step := paths["/step"].(map[string]any)["post"].(map[string]any)
			schema := step["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			var action any
			require.NoError(t, json.Unmarshal((&echoFactory{}).ActionSchema(), &action))
			assert.Equal(t, action, schema["properties"].(map[string]any)["action"], "the factory's action schema")
			assert.NotContains(t, b, "security")
		}},
		{name: "POST /openapi.json", method: "POST", path: "/openapi.json", url: plain.URL, status: 405, want: `{"detail":"Method Not Allowed"}`},
		{name: "openapi needs the token", method: "GET", path: "/openapi.json", url: authed.URL, status: 401,
			want: `{"detail":"missing or invalid bearer token"}`},
		{name: "mcp needs the token", method: "POST", path: "/mcp", url: authed.URL, body: `{}`, status: 401,
			want: `{"detail":"missing or invalid bearer token"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			if tt.want != "" {
				assert.JSONEq(t, tt.want, string(got))
			}
			if tt.check != nil {
				var b map[string]any
				require.NoError(t, json.Unmarshal(got, &b), string(got))
				tt.check(t, b)
			}
		})
	}
	assert.Equal(t, int64(1), closed.Load(), "the stateless POST /mcp closes its fresh env")
}
