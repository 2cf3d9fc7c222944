package main

import (
	"fmt"
	"strings"

	"github.com/x/env/echo"
	"github.com/x/env/openenv"
)

// envNames are the environments -env accepts, sorted.
func envNames() []string { return []string{"echo"} }

// newFactory returns the factory of the built-in environment name, seeded
// by seed.
func newFactory(name string, seed uint64) (openenv.EnvironmentFactory, error) {
	switch name {
	case "echo":
		return echo.NewEnvironmentFactory(echo.Options{Seed: seed}), nil
	}
	return nil, fmt.Errorf("-env %q: unknown environment (have %s)", name, strings.Join(envNames(), ", "))
}
