// Package openenv speaks the OpenEnv WebSocket protocol: a client for any
// OpenEnv server (Python's or ours) and a server that serves Go
// environments to any OpenEnv client (Python's EnvClient, TRL, or ours).
//
// The wire format follows huggingface/OpenEnv (openenv-core 0.2–0.3): one
// WebSocket at /ws per session, JSON text frames {"type":"reset"|"step"|
// "state"|"close"|"mcp","data":…} answered in order by "observation",
// "state", "mcp" or "error" frames. Error frames carry OpenEnv's codes
// (ErrorCode); a session refused at connect (capacity, factory failure)
// gets one error frame and close code 1000.
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
//   - A refused session's error frame answers the client's first frame
//     (awaited up to RefusalWait), so a client that writes first, as
//     Python's does, reads CAPACITY_REACHED instead of a closed socket;
//     upstream sends it right after the upgrade and loses that race.
//
// Deliberate differences from the Python server, for its users:
//
//   - GET /health adds active_sessions and max_sessions, and answers 503
//     "unhealthy" during Shutdown.
//   - Sessions idle for WithIdleTimeout are closed by the server (a
//     SESSION_ERROR frame, then close 1000); peers that stop answering
//     pings are dropped.
//   - POST /mcp is stateless (a fresh env per request, as POST /step);
//     upstream's openenv/session/create sessions and WS /mcp are not
//     served, and neither are /docs, /redoc or the web interface.
//   - /openapi.json has upstream's paths and methods with our schemas;
//     it names the WebSocket /ws in its description, as OpenAPI cannot
//     describe it.
//   - With RequireBearerToken every route but /health (including
//     /openapi.json) needs the token; upstream has no auth.
//
// Tool-style environments (env.Env, whose methods are tools) travel over
// the same protocol with OpenEnv's MCP-style actions: FromFactory serves
// them ({"type":"list_tools"}, {"type":"call_tool",…} and JSON-RPC "mcp"
// frames), and RemoteEnv plays such a server as a local env.Env whose tools
// come from list_tools. One extension: a list_tools action whose metadata
// has "return_schemas": true gets each tool's result schema as
// "return_schema" beside upstream's fields (RemoteEnv asks for it, so the
// same env renders the same prompt local or served; upstream clients never
// ask, upstream servers ignore the request).
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
