package cuda

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGPUTest stands in for bin/gpu-check/cuda.test: like the cuda build's
// TestSeam* of seam_test.go, it needs the package's sources in its working
// directory (they read host.cc and the .cu files), then passes.
const fakeGPUTest = `#!/bin/sh
if [ ! -f host.cc ]; then
	echo "--- FAIL: TestSeamLazy (0.00s)"
	echo "    seam_test.go:39: open host.cc: no such file or directory"
	exit 1
fi
case "$*" in
*-test.bench*) echo "BenchmarkFake-16    	       1	       100 ns/op	         5.0 tok/s" ;;
*) echo "--- PASS: TestFake (0.00s)" ;;
esac
echo PASS
`

// TestGPUCheckRun runs scripts/gpu-check.sh run, as the GPU machine does
// (from the repository root), over a fake test binary: every stage must
// run in kernels/cuda, where go test runs the package's tests (the cuda
// build's TestSeam* read the sources there), and the run must leave at
// most 8 files under $OUT, the most the device tool brings back: the
// table and one tarball of the logs. Needs bash, tar and timeout.
func TestGPUCheckRun(t *testing.T) {
	for _, tool := range []string{"bash", "tar", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpu-check")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "cuda.test"), []byte(fakeGPUTest), 0o755))
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", filepath.Join("scripts", "gpu-check.sh"), "run", bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUT="+out)
	log, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", log)

	var files []string
	require.NoError(t, filepath.WalkDir(out, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(out, p)
			files = append(files, rel)
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"table.md", "logs.tar.gz"}, files)
	assert.LessOrEqual(t, len(files), 8, "the device tool returns at most 8 files")

	table, err := os.ReadFile(filepath.Join(out, "table.md"))
	require.NoError(t, err)
	stages := []string{"info", "kernels", "model", "gemm", "decode", "prefill", "grpo"}
	for _, s := range stages {
		assert.Contains(t, string(table), "| "+s+" | PASS |", "stage %s", s)
	}

	f, err := os.Open(filepath.Join(out, "logs.tar.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	logs := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		logs[strings.TrimPrefix(h.Name, "./")] = string(b)
	}
	assert.Contains(t, logs, "env.txt")
	for _, s := range stages {
		assert.Contains(t, logs[s+".log"], "PASS", "stage %s's log", s)
	}
}

// TestGPUCheckStages runs scripts/gpu-check.sh check: every stage's
// pattern selects a Test or Benchmark that the cuda build of this package
// compiles. Needs bash and go.
func TestGPUCheckStages(t *testing.T) {
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	cmd := exec.Command("bash", filepath.Join("scripts", "gpu-check.sh"), "check")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, s := range []string{"info", "kernels", "model", "gemm", "decode", "prefill", "grpo"} {
		assert.Contains(t, string(out), "gpu-check: stage "+s+" runs ")
	}
	assert.Contains(t, string(out), "stage model runs 6 functions", "TestModelLogitsGPUvsCPU and the five TestModelE2E*GPU")
}
