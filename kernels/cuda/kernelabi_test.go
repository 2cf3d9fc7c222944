package cuda

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// The kernels' calling convention is written by hand twice: the kernel
// signatures in the .cu files, and the argument chains of the one launch
// path (argsOf().ptr(...).i32(...) in ops*.go and probe.go), plus the
// argument structs of abi.go and their C twins; the PTX entries in gen/
// are generated from the .cu files, and the host build unpacks a launch's
// parameter block by the kernel's own C type (host.cc), so it repeats no
// parameter list. The compilers check none of these against each other:
// nvcc sees only the .cu files, and a launch packs a byte block that the
// driver hands to the kernel unchecked. TestKernelABI reads them all as
// text (no build tag, no nvcc, no GPU: it runs in every `go test`) and
// fails on any disagreement, naming the kernel, the parameter and the
// file; the host twin also checks every launch's packed classes against
// the kernel's signature when it runs (twin.go), which covers launches
// this static reading would miss.

// abiClass is how one kernel parameter travels: a pointer or an integer or
// float of a given width.
type abiClass string

const (
	abiPtr abiClass = "ptr"
	abiI8  abiClass = "i8"
	abiI16 abiClass = "i16"
	abiI32 abiClass = "i32"
	abiI64 abiClass = "i64"
	abiF32 abiClass = "f32"
	abiF64 abiClass = "f64"
	// abiB64 is PTX's 64-bit integer parameter: a pointer or a C long.
	abiB64 abiClass = "b64"
)

// size is the class's size in bytes.
func (c abiClass) size() int {
	switch c {
	case abiI8:
		return 1
	case abiI16:
		return 2
	case abiI32, abiF32:
		return 4
	}
	return 8
}

// compatible reports whether a parameter of class got (PTX, a Go
// launch) carries a C parameter of class want.
func (c abiClass) compatible(want abiClass) bool {
	if c == abiB64 {
		return want == abiPtr || want == abiI64
	}
	return c == want
}

// cClass classifies a C parameter or field type (without its name).
func cClass(typ string) (abiClass, error) {
	if strings.Contains(typ, "*") {
		return abiPtr, nil
	}
	var words []string
	for _, w := range strings.Fields(typ) {
		if w != "const" && w != "volatile" && w != "__restrict__" {
			words = append(words, w)
		}
	}
	switch strings.Join(words, " ") {
	case "bool", "char", "int8_t", "uint8_t":
		return abiI8, nil
	case "int16_t", "uint16_t", "short":
		return abiI16, nil
	case "int", "int32_t", "uint32_t", "unsigned", "unsigned int":
		return abiI32, nil
	case "long", "long long", "unsigned long", "int64_t", "uint64_t", "size_t":
		return abiI64, nil
	case "float":
		return abiF32, nil
	case "double":
		return abiF64, nil
	}
	return "", fmt.Errorf("unknown C type %q", typ)
}

// ptxClass classifies a PTX .param type.
func ptxClass(typ string) (abiClass, error) {
	switch typ {
	case ".u64", ".s64", ".b64":
		return abiB64, nil
	case ".u32", ".s32", ".b32":
		return abiI32, nil
	case ".u16", ".s16", ".b16":
		return abiI16, nil
	case ".u8", ".s8", ".b8":
		return abiI8, nil
	case ".f32":
		return abiF32, nil
	case ".f64":
		return abiF64, nil
	}
	return "", fmt.Errorf("unknown PTX parameter type %q", typ)
}

// cParam is one parameter of a C function or one field of a C struct.
type cParam struct {
	name  string
	class abiClass
}

// cSig is a C kernel or host entry: its name, parameters and file.
type cSig struct {
	name, file string
	params     []cParam
}

