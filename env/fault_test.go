package env_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/env"
)

// panicky panics in the operation named by where.
type panicky struct{ where string }

func (p *panicky) Reset(context.Context, env.Row) (string, error) {
	if p.where == "reset" {
		panic("reset exploded")
	}
	return "ok", nil
}

func (p *panicky) Reward(context.Context) (float64, error) {
	if p.where == "reward" {
		panic(errors.New("reward exploded"))
	}
	return 1, nil
}

// TestPanicsBecomeErrors: a panic in an env's Reset, its Reward or its
// factory is returned as a *PanicError naming the env and the operation,
// and the env whose Reset panicked is not pooled again.
func TestPanicsBecomeErrors(t *testing.T) {
	ctx := context.Background()
	for _, where := range []string{"reset", "reward", "new"} {
		t.Run(where, func(t *testing.T) {
			made := 0
			f := env.FactoryFunc(func(context.Context) (env.Env, error) {
				made++
				if where == "new" && made > 1 {
					panic("factory exploded")
				}
				return &panicky{where: where}, nil
			})
			r, err := env.NewRouter(ctx, map[string]env.Factory{"boom": f})
			require.NoError(t, err, "the probe is made before anything panics")
			p, _ := r.Pool("boom")
			in, err := p.Acquire(ctx) // the probe
			require.NoError(t, err)
			held, err := p.Acquire(ctx) // a second env: the factory runs
			if where == "new" {
				var pe *env.PanicError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, "new", pe.Op)
				assert.EqualError(t, err, `env "boom": new panicked: factory exploded`)
				in.Release()
				return
			}
			require.NoError(t, err)
			held.Release()
			in.Release()

			in, _, err = r.Start(ctx, env.Row{"environment": "boom"})
			if where == "reset" {
				var pe *env.PanicError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, `env "boom": reset panicked: reset exploded`, err.Error())
				assert.NotEmpty(t, pe.Stack)
				assert.Equal(t, 1, p.Size(), "the env whose Reset panicked was discarded")
				return
			}
			require.NoError(t, err)
			_, ok, err := in.Reward(ctx)
			assert.True(t, ok)
			assert.EqualError(t, err, `env "boom": reward panicked: reward exploded`)
			in.Release()
		})
	}
}
