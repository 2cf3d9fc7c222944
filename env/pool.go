package env

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/x/tools"
)

// ErrPoolClosed is returned by Acquire after Close.
var ErrPoolClosed = errors.New("env: pool closed")

// Instance is one pooled environment and its tools. It belongs to one
// rollout between Acquire and Release (or Discard).
type Instance struct {
	Env   Env
	Tools *tools.Set // Env's tools, bound to Env
	Name  string     // the environment's name in a Router ("" in a lone Pool)

	pool    *Pool
	methods *tools.Set // the env's tool methods
	inUse   bool
}

// Reset starts an episode: it resets the env with row and, for a
// DynamicTools env, refreshes Tools. Reset through the Instance (or use
// Start) rather than calling Env.Reset directly.
//
// A panic of the env's Reset (or ToolSet) is returned as a *PanicError.
func (i *Instance) Reset(ctx context.Context, row Row) (string, error) {
	obs, err := i.reset(ctx, row)
	if err != nil {
		return "", err
	}
	if err := i.refresh(); err != nil {
		return "", err
	}
	return obs, nil
}

// reset calls the env's Reset, its panic recovered.
func (i *Instance) reset(ctx context.Context, row Row) (obs string, err error) {
	defer recoverInto(&err, i.label(), "reset")
	obs, err = i.Env.Reset(ctx, row)
	if err != nil {
		return "", fmt.Errorf("env %s: reset: %w", i.label(), err)
	}
	return obs, nil
}

// Release gives the instance back to its pool for another episode. The
// caller must not use it afterwards.
func (i *Instance) Release() { i.pool.release(i, false) }

// Discard removes the instance from its pool and closes it (when it is a
// Closer), for an instance whose state cannot be trusted, e.g. after a
// failed Reset. The caller must not use it afterwards.
func (i *Instance) Discard() error { return i.pool.release(i, true) }

// Reward scores the episode with the env's own reward. ok is false when
// the env is not a Rewarder. A panic of Reward is returned as a
// *PanicError.
func (i *Instance) Reward(ctx context.Context) (reward float64, ok bool, err error) {
	r, ok := i.Env.(Rewarder)
	if !ok {
		return 0, false, nil
	}
	defer recoverInto(&err, i.label(), "reward")
	v, err := r.Reward(ctx)
	if err != nil {
		return 0, true, fmt.Errorf("env %s: reward: %w", i.label(), err)
	}
	return v, true, nil
}

func (i *Instance) label() string {
	if i.Name != "" {
		return fmt.Sprintf("%q", i.Name)
	}
	return fmt.Sprintf("%T", i.Env)
}

// PoolOption configures a Pool.
type PoolOption func(*poolConfig)

type poolConfig struct {
	toolOpts []tools.Option
}

// WithToolOptions passes options to tools.Discover for each environment
// (e.g. tools.Exclude for helper methods that are not tools).
func WithToolOptions(opts ...tools.Option) PoolOption {
	return func(c *poolConfig) { c.toolOpts = append(c.toolOpts, opts...) }
}

// Pool hands out environments made by one Factory: "construct once, reset
// often". Acquire returns a free instance when there is one and asks the
// factory only when more environments are in use at once than exist. A
// Pool is safe for concurrent use.
type Pool struct {
	factory Factory
	cfg     poolConfig
	name    string

	mu     sync.Mutex
	free   []*Instance
	all    map[*Instance]struct{}
	closed bool
}

// NewPool makes a pool over f and builds one probe instance at once, so
// that a factory that fails or an env whose tools are malformed is
// reported here rather than at the first episode (TRL probes likewise).
// The probe stays in the pool as its first free instance.
func NewPool(ctx context.Context, f Factory, opts ...PoolOption) (*Pool, error) {
	return newPool(ctx, "", f, opts)
}

func newPool(ctx context.Context, name string, f Factory, opts []PoolOption) (*Pool, error) {
	if f == nil {
		return nil, errors.New("env: new pool: nil factory")
	}
	p := &Pool{factory: f, name: name, all: map[*Instance]struct{}{}}
	for _, o := range opts {
		o(&p.cfg)
	}
	in, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	in.Release()
	return p, nil
}

// Acquire returns a free environment, making a new one with the factory
// when none is free. The instance's env is in whatever state its last
// episode left it: call Reset (or use Start).
func (p *Pool) Acquire(ctx context.Context) (*Instance, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	if n := len(p.free); n > 0 {
		in := p.free[n-1]
		p.free = p.free[:n-1]
		in.inUse = true
		p.mu.Unlock()
		return in, nil
	}
	p.mu.Unlock()

	e, err := p.newEnv(ctx) // outside the lock: dialing a server can take long
	var pe *PanicError
	if errors.As(err, &pe) {
		return nil, err // it names the env and what panicked
	}
	if err != nil {
		return nil, fmt.Errorf("env%s: new environment: %w", p.suffix(), err)
	}
	if e == nil {
		return nil, fmt.Errorf("env%s: new environment: factory returned nil", p.suffix())
	}
	methods, err := methodTools(e, p.cfg.toolOpts)
	if err != nil {
		closeEnv(e)
		return nil, fmt.Errorf("env%s: %w", p.suffix(), err)
	}
	in := &Instance{Env: e, Tools: methods, Name: p.name, pool: p, inUse: true, methods: methods}
	if err := in.refresh(); err != nil {
		closeEnv(e)
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		closeEnv(e)
		return nil, ErrPoolClosed
	}
	p.all[in] = struct{}{}
	return in, nil
}

