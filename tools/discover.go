package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Describer gives the tool descriptions of a type, keyed by method name
// (e.g. "Guess"). Discover calls it once per type, on the first value it
// sees, so the result must not depend on the value's state.
type Describer interface {
	ToolDescriptions() map[string]string
}

// Reserved returns the method names that are never tools: the
// environment's lifecycle (Reset, Reward, Close) and the description hook.
func Reserved() []string { return []string{"Close", "Reset", "Reward", "ToolDescriptions"} }

// Option changes which methods Discover takes.
type Option func(*options)

type options struct {
	promoted bool
	exclude  []string
}

// Promoted makes methods promoted from embedded fields tools too (by
// default they are not: embedding a helper type must not silently offer its
// methods to the model).
func Promoted() Option { return func(o *options) { o.promoted = true } }

// Exclude names methods (Go names, e.g. "String") that are not tools.
func Exclude(methods ...string) Option {
	return func(o *options) { o.exclude = append(o.exclude, methods...) }
}

// cacheKey identifies one discovery: a type and the options that change it.
type cacheKey struct {
	t        reflect.Type
	promoted bool
	exclude  string
}

// cache maps cacheKey to *typeInfo. It only memoises Discover's reflection
// walk, whose result is a pure function of the key.
var cache sync.Map

// typeInfo is the cached discovery of one type.
type typeInfo struct {
	methods []*methodInfo
}

