package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// board is a tool-style value exercising every argument form.
type board struct {
	moves []string
}

type MoveArgs struct {
	Direction string `json:"direction" desc:"where to go" enum:"left,right"`
	Steps     *int   `json:"steps" desc:"how far (default 1)"`
}

type PlaceArgs struct {
	Row    int               `json:"row" desc:"row index"`
	Col    uint8             `json:"col" desc:"column index"`
	Weight float64           `json:"weight" desc:"piece weight"`
	Tags   []string          `json:"tags,omitempty" desc:"labels"`
	Attrs  map[string]bool   `json:"attrs,omitempty" desc:"flags"`
	Piece  Piece             `json:"piece" desc:"the piece"`
	Extra  json.RawMessage   `json:"extra,omitempty" desc:"anything"`
	Grid   [2]int            `json:"grid,omitempty" desc:"a pair"`
	Level  int               `json:"level,omitzero" desc:"difficulty" enum:"1,2,3"`
	Notes  map[string][]int8 `json:"notes,omitempty" desc:"small numbers"`
	Hidden string            `json:"-"`
}

type Piece struct {
	Kind  string `json:"kind" desc:"piece kind"`
	Color string `json:"color,omitempty"`
}

func (b *board) ToolDescriptions() map[string]string {
	return map[string]string{
		"Move":  "Move the cursor.",
		"Place": "Place a piece.",
		"Count": "Count the moves so far.",
		"Boom":  "Fail in the worst way.",
		"Fail":  "Return an error.",
	}
}

func (b *board) Reset(ctx context.Context) (string, error) { b.moves = nil; return "", nil }
func (b *board) Reward(ctx context.Context) (float64, error) {
	return float64(len(b.moves)), nil
}
func (b *board) Close() error { return nil }

func (b *board) Move(ctx context.Context, a MoveArgs) (string, error) {
	n := 1
	if a.Steps != nil {
		n = *a.Steps
	}
	b.moves = append(b.moves, fmt.Sprintf("%s*%d", a.Direction, n))
	return "moved " + a.Direction, nil
}

func (b *board) Place(ctx context.Context, a PlaceArgs) (map[string]any, error) {
	return map[string]any{"row": a.Row, "col": a.Col, "kind": a.Piece.Kind, "tags": a.Tags, "html": "<b>&"}, nil
}

func (b *board) Count(ctx context.Context) (int, error) { return len(b.moves), nil }

func (b *board) Boom(ctx context.Context) (string, error) { panic("kaboom") }

func (b *board) Fail(ctx context.Context) (string, error) {
	return "", errors.New("the board is locked")
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"Guess": "guess", "MoveLeft": "move_left", "GetURL": "get_url", "HTTPServer2": "http_server2",
		"ID": "id", "A": "a", "GetHTTPResponse": "get_http_response", "Step2Go": "step2_go",
	} {
		assert.Equal(t, want, snake(in), in)
	}
}

func TestDiscoverSchemas(t *testing.T) {
	s, err := Discover(&board{})
	require.NoError(t, err)
	assert.Equal(t, []string{"boom", "count", "fail", "move", "place"}, s.Names(), "name order, reserved methods left out")

	move, ok := s.Lookup("move")
	require.True(t, ok)
	assert.Equal(t, "Move the cursor.", move.Description())
	assert.Equal(t,
		`{"type":"function","function":{"name":"move","description":"Move the cursor.","parameters":`+
			`{"type":"object","properties":{"direction":{"type":"string","enum":["left","right"],"description":"where to go"},`+
			`"steps":{"type":"integer","nullable":true,"description":"how far (default 1)"}},"required":["direction"]},`+
			`"return":{"type":"string"}}}`,
		string(move.Schema()))
	count0, _ := s.Lookup("count")
	assert.Contains(t, string(count0.Schema()), `"return":{"type":"integer"}}}`)
	place0, _ := s.Lookup("place")
	assert.Contains(t, string(place0.Schema()), `"return":{"type":"object","additionalProperties":{}}}}`, "map[string]any")

	count, _ := s.Lookup("count")
	assert.Equal(t, `{"type":"object","properties":{}}`, string(count.Parameters()))

	place, _ := s.Lookup("place")
	assert.Equal(t,
		`{"type":"object","properties":{`+
			`"row":{"type":"integer","description":"row index"},`+
			`"col":{"type":"integer","description":"column index"},`+
			`"weight":{"type":"number","description":"piece weight"},`+
			`"tags":{"type":"array","items":{"type":"string"},"description":"labels"},`+
			`"attrs":{"type":"object","additionalProperties":{"type":"boolean"},"description":"flags"},`+
			`"piece":{"type":"object","properties":{"kind":{"type":"string","description":"piece kind"},"color":{"type":"string"}},"required":["kind"],"description":"the piece"},`+
			`"extra":{"description":"anything"},`+
			`"grid":{"type":"array","items":{"type":"integer"},"description":"a pair"},`+
			`"level":{"type":"integer","enum":[1,2,3],"description":"difficulty"},`+
			`"notes":{"type":"object","additionalProperties":{"type":"array","items":{"type":"integer"}},"description":"small numbers"}},`+
			`"required":["row","col","weight","piece"]}`,
		string(place.Parameters()))
	for _, sc := range s.Schemas() {
		assert.True(t, json.Valid(sc), string(sc))
	}
}

