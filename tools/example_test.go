package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/x/tools"
)

// Counter is a tiny environment: its exported methods Add and Total are
// tools; Reset is reserved for the environment's lifecycle.
type Counter struct{ n int }

// AddArgs are the arguments of Add: the json tag names each argument and
// the desc tag describes it.
type AddArgs struct {
	Amount int `json:"amount" desc:"how much to add, from 1 to 10"`
}

func (c *Counter) Reset(ctx context.Context) error { c.n = 0; return nil }

// ToolDescriptions describes each tool method.
func (c *Counter) ToolDescriptions() map[string]string {
	return map[string]string{
		"Add":   "Add an amount to the counter and return the new total.",
		"Total": "Return the counter's total.",
	}
}

func (c *Counter) Add(ctx context.Context, a AddArgs) (string, error) {
	if a.Amount < 1 || a.Amount > 10 {
		return "", fmt.Errorf("amount %d is not between 1 and 10", a.Amount)
	}
	c.n += a.Amount
	return fmt.Sprintf("total is %d", c.n), nil
}

func (c *Counter) Total(ctx context.Context) (int, error) { return c.n, nil }

func ExampleDiscover() {
	set, err := tools.Discover(&Counter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, schema := range set.Schemas() {
		fmt.Println(string(schema))
	}
	ctx := context.Background()
	for _, call := range []struct{ name, args string }{
		{"add", `{"amount": 3}`},
		{"add", `{"amount": 30}`},
		{"add", `{"amount": "3"}`},
		{"total", `{}`},
		{"reset", `{}`},
	} {
		resp, err := set.Call(ctx, call.name, json.RawMessage(call.args))
		fmt.Printf("%s -> %s (failed: %t)\n", call.name, resp, err != nil)
	}
	// Output:
	// {"type":"function","function":{"name":"add","description":"Add an amount to the counter and return the new total.","parameters":{"type":"object","properties":{"amount":{"type":"integer","description":"how much to add, from 1 to 10"}},"required":["amount"]},"return":{"type":"string"}}}
	// {"type":"function","function":{"name":"total","description":"Return the counter's total.","parameters":{"type":"object","properties":{}},"return":{"type":"integer"}}}
	// add -> total is 3 (failed: false)
	// add -> {"error": "amount 30 is not between 1 and 10"} (failed: true)
	// add -> {"error": "argument \"amount\" of add must be an integer, got string"} (failed: true)
	// total -> 3 (failed: false)
	// reset -> {"error": "Tool reset not found. Available tools: add, total."} (failed: true)
}

func ExampleNew() {
	// A tool listed by a remote environment: its schema arrives as JSON and
	// its implementation forwards the raw arguments.
	echo, err := tools.New("echo_message", "Echo a message back.",
		json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Message string `json:"message"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return strings.ToUpper(a.Message), nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	set, _ := tools.NewSet(echo)
	resp, _ := set.Call(context.Background(), "echo_message", json.RawMessage(`{"message":"hi"}`))
	fmt.Println(resp)
	// Output: HI
}