// newEnv asks the factory for an env, its panic recovered.
func (p *Pool) newEnv(ctx context.Context) (e Env, err error) {
	label := fmt.Sprintf("%T", p.factory)
	if p.name != "" {
		label = fmt.Sprintf("%q", p.name)
	}
	defer recoverInto(&err, label, "new")
	return p.factory.New(ctx)
}

// Start acquires an environment and resets it with row, returning the
// instance and its initial observation. An instance whose Reset fails is
// discarded, not pooled.
func (p *Pool) Start(ctx context.Context, row Row) (*Instance, string, error) {
	in, err := p.Acquire(ctx)
	if err != nil {
		return nil, "", err
	}
	obs, err := in.Reset(ctx, row)
	if err != nil {
		_ = in.Discard()
		return nil, "", err
	}
	return in, obs, nil
}

// Size reports how many environments the pool holds (free and in use).
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// Close closes every environment of the pool that is a Closer, free or in
// use, and makes later Acquires fail. It returns the joined close errors.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	all := p.all
	p.all, p.free = nil, nil
	p.mu.Unlock()
	var errs []error
	for in := range all {
		if err := closeEnv(in.Env); err != nil {
			errs = append(errs, fmt.Errorf("env %s: close: %w", in.label(), err))
		}
	}
	return errors.Join(errs...)
}

func (p *Pool) release(in *Instance, discard bool) error {
	if in == nil || in.pool != p {
		panic("env: Release of an instance this pool did not give out")
	}
	p.mu.Lock()
	if !in.inUse {
		p.mu.Unlock()
		panic("env: instance released twice")
	}
	in.inUse = false
	_, live := p.all[in]
	if live && !discard {
		p.free = append(p.free, in)
		p.mu.Unlock()
		return nil
	}
	delete(p.all, in)
	p.mu.Unlock()
	if !live { // the pool was closed meanwhile and already closed it
		return nil
	}
	if err := closeEnv(in.Env); err != nil {
		return fmt.Errorf("env %s: close: %w", in.label(), err)
	}
	return nil
}

func (p *Pool) suffix() string {
	if p.name == "" {
		return ""
	}
	return fmt.Sprintf(" %q", p.name)
}

// DynamicTools is an Env whose tools are defined at run time rather than
// (only) by its methods, e.g. listed by a remote MCP-style server at each
// Reset (openenv.RemoteEnv is one). After every Reset made through the
// Instance, the pool offers ToolSet's tools first, then the env's tool
// methods (ToolSet itself is not one). ToolSet may return nil.
type DynamicTools interface {
	ToolSet() *tools.Set
}

// Tools returns the tools e offers now: for a DynamicTools env, ToolSet's
// tools followed by its tool methods (ToolSet itself is not one); for any
// other env, its tool methods (tools.Discover with opts). A DynamicTools env
// defines its tools at Reset, so call Tools after each Reset. A Pool does
// this for its Instances; Tools is for code that drives an env itself.
func Tools(e Env, opts ...tools.Option) (*tools.Set, error) {
	methods, err := methodTools(e, opts)
	if err != nil {
		return nil, err
	}
	return joinDynamic(e, methods)
}

// joinDynamic puts a DynamicTools env's run-time tools before its methods.
func joinDynamic(e Env, methods *tools.Set) (*tools.Set, error) {
	d, ok := e.(DynamicTools)
	if !ok {
		return methods, nil
	}
	return tools.Join(d.ToolSet(), methods)
}

// methodTools discovers e's tool methods.
func methodTools(e Env, opts []tools.Option) (*tools.Set, error) {
	if _, ok := e.(DynamicTools); ok {
		opts = append(slices.Clone(opts), tools.Exclude("ToolSet"))
	}
	return tools.Discover(e, opts...)
}

// refresh recomputes the tools of a DynamicTools env.
func (i *Instance) refresh() (err error) {
	defer recoverInto(&err, i.label(), "tools")
	set, err := joinDynamic(i.Env, i.methods)
	if err != nil {
		return fmt.Errorf("env %s: %w", i.label(), err)
	}
	i.Tools = set
	return nil
}

// closeEnv closes e when it is a Closer.
func closeEnv(e Env) error {
	if c, ok := e.(Closer); ok {
		return c.Close()
	}
	return nil
}
