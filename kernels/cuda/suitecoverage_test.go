package cuda

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSuiteCoverage checks that both runs of the conformance suite in this
// package, the host build's (host_test.go, in make test) and the GPU
// check's (device_cuda_test.go, in the prepared binary of make gpu-check),
// call every family of kernels/kerneltest: a family added there and not
// wired here would leave an op unchecked on both the CPU and the GPU
// without any test failing. It reads the sources (no build tag needed),
// like TestKernelABI.
func TestSuiteCoverage(t *testing.T) {
	families := kerneltestFamilies(t, filepath.Join("..", "kerneltest"))
	require.NotEmpty(t, families, "no conformance families found in kernels/kerneltest")
	for _, file := range []string{"host_test.go", "device_cuda_test.go"} {
		used := kerneltestUses(t, file)
		var missing []string
		for _, f := range families {
			if !used[f] {
				missing = append(missing, f)
			}
		}
		assert.Empty(t, missing, "%s does not run these kerneltest families", file)
	}
}

// kerneltestFamilies returns the exported func F(*testing.T, kernels.Backend)
// of the kerneltest sources in dir: the conformance families.
func kerneltestFamilies(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []string
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || len(fn.Type.Params.List) != 2 {
				continue
			}
			p0, p1 := exprString(fn.Type.Params.List[0].Type), exprString(fn.Type.Params.List[1].Type)
			if p0 == "*testing.T" && p1 == "kernels.Backend" {
				out = append(out, fn.Name.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// kerneltestUses returns the kerneltest.X names file refers to.
func kerneltestUses(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "kerneltest" {
				used[sel.Sel.Name] = true
			}
		}
		return true
	})
	return used
}

// exprString renders a parameter type such as *testing.T.
func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return ""
}
