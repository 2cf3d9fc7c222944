// Package openenv speaks the OpenEnv WebSocket protocol: a client for any
// OpenEnv server (Python's or ours) and a server that serves Go
// environments to any OpenEnv client (Python's EnvClient, TRL, or ours).
package openenv
