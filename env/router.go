package env

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EnvironmentColumn is the row column that names a row's environment in a
// Router, as in TRL's multi-environment training.
const EnvironmentColumn = "environment"

// Router sends each row to the environment its "environment" column names,
// one Pool per name; only that environment's tools are offered for the row.
// A Router with a single environment also takes rows without the column.
// A Router is safe for concurrent use.
type Router struct {
	names []string
	pools map[string]*Pool
}

// NewRouter makes a pool per named factory (probing each, see NewPool).
func NewRouter(ctx context.Context, factories map[string]Factory, opts ...PoolOption) (*Router, error) {
	if len(factories) == 0 {
		return nil, errors.New("env: new router: no factories")
	}
	r := &Router{names: slices.Sorted(maps.Keys(factories)), pools: map[string]*Pool{}}
	for _, name := range r.names {
		if name == "" {
			_ = r.Close()
			return nil, errors.New("env: new router: empty environment name")
		}
		p, err := newPool(ctx, name, factories[name], opts)
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		r.pools[name] = p
	}
	return r, nil
}

// Names returns the environment names in order.
func (r *Router) Names() []string { return slices.Clone(r.names) }

// Pool returns the pool of the named environment.
func (r *Router) Pool(name string) (*Pool, bool) {
	p, ok := r.pools[name]
	return p, ok
}

// Route returns the pool for row, or an error naming the unknown or
// missing environment.
func (r *Router) Route(row Row) (*Pool, error) {
	v, ok := row[EnvironmentColumn]
	if !ok {
		if len(r.names) == 1 {
			return r.pools[r.names[0]], nil
		}
		return nil, fmt.Errorf("env: row has no %q column; expected one of [%s]", EnvironmentColumn, strings.Join(r.names, ", "))
	}
	name, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("env: row has %s=%v (%T), not a string; expected one of [%s]", EnvironmentColumn, v, v, strings.Join(r.names, ", "))
	}
	p, ok := r.pools[name]
	if !ok {
		return nil, fmt.Errorf("env: row has %s=%q, which is not among the environments; expected one of [%s]", EnvironmentColumn, name, strings.Join(r.names, ", "))
	}
	return p, nil
}

// Start routes row, acquires an environment from that pool and resets it
// with the row minus its "environment" column.
func (r *Router) Start(ctx context.Context, row Row) (*Instance, string, error) {
	p, err := r.Route(row)
	if err != nil {
		return nil, "", err
	}
	if _, ok := row[EnvironmentColumn]; ok {
		row = maps.Clone(row)
		delete(row, EnvironmentColumn)
	}
	return p.Start(ctx, row)
}

// Close closes every pool.
func (r *Router) Close() error {
	var errs []error
	for _, name := range r.names {
		if p := r.pools[name]; p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}
