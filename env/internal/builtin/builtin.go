// Package builtin names the built-in environments for the commands that
// serve them (envserver and envload's server child), so that both accept
// the same -env values and build the same factories.
package builtin

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

// Names are the built-in environments' names, sorted.
func Names() []string { return []string{"catch", "echo", "guess", "wordle"} }

// Factory returns the factory of the built-in environment name, seeded by
// seed: its classic OpenEnv form (the Python server's actions and
// observations), or with asTools its tool-style env.Env served with
// MCP-style list_tools/call_tool actions. An unknown name is an error
// that lists the known ones.
func Factory(name string, seed uint64, asTools bool) (openenv.EnvironmentFactory, error) {
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
			return nil, unknown(name)
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
	return nil, unknown(name)
}

// unknown is the error for a name not in Names.
func unknown(name string) error {
	return fmt.Errorf("-env %q: unknown environment (have %s)", name, strings.Join(Names(), ", "))
}