var (
	cLineComment = regexp.MustCompile(`//[^\n]*`)
	cKernelDecl  = regexp.MustCompile(`(?s)KERNEL\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)`)
	cHostKernel  = regexp.MustCompile(`HOST_KERNEL\((\w+)\)`)
	cStructDecl  = regexp.MustCompile(`(?s)struct\s+(\w+)\s*\{(.*?)\};`)
	ptxEntryDecl = regexp.MustCompile(`(?s)\.entry\s+(\w+)\s*\(([^)]*)\)`)
	ptxParamDecl = regexp.MustCompile(`\.param\s+(?:\.align\s+\d+\s+)?(\.\w+)\s+(\w+)(\[\d+\])?`)
)

// parseCParams splits a C parameter list into classified parameters.
func parseCParams(list string) ([]cParam, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "void" {
		return nil, nil
	}
	var out []cParam
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		i := strings.LastIndexFunc(p, func(r rune) bool { return r == ' ' || r == '*' || r == '\t' || r == '\n' })
		if i < 0 {
			return nil, fmt.Errorf("parameter %q has no name", p)
		}
		c, err := cClass(p[:i+1])
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", p, err)
		}
		out = append(out, cParam{name: strings.TrimSpace(p[i+1:]), class: c})
	}
	return out, nil
}

// parseKernels returns the KERNEL functions of one C/CUDA source.
func parseKernels(file, src string) ([]cSig, error) {
	src = cLineComment.ReplaceAllString(src, "")
	var out []cSig
	for _, m := range cKernelDecl.FindAllStringSubmatch(src, -1) {
		ps, err := parseCParams(m[2])
		if err != nil {
			return nil, fmt.Errorf("%s: kernel %s: %w", file, m[1], err)
		}
		out = append(out, cSig{name: m[1], file: file, params: ps})
	}
	return out, nil
}

// parseHostTable returns the kernels host.cc's table names
// (HOST_KERNEL(name)), in order; a name listed twice is an error.
func parseHostTable(file, src string) ([]string, error) {
	src = cLineComment.ReplaceAllString(src, "")
	var out []string
	seen := map[string]bool{}
	for _, m := range cHostKernel.FindAllStringSubmatch(src, -1) {
		if m[1] == "name" { // the macro's own definition
			continue
		}
		if seen[m[1]] {
			return nil, fmt.Errorf("%s: HOST_KERNEL(%s) listed twice", file, m[1])
		}
		seen[m[1]] = true
		out = append(out, m[1])
	}
	return out, nil
}

// parsePTX returns the entries of one PTX module with their parameter
// classes, in order.
func parsePTX(file, src string) (map[string][]abiClass, error) {
	out := map[string][]abiClass{}
	for _, m := range ptxEntryDecl.FindAllStringSubmatch(src, -1) {
		var cs []abiClass
		for _, p := range ptxParamDecl.FindAllStringSubmatch(m[2], -1) {
			if p[3] != "" {
				return nil, fmt.Errorf("%s: entry %s: parameter %s is a byte array%s (a struct by value): pass structs by pointer", file, m[1], p[2], p[3])
			}
			c, err := ptxClass(p[1])
			if err != nil {
				return nil, fmt.Errorf("%s: entry %s: parameter %s: %w", file, m[1], p[2], err)
			}
			cs = append(cs, c)
		}
		out[m[1]] = cs
	}
	return out, nil
}

// parseCStructs returns the fields of every struct in src.
func parseCStructs(file, src string) (map[string][]cParam, error) {
	src = cLineComment.ReplaceAllString(src, "")
	out := map[string][]cParam{}
	for _, m := range cStructDecl.FindAllStringSubmatch(src, -1) {
		var fields []cParam
		for _, decl := range strings.Split(m[2], ";") {
			decl = strings.TrimSpace(decl)
			if decl == "" || strings.Contains(decl, "(") || strings.Contains(decl, "}") {
				continue // member functions
			}
			// "long t, start" declares two fields of one type.
			names := strings.Split(decl, ",")
			first, err := parseCParams(names[0])
			if err != nil {
				return nil, fmt.Errorf("%s: struct %s: %w", file, m[1], err)
			}
			fields = append(fields, first...)
			for _, n := range names[1:] {
				fields = append(fields, cParam{name: strings.TrimSpace(n), class: first[0].class})
			}
		}
		out[m[1]] = fields
	}
	return out, nil
}

