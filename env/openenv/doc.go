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
// FromFactory serves tool-style env.Env environments with OpenEnv's
// MCP-style list_tools / call_tool actions.
package openenv