func TestCall(t *testing.T) {
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name, tool, args string
		ctx              context.Context
		want             string // exact response
		kind             Kind   // 0: success
		contains         string // for failures: part of the message
	}{
		{name: "string result", tool: "move", args: `{"direction":"left"}`, want: "moved left"},
		{name: "optional given", tool: "move", args: `{"direction": "right", "steps": 3}`, want: "moved right"},
		{name: "optional null", tool: "move", args: `{"direction":"left","steps":null}`, want: "moved left"},
		{name: "json result", tool: "place", args: `{"row":1,"col":2,"weight":0.5,"piece":{"kind":"rook"},"tags":["a"]}`,
			want: `{"col":2,"html":"<b>&","kind":"rook","row":1,"tags":["a"]}`},
		{name: "no args empty", tool: "count", args: ``, want: "0"},
		{name: "no args null", tool: "count", args: `null`, want: "0"},
		{name: "no args object", tool: "count", args: ` {} `, want: "0"},
		{name: "unknown tool", tool: "jump", args: `{}`, kind: NotFound, contains: "Tool jump not found. Available tools: boom, count, fail, move, place."},
		{name: "unknown argument", tool: "move", args: `{"direction":"left","speed":2}`, kind: BadArguments, contains: `unexpected argument "speed"; expected "direction", "steps"`},
		{name: "other case", tool: "move", args: `{"Direction":"left"}`, kind: BadArguments, contains: `unexpected argument "Direction"`},
		{name: "missing required", tool: "move", args: `{}`, kind: BadArguments, contains: `move is missing required argument "direction"`},
		{name: "wrong type", tool: "move", args: `{"direction":7}`, kind: BadArguments, contains: `argument "direction" of move must be a string, got number`},
		{name: "null required", tool: "move", args: `{"direction":null}`, kind: BadArguments, contains: `must not be null`},
		{name: "enum", tool: "move", args: `{"direction":"up"}`, kind: BadArguments, contains: `must be one of "left", "right", got "up"`},
		{name: "int enum", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"level":4}`, kind: BadArguments, contains: `must be one of 1, 2, 3, got 4`},
		{name: "fractional int", tool: "move", args: `{"direction":"left","steps":1.5}`, kind: BadArguments, contains: `must be an integer, got 1.5`},
		{name: "uint negative", tool: "place", args: `{"row":1,"col":-2,"weight":1,"piece":{"kind":"k"}}`, kind: BadArguments, contains: `must be a non-negative integer`},
		{name: "uint8 overflow", tool: "place", args: `{"row":1,"col":256,"weight":1,"piece":{"kind":"k"}}`, kind: BadArguments, contains: `256 is out of range`},
		{name: "nested missing", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{}}`, kind: BadArguments, contains: `missing required argument "piece.kind"`},
		{name: "nested unknown", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k","KIND":"x"}}`, kind: BadArguments, contains: `unexpected argument "piece.KIND"`},
		{name: "array item type", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"tags":["a",1]}`, kind: BadArguments, contains: `argument "tags[1]" of place must be a string`},
		{name: "fixed array too long", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"grid":[1,2,3]}`, kind: BadArguments, contains: `at most 2 allowed`},
		{name: "map value type", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"attrs":{"x":"yes"}}`, kind: BadArguments, contains: `argument "attrs.x" of place must be a boolean`},
		{name: "int8 in map overflow", tool: "place", args: `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"notes":{"a":[1,300]}}`, kind: BadArguments, contains: `300 is out of range`},
		{name: "not an object", tool: "move", args: `["left"]`, kind: BadArguments, contains: `must be a JSON object, got array`},
		{name: "invalid json", tool: "move", args: `{"direction":`, kind: BadArguments, contains: `not valid JSON`},
		{name: "trailing data", tool: "move", args: `{"direction":"left"} {}`, kind: BadArguments, contains: `trailing data`},
		{name: "args to no-arg tool", tool: "count", args: `{"x":1}`, kind: BadArguments, contains: `count takes no arguments, got x`},
		{name: "tool error", tool: "fail", args: `{}`, kind: Failed, contains: `the board is locked`},
		{name: "panic", tool: "boom", args: `{}`, kind: Panicked, contains: `tool boom panicked: kaboom`},
		{name: "canceled", tool: "count", args: `{}`, ctx: canceled, kind: Failed, contains: `not run: context canceled`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Discover(&board{})
			require.NoError(t, err)
			c := tc.ctx
			if c == nil {
				c = ctx
			}
			got, err := s.Call(c, tc.tool, json.RawMessage(tc.args))
			if tc.kind == 0 {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.kind, ce.Kind)
			assert.Contains(t, ce.Error(), tc.contains)
			var resp map[string]string
			require.NoError(t, json.Unmarshal([]byte(got), &resp), got)
			assert.Equal(t, ce.Error(), resp["error"])
			assert.True(t, strings.HasPrefix(got, `{"error": "`), got)
		})
	}
}

