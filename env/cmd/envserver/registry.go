package main

import (
	"fmt"
	"strings"

	"github.com/x/env"
	"github.com/x/env/catch"
	"github.com/x/env/echo"
	"github.com/x/env/guess"
	"github.com/x/env/openenv"
	"github.com/x/env/wordle"
)

// envNames are the environments -env accepts, sorted.
func envNames() []string { return []string{"catch", "echo", "guess", "wordle"} }

// newFactory returns the factory of the built-in environment name, seeded
// by seed: its classic OpenEnv form (the Python server's actions and
// observations), or with asTools its tool-style env.Env served with
// MCP-style list_tools/call_tool actions.
func newFactory(name string, seed uint64, asTools bool) (openenv.EnvironmentFactory, error) {
	if asTools {
		var f env.Factory
		switch name {
		case "catch":
			f = catch.NewFactory(catch.Options{Seed: seed})
		case "echo":
			f = env.FactoryFunc(echo.NewEnv)
		case "guess":
			f = guess.NewFactory(guess.Options{Seed: seed})
		case "wordle":
			f = wordle.NewFactory(wordle.Options{Seed: seed})
		default:
			return nil, unknownEnv(name)
		}
		return openenv.FromFactory(f, name), nil
	}
	switch name {
	case "catch":
		return catch.NewEnvironmentFactory(catch.Options{Seed: seed}), nil
	case "echo":
		return echo.NewEnvironmentFactory(echo.Options{Seed: seed}), nil
	case "guess":
		return guess.NewEnvironmentFactory(guess.Options{Seed: seed}), nil
	case "wordle":
		return wordle.NewEnvironmentFactory(wordle.Options{Seed: seed}), nil
	}
	return nil, unknownEnv(name)
}

// unknownEnv is the error for an -env value not in envNames.
func unknownEnv(name string) error {
	return fmt.Errorf("-env %q: unknown environment (have %s)", name, strings.Join(envNames(), ", "))
}
