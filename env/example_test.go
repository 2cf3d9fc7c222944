package env_test

import (
	"context"
	"fmt"

	"github.com/x/env"
	"github.com/x/env/guess"
	"github.com/x/env/wordle"
)

// A pool constructs environments once and resets them for every episode.
func ExampleNewPool() {
	ctx := context.Background()
	pool, err := env.NewPool(ctx, guess.NewFactory(guess.Options{Seed: 1}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	in, _, err := pool.Start(ctx, env.Row{"target": 6})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Release()
	fmt.Println("tools:", in.Tools.Names())
	for _, args := range []string{`{"number": 10}`, `{"number": 5}`, `{"number": 6}`} {
		resp, err := in.Tools.Call(ctx, "guess", []byte(args))
		fmt.Println(resp, err != nil)
	}
	reward, _, _ := in.Reward(ctx)
	fmt.Printf("reward %.3f, envs made %d\n", reward, pool.Size())
	// Output:
	// tools: [guess]
	// My number is lower than 10. 6 guess(es) left. false
	// My number is higher than 5. 5 guess(es) left. false
	// Correct! The number is 6. You found it in 3 guess(es). false
	// reward 0.714, envs made 1
}

// A router sends each row to the environment its "environment" column
// names; each row sees only its environment's tools.
func ExampleNewRouter() {
	ctx := context.Background()
	r, err := env.NewRouter(ctx, map[string]env.Factory{
		"guess":  guess.NewFactory(guess.Options{}),
		"wordle": wordle.NewFactory(wordle.Options{}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for _, row := range []env.Row{
		{"environment": "wordle", "secret_word": "plant"},
		{"environment": "guess", "target": 3},
		{"environment": "chess"},
	} {
		in, _, err := r.Start(ctx, row)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(in.Name, in.Tools.Names())
		in.Release()
	}
	// Output:
	// wordle [guess]
	// guess [guess]
	// env: row has environment="chess", which is not among the environments; expected one of [guess, wordle]
}