// TestCallQuotesABoundedPrefix sends 8 MB of bad input in each place an
// error message quotes the model's input and checks the reply quotes only
// its first maxQuote bytes and says how long it was (the cut does not
// depend on the size: 100 MB gives the same replies, in seconds).
func TestCallQuotesABoundedPrefix(t *testing.T) {
	const n, maxQuote = 8 << 20, 64 // maxQuote: the package's bound
	big := strings.Repeat("é", n/2) // two bytes a rune: the cut must not split one
	digits := strings.Repeat("9", n)
	tests := []struct{ name, tool, args, contains string }{
		{"unknown tool", big, `{}`, "Tool " + strings.Repeat("é", maxQuote/2) + "… (8388608 bytes) not found."},
		{"unknown argument", "move", `{"direction":"left","` + big + `":1}`, `unexpected argument "` + strings.Repeat("é", maxQuote/2) + `… (8388608 bytes)"`},
		{"enum", "move", `{"direction":"` + big + `"}`, `got "` + strings.Repeat("é", maxQuote/2-1) + `… (8388610 bytes)`},
		{"integer", "place", `{"row":` + digits + `,"col":2,"weight":1,"piece":{"kind":"k"}}`, `: ` + digits[:maxQuote] + `… (8388608 bytes) is out of range`},
		{"number", "place", `{"row":1,"col":2,"weight":` + digits + `,"piece":{"kind":"k"}}`, digits[:maxQuote] + `… (8388608 bytes) is out of range`},
		{"map key", "place", `{"row":1,"col":2,"weight":1,"piece":{"kind":"k"},"attrs":{"` + big + `":"yes"}}`, `argument "attrs.` + strings.Repeat("é", maxQuote/2-3) + `… (8388614 bytes)" of place`},
		{"keys of a no-argument tool", "count", `{"` + big + `":1}`, `got ` + strings.Repeat("é", maxQuote/2) + `… (8388608 bytes)`},
	}
	s, err := Discover(&board{})
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Call(context.Background(), tc.tool, json.RawMessage(tc.args))
			require.Error(t, err)
			// Failures print a prefix too: a failing run must not print 8 MB.
			assert.True(t, len(got) < 512, "the reply quotes a prefix, not the argument: %d bytes", len(got))
			assert.True(t, strings.Contains(err.Error(), tc.contains), "%.300s… does not contain %s", err, tc.contains)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

func TestCallChangesState(t *testing.T) {
	b := &board{}
	s, err := Discover(b)
	require.NoError(t, err)
	_, err = s.Call(context.Background(), "move", json.RawMessage(`{"direction":"left","steps":2}`))
	require.NoError(t, err)
	got, err := s.Call(context.Background(), "count", nil)
	require.NoError(t, err)
	assert.Equal(t, "1", got)
	assert.Equal(t, []string{"left*2"}, b.moves, "tools are bound to the discovered value")
}

type noDesc struct{}

func (noDesc) Go(ctx context.Context) (string, error) { return "", nil }

type badSig struct{}

func (badSig) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (badSig) Go(word string) string               { return word }

type noCtx struct{}

func (noCtx) ToolDescriptions() map[string]string              { return map[string]string{"Go": "go"} }
func (noCtx) Go(ctx context.Context, a, b int) (string, error) { return "", nil }

type ptrArgs struct{}

func (ptrArgs) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (ptrArgs) Go(ctx context.Context, a *MoveArgs) (string, error) {
	return "", nil
}

type noErr struct{}

func (noErr) ToolDescriptions() map[string]string                 { return map[string]string{"Go": "go"} }
func (noErr) Go(ctx context.Context, a MoveArgs) (string, string) { return "", "" }

type undocumentedArg struct{}

type UndocArgs struct {
	Word string `json:"word"`
}

func (undocumentedArg) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (undocumentedArg) Go(ctx context.Context, a UndocArgs) (string, error) {
	return "", nil
}

type extraDesc struct{}

func (extraDesc) ToolDescriptions() map[string]string {
	return map[string]string{"Go": "go", "Gone": "gone"}
}
func (extraDesc) Go(ctx context.Context) (string, error) { return "", nil }

type chanArg struct{}

type ChanArgs struct {
	C chan int `json:"c" desc:"a channel"`
}

func (chanArg) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (chanArg) Go(ctx context.Context, a ChanArgs) (string, error) {
	return "", nil
}

type clash struct{}

func (clash) ToolDescriptions() map[string]string {
	return map[string]string{"GetURL": "a", "GetUrl": "b"}
}
func (clash) GetURL(ctx context.Context) (string, error) { return "", nil }
func (clash) GetUrl(ctx context.Context) (string, error) { return "", nil }

type badEnum struct{}

type BadEnumArgs struct {
	N float64 `json:"n" desc:"n" enum:"1,2"`
}

func (badEnum) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (badEnum) Go(ctx context.Context, a BadEnumArgs) (string, error) {
	return "", nil
}

type embedArgs struct{}

type EmbedArgs struct {
	Piece
}

func (embedArgs) ToolDescriptions() map[string]string { return map[string]string{"Go": "go"} }
func (embedArgs) Go(ctx context.Context, a EmbedArgs) (string, error) {
	return "", nil
}

func TestDiscoverErrors(t *testing.T) {
	tests := []struct {
		name string
		v    any
		opts []Option
		want string
	}{
		{"nil", nil, nil, "nil value"},
		{"nil pointer", (*board)(nil), nil, "nil *tools.board"},
		{"no description", noDesc{}, nil, `method tools.noDesc.Go has no description`},
		{"bad signature", badSig{}, nil, `method tools.badSig.Go: the first argument must be context.Context; a tool is func(context.Context, ArgsStruct) (Result, error) or func(context.Context) (Result, error), have func(string) string`},
		{"too many args", noCtx{}, nil, `method tools.noCtx.Go: the first argument must be context.Context`},
		{"pointer args", ptrArgs{}, nil, `method tools.ptrArgs.Go: the arguments must be a struct type`},
		{"no error result", noErr{}, nil, `method tools.noErr.Go: it must return (Result, error)`},
		{"undocumented argument", undocumentedArg{}, nil, `method tools.undocumentedArg.Go: parameter "word" (field Word) has no description`},
		{"description of no tool", extraDesc{}, nil, `ToolDescriptions has key "Gone", which names no method`},
		{"unsupported type", chanArg{}, nil, `parameter "c" (field C): unsupported type chan int`},
		{"name clash", clash{}, nil, `methods GetURL and GetUrl both make tool "get_url"`},
		{"enum on float", badEnum{}, nil, `enum is only allowed on string and integer fields`},
		{"embedded args", embedArgs{}, nil, `embedded field Piece is not supported`},
		{"exclude unknown", &board{}, []Option{Exclude("Jump")}, `Exclude("Jump") names no method`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Discover(tc.v, tc.opts...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestExclude(t *testing.T) {
	s, err := Discover(&board{}, Exclude("Boom", "Fail"))
	require.NoError(t, err)
	assert.Equal(t, []string{"count", "move", "place"}, s.Names())
	s, err = Discover(badSig{}, Exclude("Go"))
	require.NoError(t, err, "an excluded method's signature does not matter")
	assert.Equal(t, 0, s.Len())
}

// helper is embedded in the envs below; its methods are promoted.
type helper struct{}

func (helper) Ping(ctx context.Context) (string, error)   { return "pong", nil }
func (*helper) Peek(ctx context.Context) (string, error)  { return "peek", nil }
func (helper) Shadow(ctx context.Context) (string, error) { return "helper", nil }

type embedsValue struct{ helper }

func (embedsValue) ToolDescriptions() map[string]string {
	return map[string]string{"Own": "own", "Shadow": "shadow"}
}
func (embedsValue) Own(ctx context.Context) (string, error)     { return "own", nil }
func (*embedsValue) Shadow(ctx context.Context) (string, error) { return "mine", nil }

type embedsPointer struct{ *helper }

func (embedsPointer) ToolDescriptions() map[string]string {
	return map[string]string{"Shadow": "shadow", "Ping": "ping", "Peek": "peek"}
}
func (embedsPointer) Shadow(ctx context.Context) (string, error) { return "value-declared", nil }

func TestPromoted(t *testing.T) {
	s, err := Discover(&embedsValue{})
	require.NoError(t, err)
	assert.Equal(t, []string{"own", "shadow"}, s.Names(), "promoted Ping/Peek are not tools; declared Shadow is")
	got, err := s.Call(context.Background(), "shadow", nil)
	require.NoError(t, err)
	assert.Equal(t, "mine", got)

	s, err = Discover(&embedsPointer{helper: &helper{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"shadow"}, s.Names(), "a value-receiver declaration shadows the promoted method")

	s, err = Discover(&embedsPointer{helper: &helper{}}, Promoted())
	require.NoError(t, err)
	assert.Equal(t, []string{"peek", "ping", "shadow"}, s.Names())
	got, err = s.Call(context.Background(), "shadow", nil)
	require.NoError(t, err)
	assert.Equal(t, "value-declared", got)
	got, err = s.Call(context.Background(), "peek", nil)
	require.NoError(t, err)
	assert.Equal(t, "peek", got)

	s, err = Discover(&embedsPointer{helper: &helper{}}, Exclude("Ping", "Peek"))
	require.NoError(t, err)
	assert.Equal(t, []string{"shadow"}, s.Names())
}

// counting counts ToolDescriptions calls to show the per-type cache.
type counting struct{ calls *int }

func (c counting) ToolDescriptions() map[string]string {
	*c.calls++
	return map[string]string{"Go": "go"}
}
func (counting) Go(ctx context.Context) (string, error) { return "went", nil }

func TestDiscoverCachesPerType(t *testing.T) {
	// Start from an empty memo so that the counts below do not depend on
	// an earlier run in this process (go test -count=N); other tests only
	// recompute what they need.
	cache.Clear()
	n := 0
	for range 3 {
		s, err := Discover(counting{calls: &n})
		require.NoError(t, err)
		require.Equal(t, 1, s.Len())
	}
	assert.Equal(t, 1, n, "the type is inspected once")
	s, err := Discover(counting{calls: &n}, Exclude("Go"))
	require.NoError(t, err)
	assert.Equal(t, 0, s.Len())
	assert.Equal(t, 2, n, "different options are a different discovery")
}

func TestNewAndJoin(t *testing.T) {
	var got json.RawMessage
	echo, err := New("echo_message", "Echo a message.",
		json.RawMessage(` {"type":"object","properties":{"message":{"type":"string"}},"required":["message"]} `),
		func(ctx context.Context, args json.RawMessage) (string, error) {
			got = args
			var a struct{ Message string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			if a.Message == "" {
				return "", errors.New("message is empty")
			}
			return a.Message, nil
		})
	require.NoError(t, err)
	assert.Equal(t, `{"type":"function","function":{"name":"echo_message","description":"Echo a message.","parameters":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}}`,
		string(echo.Schema()))

	env, err := Discover(&board{})
	require.NoError(t, err)
	dyn, err := NewSet(echo)
	require.NoError(t, err)
	all, err := Join(dyn, nil, env)
	require.NoError(t, err)
	assert.Equal(t, []string{"echo_message", "boom", "count", "fail", "move", "place"}, all.Names())

	resp, err := all.Call(context.Background(), "echo_message", json.RawMessage(`{"message":"Hi"}`))
	require.NoError(t, err)
	assert.Equal(t, "Hi", resp)
	_, err = all.Call(context.Background(), "echo_message", nil)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, Failed, ce.Kind)
	assert.Equal(t, "{}", string(got), "null arguments reach a dynamic tool as {}")
	_, err = all.Call(context.Background(), "echo_message", json.RawMessage(`"Hi"`))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, BadArguments, ce.Kind)

	_, err = Join(env, env)
	assert.ErrorContains(t, err, `two tools named "boom"`)
	_, err = NewSet(Tool{name: "x"})
	assert.ErrorContains(t, err, "not made by tools.New")

	for _, bad := range []struct {
		name, desc, params string
		fn                 Func
		want               string
	}{
		{"", "d", "", dynFn, "empty name"},
		{"x", "", "", dynFn, "empty description"},
		{"x", "d", "", nil, "nil function"},
		{"x", "d", `[1]`, dynFn, "must be a JSON object schema"},
		{"x", "d", `{"type":`, dynFn, "must be a JSON object schema"},
	} {
		_, err := New(bad.name, bad.desc, json.RawMessage(bad.params), bad.fn)
		assert.ErrorContains(t, err, bad.want)
	}
	noParams, err := New("ping", "Ping.", nil, dynFn)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object","properties":{}}`, string(noParams.Parameters()))
}

func dynFn(ctx context.Context, args json.RawMessage) (string, error) { return "ok", nil }

// TestWithReturn: a tool made with New and given a discovered method's
// return schema has that method's schema byte for byte (what a remote env
// needs to render its prompt as the local env does).
func TestWithReturn(t *testing.T) {
	s, err := Discover(&board{})
	require.NoError(t, err)
	move, _ := s.Lookup("move")
	assert.JSONEq(t, `{"type":"string"}`, string(move.Return()))

	dyn, err := New(move.Name(), move.Description(), move.Parameters(), dynFn)
	require.NoError(t, err)
	assert.Nil(t, dyn.Return())
	assert.NotEqual(t, string(move.Schema()), string(dyn.Schema()))
	withRet, err := dyn.WithReturn(json.RawMessage(" " + string(move.Return()) + "\n"))
	require.NoError(t, err)
	assert.Equal(t, string(move.Schema()), string(withRet.Schema()))
	assert.Equal(t, string(move.Return()), string(withRet.Return()))
	resp, err := withRet.call(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "ok", resp, "the function is kept")

	none, err := withRet.WithReturn(nil)
	require.NoError(t, err)
	assert.Equal(t, string(dyn.Schema()), string(none.Schema()))
	_, err = dyn.WithReturn(json.RawMessage(`{"type":`))
	assert.ErrorContains(t, err, "not valid JSON")
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "not_found", NotFound.String())
	assert.Equal(t, "bad_arguments", BadArguments.String())
	assert.Equal(t, "failed", Failed.String())
	assert.Equal(t, "panicked", Panicked.String())
	assert.Equal(t, "Kind(9)", Kind(9).String())
}

// results has tools returning types with and without a result schema.
type results struct{}

func (results) ToolDescriptions() map[string]string {
	return map[string]string{"Raw": "raw", "When": "when", "Pair": "pair"}
}
func (results) Raw(ctx context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"a": 1}`), nil
}
func (results) When(ctx context.Context) (time.Time, error) {
	return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), nil
}
func (results) Pair(ctx context.Context) ([]*Piece, error) {
	return []*Piece{{Kind: "k"}, nil}, nil
}

func TestResultSchemasAndRendering(t *testing.T) {
	s, err := Discover(results{})
	require.NoError(t, err)
	schemaOf := func(name string) string {
		tl, ok := s.Lookup(name)
		require.True(t, ok)
		return string(tl.Schema())
	}
	assert.Contains(t, schemaOf("raw"), `"return":{}}}`)
	assert.NotContains(t, schemaOf("when"), `"return"`, "a type with MarshalJSON has no known schema")
	assert.Contains(t, schemaOf("pair"), `"return":{"type":"array","items":{"type":"object","nullable":true,"properties":{"kind":{"type":"string","description":"piece kind"},"color":{"type":"string"}},"required":["kind"]}}}}`)

	ctx := context.Background()
	for name, want := range map[string]string{
		"raw":  `{"a": 1}`,
		"when": `"2026-12-01T00:00:00Z"`,
		"pair": `[{"kind":"k"},null]`,
	} {
		got, err := s.Call(ctx, name, nil)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
}