// checkSignature compares what carries a kernel's parameters (got, from
// PTX or a Go launch) with the kernel's C signature.
func checkSignature(what string, got []abiClass, k cSig) error {
	if len(got) != len(k.params) {
		return fmt.Errorf("%s passes %d parameters to %s, which takes %d (%s)", what, len(got), k.name, len(k.params), k.file)
	}
	for i, p := range k.params {
		if !got[i].compatible(p.class) {
			return fmt.Errorf("%s passes parameter %d of %s (%s, a %s in %s) as %s", what, i, k.name, p.name, p.class, k.file, got[i])
		}
	}
	return nil
}

// goLaunch is one device launch found in the Go sources: the kernels its
// name may be (more than one when a variable picks it) and the argument
// classes it packs.
type goLaunch struct {
	pos     string
	kernels []string
	args    []abiClass
}

var goArgClass = map[string]abiClass{"ptr": abiPtr, "i32": abiI32, "i64": abiI64, "f32": abiF32, "f64": abiF64}

// launcher is a function that launches a kernel named by one of its
// parameters with the argument list another parameter carries: the
// driver's and the session's launch methods, and any helper that forwards
// to them.
type launcher struct {
	nameIdx int // the parameter holding the kernel name
	argsIdx int // the parameter holding the *args; -1: the last argument; -2: the helper builds its own
}

// launcherKey names a launcher: a method (called as x.name) or a function.
type launcherKey struct {
	method bool
	name   string
}

// parseGoLaunches finds every kernel launch in the Go files: calls of a
// launch method, x.launch(name, plan, [smem,] args), and of any helper
// that forwards its own string parameter to one (found here, to a fixed
// point), and reads each launch's kernel name and argument chain,
// following local variables and closures of the enclosing function.
// Anything it cannot read is an error: a launch the check cannot see is a
// launch it cannot check.
func parseGoLaunches(fset *token.FileSet, files []*ast.File) ([]goLaunch, error) {
	launchers := map[launcherKey]launcher{
		{method: true, name: "launch"}:     {nameIdx: 0, argsIdx: -1},
		{method: true, name: "launchWith"}: {nameIdx: 0, argsIdx: -1},
	}
	var funcs []*ast.FuncDecl
	for _, f := range files {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				funcs = append(funcs, fn)
			}
		}
	}
	// launcherCalls calls visit for each call of a known launcher in fn.
	launcherCalls := func(fn *ast.FuncDecl, visit func(call *ast.CallExpr, l launcher)) {
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var key launcherKey
			switch fun := call.Fun.(type) {
			case *ast.SelectorExpr:
				key = launcherKey{method: true, name: fun.Sel.Name}
			case *ast.Ident:
				key = launcherKey{name: fun.Name}
			default:
				return true
			}
			if l, ok := launchers[key]; ok && len(call.Args) > l.nameIdx && len(call.Args) >= 2 {
				visit(call, l)
			}
			return true
		})
	}
	for grew := true; grew; {
		grew = false
		for _, fn := range funcs {
			key := launcherKey{method: fn.Recv != nil, name: fn.Name.Name}
			if _, known := launchers[key]; known {
				continue
			}
			launcherCalls(fn, func(call *ast.CallExpr, l launcher) {
				id, ok := call.Args[l.nameIdx].(*ast.Ident)
				if !ok {
					return
				}
				ni := paramIndex(fn, id.Name, true)
				if ni < 0 {
					return
				}
				ai := -2
				if l.argsIdx != -2 {
					if aid, ok := argsArg(call, l).(*ast.Ident); ok {
						if i := paramIndex(fn, aid.Name, false); i >= 0 {
							ai = i
						}
					}
				}
				launchers[key] = launcher{nameIdx: ni, argsIdx: ai}
				grew = true
			})
		}
	}

	var out []goLaunch
	var errs []string
	for _, fn := range funcs {
		defs := localDefs(fn)
		self, isLauncher := launchers[launcherKey{method: fn.Recv != nil, name: fn.Name.Name}]
		launcherCalls(fn, func(call *ast.CallExpr, l launcher) {
			pos := fset.Position(call.Pos()).String()
			if id, ok := call.Args[l.nameIdx].(*ast.Ident); ok && isLauncher && paramIndex(fn, id.Name, true) == self.nameIdx {
				if self.argsIdx == -2 {
					errs = append(errs, fmt.Sprintf("%s: %s forwards its kernel name but builds the argument list itself: the ABI check cannot read it (take the *args as a parameter)", pos, fn.Name.Name))
				}
				return // a forwarding launcher: its callers are checked
			}
			names, err := stringValues(call.Args[l.nameIdx], defs)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: kernel name: %v", pos, err))
				return
			}
			if l.argsIdx == -2 {
				errs = append(errs, fmt.Sprintf("%s: the launcher called here builds its own argument list: the ABI check cannot read it", pos))
				return
			}
			chain, err := argChain(argsArg(call, l), defs, 0)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: arguments of %s: %v", pos, strings.Join(names, "/"), err))
				return
			}
			out = append(out, goLaunch{pos: pos, kernels: names, args: chain})
		})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// argsArg is the argument of call that carries the *args for l.