// methodInfo is one tool method of a type.
type methodInfo struct {
	tool     string        // snake_case tool name
	method   string        // Go method name
	fn       reflect.Value // the method expression: receiver is the first argument
	args     reflect.Type  // the argument struct; nil when the method takes none
	shape    *shape        // the argument shape; nil when none
	isString bool          // the result has kind string: returned as is
	tl       Tool          // schema and description, without a call function
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// Discover returns the tools of v: its exported methods as described in the
// package documentation, bound to v. Every problem (a method of the wrong
// form, a missing description, an unsupported argument type) is an error
// naming the method and argument. The reflection walk is cached per type
// and options; later calls only bind.
func Discover(v any, opts ...Option) (*Set, error) {
	if v == nil {
		return nil, errors.New("tools: discover: nil value")
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, fmt.Errorf("tools: discover: nil %s", rv.Type())
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ex := slices.Clone(o.exclude)
	slices.Sort(ex)
	key := cacheKey{t: rv.Type(), promoted: o.promoted, exclude: strings.Join(ex, ",")}
	var info *typeInfo
	if c, ok := cache.Load(key); ok {
		info = c.(*typeInfo)
	} else {
		var err error
		if info, err = inspect(v, rv.Type(), o); err != nil {
			return nil, err
		}
		cache.Store(key, info)
	}
	set := &Set{tools: make([]Tool, len(info.methods)), byName: make(map[string]int, len(info.methods))}
	for i, m := range info.methods {
		t := m.tl
		t.call = m.bind(rv)
		set.tools[i] = t
		set.byName[t.name] = i
	}
	return set, nil
}

// inspect walks the methods of t once.
func inspect(v any, t reflect.Type, o options) (*typeInfo, error) {
	var descs map[string]string
	if d, ok := v.(Describer); ok {
		descs = d.ToolDescriptions()
	}
	skip := map[string]bool{}
	for _, r := range Reserved() {
		skip[r] = true
	}
	for _, e := range o.exclude {
		if _, ok := t.MethodByName(e); !ok {
			return nil, fmt.Errorf("tools: %s: Exclude(%q) names no method", t, e)
		}
		skip[e] = true
	}
	info := &typeInfo{}
	tools := map[string]string{}
	for i := range t.NumMethod() {
		m := t.Method(i)
		if skip[m.Name] || !o.promoted && isPromoted(t, m.Name) {
			continue
		}
		mi, err := inspectMethod(t, m)
		if err != nil {
			return nil, err
		}
		if other, dup := tools[mi.tool]; dup {
			return nil, fmt.Errorf("tools: %s: methods %s and %s both make tool %q", t, other, m.Name, mi.tool)
		}
		tools[mi.tool] = m.Name
		desc := strings.TrimSpace(descs[m.Name])
		if desc == "" {
			return nil, fmt.Errorf("tools: method %s.%s has no description: return it from ToolDescriptions() under key %q (or unexport the method, or pass tools.Exclude(%q))",
				t, m.Name, m.Name, m.Name)
		}
		params := parametersSchema(mi.shape)
		ret := returnSchema(m.Type.Out(0))
		mi.tl = Tool{name: mi.tool, description: desc, parameters: params, ret: ret, schema: functionSchema(mi.tool, desc, params, ret)}
		info.methods = append(info.methods, mi)
	}
	for _, name := range sortedKeys(descs) {
		if _, ok := t.MethodByName(name); !ok {
			return nil, fmt.Errorf("tools: %s: ToolDescriptions has key %q, which names no method", t, name)
		}
	}
	return info, nil
}

// inspectMethod checks one method's signature and compiles its arguments.
func inspectMethod(t reflect.Type, m reflect.Method) (*methodInfo, error) {
	mt := m.Type // receiver first
	where := fmt.Sprintf("tools: method %s.%s", t, m.Name)
	wrong := func(why string) error {
		return fmt.Errorf("%s: %s; a tool is func(context.Context, ArgsStruct) (Result, error) or func(context.Context) (Result, error), have %s (unexport it, or pass tools.Exclude(%q))",
			where, why, strings.Replace(mt.String(), "func("+t.String()+", ", "func(", 1), m.Name)
	}
	if mt.IsVariadic() {
		return nil, wrong("variadic")
	}
	if mt.NumIn() < 2 || mt.NumIn() > 3 || mt.In(1) != contextType {
		return nil, wrong("the first argument must be context.Context")
	}
	if mt.NumOut() != 2 || mt.Out(1) != errorType {
		return nil, wrong("it must return (Result, error)")
	}
	mi := &methodInfo{tool: snake(m.Name), method: m.Name, fn: m.Func, isString: mt.Out(0).Kind() == reflect.String}
	if mt.NumIn() == 3 {
		at := mt.In(2)
		if at.Kind() != reflect.Struct {
			return nil, wrong("the arguments must be a struct type")
		}
		s, err := shapeOf(at, where, true, map[reflect.Type]bool{})
		if err != nil {
			return nil, err
		}
		mi.args, mi.shape = at, s
	}
	return mi, nil
}

// returnSchema is the schema of a result type, nil when it has none
// (e.g. a type with its own MarshalJSON).
func returnSchema(t reflect.Type) []byte {
	if t == rawMessageType {
		return []byte("{}")
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return nil
	}
	s, err := shapeOf(t, "result", false, map[reflect.Type]bool{})
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	s.writeSchema(&b, "")
	return b.Bytes()
}

// bind makes the call function of the method on receiver recv.
func (m *methodInfo) bind(recv reflect.Value) Func {
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		in := make([]reflect.Value, 2, 3)
		in[0], in[1] = recv, reflect.ValueOf(&ctx).Elem()
		raw, err := checkArgs(m.tool, m.shape, args)
		if err != nil {
			return "", &CallError{Tool: m.tool, Kind: BadArguments, Err: err}
		}
		if m.args != nil {
			// checkArgs has matched every key exactly and checked every
			// type, so plain Unmarshal cannot fold case or drop keys here.
			p := reflect.New(m.args)
			if err := json.Unmarshal(raw, p.Interface()); err != nil {
				return "", &CallError{Tool: m.tool, Kind: BadArguments, Err: fmt.Errorf("arguments of %s: %v", m.tool, err)}
			}
			in = append(in, p.Elem())
		}
		out := m.fn.Call(in)
		if e := out[1].Interface(); e != nil {
			return "", e.(error)
		}
		if m.isString {
			return out[0].String(), nil
		}
		return render(m.tool, out[0].Interface())
	}
}

// render writes a non-string tool result as JSON.
func render(tool string, v any) (string, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return "", fmt.Errorf("tool %s returned invalid JSON", tool)
		}
		return string(raw), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("render result of %s: %v", tool, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// isPromoted reports whether method name of t comes from an embedded field
// rather than being declared by t (or, for a pointer, by its element type).
func isPromoted(t reflect.Type, name string) bool {
	base := t
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base.Kind() != reflect.Struct || !embeddedHas(base, name) {
		return false
	}
	// An embedded field has the name, so t's method is either promoted or
	// a declaration shadowing it. Promoted methods (and value methods
	// reached through a pointer) are compiler-generated wrappers.
	if m, ok := t.MethodByName(name); ok && !generated(m.Func) {
		return false
	}
	if base != t {
		if m, ok := base.MethodByName(name); ok && !generated(m.Func) {
			return false
		}
	}
	return true
}

// embeddedHas reports whether an embedded field of struct type s has a
// method called name.
func embeddedHas(s reflect.Type, name string) bool {
	for i := range s.NumField() {
		f := s.Field(i)
		if !f.Anonymous {
			continue
		}
		if _, ok := f.Type.MethodByName(name); ok {
			return true
		}
		if f.Type.Kind() != reflect.Pointer && f.Type.Kind() != reflect.Interface {
			if _, ok := reflect.PointerTo(f.Type).MethodByName(name); ok {
				return true
			}
		}
	}
	return false
}

// generated reports whether fn is a compiler-generated method wrapper.
func generated(fn reflect.Value) bool {
	f := runtime.FuncForPC(fn.Pointer())
	if f == nil {
		return true
	}
	file, _ := f.FileLine(f.Entry())
	return file == "<autogenerated>"
}
