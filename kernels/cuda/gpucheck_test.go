package cuda

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
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

// fakeGPUTest stands in for bin/gpu-check/cuda.test and grpo.test: like
// the cuda build's TestSeam* of seam_test.go, it needs its package's
// sources in its working directory (the file named by its first line's
// variable: host.cc for kernels/cuda, trainer.go for grpo), then passes.
const fakeGPUTest = `#!/bin/sh
if [ ! -f %s ]; then
	echo "--- FAIL: TestSeamLazy (0.00s)"
	echo "    seam_test.go:39: open %s: no such file or directory"
	exit 1
fi
case "$*" in
*-test.bench*) echo "BenchmarkFake-16    	       1	       100 ns/op	         5.0 tok/s" ;;
*) echo "--- PASS: TestFake (0.00s)" ;;
esac
echo PASS
`

// goStages are gpu-check's stages that run Go test binaries.
var goStages = []string{"info", "kernels", "model", "train", "gemm", "decode", "prefill", "grpo"}

// TestGPUCheckRun runs scripts/gpu-check.sh run, as the GPU machine does
// (from the repository root), over fake test binaries and its Go stages
// (the script stages need python3 with torch, and ncu): every stage must
// run in its package's folder, where go test runs the package's tests (the
// cuda build's TestSeam* read the sources there), and the run must leave
// at most 8 files under $OUT, the most the device tool brings back: the
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
	for name, source := range map[string]string{"cuda.test": "host.cc", "grpo.test": "trainer.go", "hfcheck": "README.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(fmt.Sprintf(fakeGPUTest, source, source)), 0o755))
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", filepath.Join("scripts", "gpu-check.sh"), "run", bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUT="+out, "GPU_CHECK_STAGES="+strings.Join(goStages, " "))
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
	assert.ElementsMatch(t, []string{"table.md", "gpu-check.tar.gz"}, files)
	assert.LessOrEqual(t, len(files), 8, "the device tool returns at most 8 files")

	table, err := os.ReadFile(filepath.Join(out, "table.md"))
	require.NoError(t, err)
	for _, s := range goStages {
		assert.Contains(t, string(table), "| "+s+" | PASS |", "stage %s", s)
	}

	f, err := os.Open(filepath.Join(out, "gpu-check.tar.gz"))
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
	assert.Contains(t, logs, "table.md")
	for _, s := range goStages {
		assert.Contains(t, logs[s+".log"], "PASS", "stage %s's log", s)
	}
}

// TestGPUCheckStages runs scripts/gpu-check.sh check: every Go stage's
// patterns select a Test or Benchmark that the cuda build of its package
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
	for _, s := range goStages {
		assert.Contains(t, string(out), "gpu-check: stage "+s+" (")
	}
	assert.Contains(t, string(out), "stage model (./kernels/cuda) -test.run selects 6 functions",
		"TestModelLogitsGPUvsCPU and five TestModelE2E*GPU (logits, transfers, syncs, graphs, forward invariance)")
}