func argsArg(call *ast.CallExpr, l launcher) ast.Expr {
	if l.argsIdx < 0 || l.argsIdx >= len(call.Args) {
		return call.Args[len(call.Args)-1]
	}
	return call.Args[l.argsIdx]
}

// paramIndex is the position of parameter name among fn's parameters, or
// -1; with str, only a parameter of type string counts.
func paramIndex(fn *ast.FuncDecl, name string, str bool) int {
	i := 0
	for _, f := range fn.Type.Params.List {
		t, isIdent := f.Type.(*ast.Ident)
		for _, n := range f.Names {
			if n.Name == name && (!str || isIdent && t.Name == "string") {
				return i
			}
			i++
		}
	}
	return -1
}

// localDefs maps each name assigned or declared in fn (at any depth) to
// the expressions it is given.
func localDefs(fn *ast.FuncDecl) map[string][]ast.Expr {
	defs := map[string][]ast.Expr{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if len(s.Lhs) == len(s.Rhs) {
				for i, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						defs[id.Name] = append(defs[id.Name], s.Rhs[i])
					}
				}
			}
		case *ast.ValueSpec:
			if len(s.Names) == len(s.Values) {
				for i, id := range s.Names {
					defs[id.Name] = append(defs[id.Name], s.Values[i])
				}
			}
		}
		return true
	})
	return defs
}

// stringValues is the string constants e may hold: a literal, or a local
// variable given only literals.
func stringValues(e ast.Expr, defs map[string][]ast.Expr) ([]string, error) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			s, err := strconv.Unquote(x.Value)
			return []string{s}, err
		}
	case *ast.Ident:
		var out []string
		for _, d := range defs[x.Name] {
			lit, ok := d.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return nil, fmt.Errorf("%s is given a value that is not a string literal: name the kernel with a literal", x.Name)
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		if len(out) > 0 {
			return out, nil
		}
		return nil, fmt.Errorf("%s has no string literal value in this function", x.Name)
	}
	return nil, fmt.Errorf("%T is not a string literal or a local variable", e)
}

