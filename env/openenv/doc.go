// Package openenv speaks the OpenEnv WebSocket protocol: a client for any
// OpenEnv server (Python's or ours) and a server that serves Go
// environments to any OpenEnv client (Python's EnvClient, TRL, or ours).
//
// The wire format follows huggingface/OpenEnv (openenv-core 0.2–0.3): one
// WebSocket at /ws per session, JSON text frames {"type":"reset"|"step"|
// "state"|"close"|"mcp","data":…} answered in order by "observation",
// "state", "mcp" or "error" frames. Error frames carry OpenEnv's codes
// (ErrorCode); capacity and factory failures arrive as a frame right after
// the upgrade, followed by close code 1000.
//
// Where upstream is fragile this package is stricter:
//
//   - The Client keeps one reader goroutine per socket, so server pings are
//     answered while the caller is busy, and never reuses a socket after a
//     timeout: a lost connection or a late reply ends the session with
//     ErrSessionLost, and only the next Reset connects again.
//   - The Server pings every session and drops peers that stop answering,
//     bounds every write, reaps idle sessions by closing both the env and
//     the socket, can wait for a free slot instead of refusing, and reports
//     its capacity in /health.
//
// Tool-style environments (env.Env, whose methods are tools) travel over
// the same protocol with OpenEnv's MCP-style actions: FromFactory serves
// them ({"type":"list_tools"}, {"type":"call_tool",…} and JSON-RPC "mcp"
// frames), and RemoteEnv plays such a server as a local env.Env whose tools
// come from list_tools.
//
// Wire compatibility is tested by replaying frames recorded from the
// Python server and client (testdata/). Two error texts deliberately
// differ from upstream, where they are Python internals: INVALID_JSON
// carries Go's JSON error after the same "Invalid JSON: " prefix, and
// SESSION_ERROR says what was wrong ("binary frames are not supported",
// "message must be a JSON object…") instead of "'text'" or
// "'list' object has no attribute 'get'". Codes and envelopes are equal.
//
// The command env/cmd/envserver serves the built-in environments.
package openenv