// argChain reads argsOf().m1(...).m2(...)... into classes, following a
// local variable or a call of a local closure that returns such a chain.
func argChain(e ast.Expr, defs map[string][]ast.Expr, depth int) ([]abiClass, error) {
	if depth > 8 {
		return nil, fmt.Errorf("too many indirections")
	}
	switch x := e.(type) {
	case *ast.CallExpr:
		switch fun := x.Fun.(type) {
		case *ast.Ident:
			if fun.Name == "argsOf" {
				return nil, nil
			}
			ds := defs[fun.Name]
			if len(ds) != 1 {
				return nil, fmt.Errorf("%s() is not one local closure", fun.Name)
			}
			lit, ok := ds[0].(*ast.FuncLit)
			if !ok || len(lit.Body.List) != 1 {
				return nil, fmt.Errorf("%s() is not a one-statement closure returning an argsOf() chain", fun.Name)
			}
			ret, ok := lit.Body.List[0].(*ast.ReturnStmt)
			if !ok || len(ret.Results) != 1 {
				return nil, fmt.Errorf("%s() does not return one argsOf() chain", fun.Name)
			}
			return argChain(ret.Results[0], defs, depth+1)
		case *ast.SelectorExpr:
			c, ok := goArgClass[fun.Sel.Name]
			if !ok {
				return nil, fmt.Errorf("unknown argument method .%s", fun.Sel.Name)
			}
			head, err := argChain(fun.X, defs, depth) // a chain link, not an indirection
			if err != nil {
				return nil, err
			}
			return append(head, c), nil
		}
	case *ast.Ident:
		ds := defs[x.Name]
		if len(ds) != 1 {
			return nil, fmt.Errorf("%s is assigned %d times: build the arguments once, as an argsOf() chain", x.Name, len(ds))
		}
		return argChain(ds[0], defs, depth+1)
	}
	return nil, fmt.Errorf("cannot read %T as an argsOf() chain", e)
}

// goStructFields returns the fields of every struct type in f, each
// classified by its Go type.
func goStructFields(f *ast.File) (map[string][]cParam, error) {
	kinds := map[string]abiClass{"uintptr": abiPtr, "int64": abiI64, "uint64": abiI64, "int32": abiI32, "uint32": abiI32,
		"float32": abiF32, "float64": abiF64, "int16": abiI16, "uint16": abiI16, "int8": abiI8, "uint8": abiI8, "bool": abiI8}
	out := map[string][]cParam{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			var fields []cParam
			for _, fl := range st.Fields.List {
				id, ok := fl.Type.(*ast.Ident)
				if !ok {
					return nil, fmt.Errorf("struct %s: field type %T has no C twin (use uintptr, int64, int32, float32, float64)", ts.Name.Name, fl.Type)
				}
				c, known := kinds[id.Name]
				if !known {
					return nil, fmt.Errorf("struct %s: field type %s has no C twin (use uintptr, int64, int32, float32, float64)", ts.Name.Name, id.Name)
				}
				for _, n := range fl.Names {
					fields = append(fields, cParam{name: n.Name, class: c})
				}
			}
			out[ts.Name.Name] = fields
		}
	}
	return out, nil
}

// layout is a struct's field offsets and total size under natural
// alignment (the rule both gcc/nvcc on x86-64 and Go on amd64 follow).
func layout(fields []cParam) (offsets []int, size int) {
	align := 1
	for _, f := range fields {
		s := f.class.size()
		size = (size + s - 1) / s * s
		offsets = append(offsets, size)
		size += s
		align = max(align, s)
	}
	return offsets, (size + align - 1) / align * align
}

// checkStruct compares a Go argument struct with its C twin.
func checkStruct(goName string, g []cParam, cName string, c []cParam) error {
	if len(g) != len(c) {
		return fmt.Errorf("Go %s has %d fields, C %s has %d", goName, len(g), cName, len(c))
	}
	goff, gsize := layout(g)
	coff, csize := layout(c)
	for i := range g {
		if g[i].class != c[i].class || goff[i] != coff[i] {
			return fmt.Errorf("field %d: Go %s.%s is %s at offset %d, C %s.%s is %s at offset %d",
				i, goName, g[i].name, g[i].class, goff[i], cName, c[i].name, c[i].class, coff[i])
		}
	}
	if gsize != csize {
		return fmt.Errorf("Go %s is %d bytes, C %s is %d", goName, gsize, cName, csize)
	}
	return nil
}

// abiStructs pairs abi.go's argument structs with their C twins.
var abiStructs = [][2]string{
	{"sampleParams", "SampleParams"},
	{"gemmPart", "GemmPart"},
	{"lossArgs", "LossArgs"},
}

// hostOnlyKernels are defined in host.cc (shim self-tests), not built by
// nvcc and never launched on a device.
var hostOnlyKernels = []string{"simt_broken_diverge", "simt_broken_mask", "simt_broken_ldmatrix", "simt_broken_cp_async"}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "reading %s", path)
	return string(b)
}

// TestKernelABI checks the .cu kernel signatures against gen/*.ptx, host.cc's table,
// every device launch in the Go sources, and abi.go's structs against
// their C twins.
func TestKernelABI(t *testing.T) {
	sources, err := filepath.Glob("*.cu")
	require.NoError(t, err)
	require.NotEmpty(t, sources, "no .cu sources in kernels/cuda")

	kernels := map[string]cSig{}
	cStructs := map[string][]cParam{}
	for _, file := range append(sources, "host.cc") {
		src := readFile(t, file)
		ks, err := parseKernels(file, src)
		require.NoError(t, err)
		for _, k := range ks {
			prev, dup := kernels[k.name]
			require.False(t, dup, "kernel %s defined in %s and %s", k.name, prev.file, file)
			kernels[k.name] = k
		}
		if file == "host.cc" { // the launcher's own C++ types, no kernel arguments
			continue
		}
		ss, err := parseCStructs(file, src)
		require.NoError(t, err)
		for n, fs := range ss {
			cStructs[n] = fs
		}
	}
	for _, n := range hostOnlyKernels {
		require.Contains(t, kernels, n, "host-only kernel %s is gone from host.cc: update hostOnlyKernels", n)
	}

	t.Run("ptx", func(t *testing.T) {
		// gen/X.ptx must hold exactly X.cu's kernels, with the same
		// parameters: a .cu edited without `make cuda-kernels` fails here,
		// even on a machine without nvcc.
		for _, file := range sources {
			base := strings.TrimSuffix(file, ".cu")
			ptxFile := filepath.Join("gen", base+".ptx")
			require.FileExists(t, ptxFile, "run make cuda-kernels")
			require.FileExists(t, filepath.Join("gen", base+".sm_90.cubin"), "run make cuda-kernels")
			entries, err := parsePTX(ptxFile, readFile(t, ptxFile))
			require.NoError(t, err)
			var want []string
			for _, k := range kernels {
				if k.file == file {
					want = append(want, k.name)
				}
			}
			var got []string
			for n := range entries {
				got = append(got, n)
			}
			sort.Strings(want)
			sort.Strings(got)
			if !assert.Equal(t, want, got, "%s's kernels vs %s's entries: run make cuda-kernels", file, ptxFile) {
				continue
			}
			for _, n := range want {
				assert.NoError(t, checkSignature(ptxFile, entries[n], kernels[n]), "run make cuda-kernels")
			}
		}
		ptxs, err := filepath.Glob("gen/*.ptx")
		require.NoError(t, err)
		assert.Len(t, ptxs, len(sources), "gen/ holds PTX without a .cu source: run make cuda-kernels")
	})

	t.Run("host.cc table", func(t *testing.T) {
		// host.cc unpacks each kernel by its own signature; its table
		// only has to name every kernel once, and nothing else.
		names, err := parseHostTable("host.cc", readFile(t, "host.cc"))
		require.NoError(t, err)
		listed := map[string]bool{}
		for _, n := range names {
			listed[n] = true
			assert.Contains(t, kernels, n, "host.cc's table lists %s, which no .cu file or host.cc defines", n)
		}
		for n, k := range kernels {
			assert.True(t, listed[n], "kernel %s (%s) is missing from host.cc's table (HOST_KERNEL)", n, k.file)
		}
	})

	t.Run("device launches", func(t *testing.T) {
		paths, err := filepath.Glob("*.go")
		require.NoError(t, err)
		fset := token.NewFileSet()
		var files []*ast.File
		for _, path := range paths {
			f, err := parser.ParseFile(fset, path, nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
		ls, err := parseGoLaunches(fset, files)
		assert.NoError(t, err)
		launched := map[string]bool{}
		for _, l := range ls {
			for _, n := range l.kernels {
				k, ok := kernels[n]
				if !assert.True(t, ok, "%s launches %q, which no .cu file defines", l.pos, n) {
					continue
				}
				assert.NoError(t, checkSignature(l.pos, l.args, k))
				launched[n] = true
			}
		}
		for n, k := range kernels {
			if !slices.Contains(hostOnlyKernels, n) {
				assert.True(t, launched[n], "kernel %s (%s) is never launched by the device code: wire it into Device or drop it", n, k.file)
			}
		}
	})

	t.Run("structs", func(t *testing.T) {
		f, err := parser.ParseFile(token.NewFileSet(), "abi.go", nil, 0)
		require.NoError(t, err)
		goStructs, err := goStructFields(f)
		require.NoError(t, err)
		for _, p := range abiStructs {
			g, ok := goStructs[p[0]]
			require.True(t, ok, "abi.go has no struct %s", p[0])
			c, ok := cStructs[p[1]]
			require.True(t, ok, "no .cu file has struct %s", p[1])
			assert.NoError(t, checkStruct(p[0], g, p[1], c))
		}
	})
}

// TestKernelABIDetects shows that each comparison of TestKernelABI fails
// on the drift it is there to catch.
func TestKernelABIDetects(t *testing.T) {
	const kernelSrc = `// a kernel
KERNEL void __launch_bounds__(256) k(float* out, const void* w, int dt,
                                     long n, double theta) {}`
	ks, err := parseKernels("k.cu", kernelSrc)
	require.NoError(t, err)
	require.Len(t, ks, 1)
	k := ks[0]
	require.Equal(t, []cParam{{"out", abiPtr}, {"w", abiPtr}, {"dt", abiI32}, {"n", abiI64}, {"theta", abiF64}}, k.params)

	ptx := func(types ...string) string {
		s := ".visible .entry k(\n"
		for i, ty := range types {
			s += fmt.Sprintf("\t.param %s k_param_%d,\n", ty, i)
		}
		return s + ")\n{\n}\n"
	}
	goLaunch := func(chain string) string {
		return `package cuda
func (d *Device) op(n int) {
	d.run("op", func(s *session) {
		name := "k"
		s.launch(name, plan(n), ` + chain + `)
	})
}`
	}
	for _, tc := range []struct {
		name    string
		check   func() error
		wantErr string // "" when the input agrees with k
	}{
		{"ptx agrees", func() error {
			es, err := parsePTX("k.ptx", ptx(".u64", ".u64", ".u32", ".u64", ".f64"))
			if err != nil {
				return err
			}
			return checkSignature("k.ptx", es["k"], k)
		}, ""},
		{"ptx stale: int where the .cu now has long", func() error {
			es, err := parsePTX("k.ptx", ptx(".u64", ".u64", ".u32", ".u32", ".f64"))
			if err != nil {
				return err
			}
			return checkSignature("k.ptx", es["k"], k)
		}, "parameter 3 of k (n, a i64"},
		{"ptx stale: parameter dropped", func() error {
			es, err := parsePTX("k.ptx", ptx(".u64", ".u64", ".u32", ".u64"))
			if err != nil {
				return err
			}
			return checkSignature("k.ptx", es["k"], k)
		}, "passes 4 parameters to k, which takes 5"},
		{"ptx struct by value", func() error {
			_, err := parsePTX("k.ptx", ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[24]\n)\n")
			return err
		}, "is a byte array[24]"},
		{"host.cc table lists a kernel twice", func() error {
			_, err := parseHostTable("host.cc", "const Entry entries[] = {HOST_KERNEL(k), HOST_KERNEL(k)};")
			return err
		}, "HOST_KERNEL(k) listed twice"},
		{"go launch agrees", func() error {
			return checkGoSource(goLaunch("argsOf().ptr(po).ptr(pw).i32(dt).i64(n).f64(theta)"), k)
		}, ""},
		{"go launch packs i32 for long", func() error {
			return checkGoSource(goLaunch("argsOf().ptr(po).ptr(pw).i32(dt).i32(n).f64(theta)"), k)
		}, "parameter 3 of k (n, a i64"},
		{"go launch packs a pointer for double", func() error {
			return checkGoSource(goLaunch("argsOf().ptr(po).ptr(pw).i32(dt).i64(n).ptr(theta)"), k)
		}, "parameter 4 of k (theta, a f64"},
		{"go launch too short", func() error {
			return checkGoSource(goLaunch("argsOf().ptr(po).ptr(pw).i32(dt).i64(n)"), k)
		}, "passes 4 parameters to k, which takes 5"},
		{"go launch the check cannot read", func() error {
			return checkGoSource(goLaunch("someArgs(n)"), k)
		}, "not one local closure"},
		{"go launch through a forwarding helper agrees", func() error {
			return checkGoSource(`package cuda
func (s *session) elementwise(kernel string, n int, a *args) { s.launch(kernel, elementwisePlan(n), a) }
func (d *Device) op(n int) {
	d.run("op", func(s *session) { s.elementwise("k", n, argsOf().ptr(po).ptr(pw).i32(dt).i64(n).f64(theta)) })
}`, k)
		}, ""},
		{"go launch through a forwarding helper packs f32 for double", func() error {
			return checkGoSource(`package cuda
func (s *session) elementwise(kernel string, n int, a *args) { s.launch(kernel, elementwisePlan(n), a) }
func (d *Device) op(n int) {
	d.run("op", func(s *session) { s.elementwise("k", n, argsOf().ptr(po).ptr(pw).i32(dt).i64(n).f32(theta)) })
}`, k)
		}, "parameter 4 of k (theta, a f64"},
		{"go helper that builds its own arguments", func() error {
			return checkGoSource(`package cuda
func (s *session) elementwise(kernel string, n int) { s.launch(kernel, elementwisePlan(n), argsOf().i64(n)) }
func (d *Device) op(n int) { d.run("op", func(s *session) { s.elementwise("k", n) }) }`, k)
		}, "builds the argument list itself"},
		{"struct agrees", func() error {
			return checkStruct("g", []cParam{{"p", abiPtr}, {"n", abiI32}, {"f", abiF32}}, "C", []cParam{{"p", abiPtr}, {"n", abiI32}, {"f", abiF32}})
		}, ""},
		{"struct field moved by padding", func() error {
			return checkStruct("g", []cParam{{"n", abiI32}, {"p", abiPtr}}, "C", []cParam{{"n", abiI64}, {"p", abiPtr}})
		}, "field 0"},
		{"struct field added on one side", func() error {
			return checkStruct("g", []cParam{{"p", abiPtr}, {"n", abiI32}, {"m", abiI32}}, "C", []cParam{{"p", abiPtr}, {"n", abiI32}})
		}, "Go g has 3 fields, C C has 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check()
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// checkGoSource parses one Go file and checks its launches against k.
func checkGoSource(src string, k cSig) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		return err
	}
	ls, err := parseGoLaunches(fset, []*ast.File{f})
	if err != nil {
		return err
	}
	if len(ls) != 1 || !slices.Equal(ls[0].kernels, []string{k.name}) {
		return fmt.Errorf("found launches %v, want one of %s", ls, k.name)
	}
	return checkSignature(ls[0].pos, ls[0].args, k)
}

// TestSampleParamsLayout: the words kernels.PutSampleParams writes are the
// bytes of sample.cu's SampleParams (sampleParams, whose layout
// TestKernelABI checks against the C struct), TopK clamped to int32.
func TestSampleParamsLayout(t *testing.T) {
	for _, p := range []kernels.SamplingParams{{}, {Temperature: 0.7, TopK: 20, TopP: 0.95, MinP: 0.01}, {Temperature: 1, TopK: math.MaxInt32 + 1}} {
		w := make([]int32, kernels.SampleParamWords)
		kernels.PutSampleParams(w, p)
		want := sampleParams{temperature: p.Temperature, topK: int32(min(p.TopK, math.MaxInt32)), topP: p.TopP, minP: p.MinP}
		require.Equal(t, bytesOf([]sampleParams{want}), bytesOf(w), "%+v", p)
	}
}
