package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetupCUDAVersion runs scripts/setup-cuda.sh against a fake system
// (an os-release file, an apt-get that records its calls and "installs" a
// fake nvcc of a chosen release) and checks that it succeeds only when
// what it leaves on PATH is the nvcc 11.8 the committed kernels are built
// with: on a Debian release other than bookworm (whose
// nvidia-cuda-toolkit is not 11.8) it must refuse before apt-get runs,
// and an install that yields another release must fail, not report
// success (a second run would then fail: not idempotent). Needs bash.
func TestSetupCUDAVersion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "setup-cuda.sh"))
	require.NoError(t, err)
	for _, c := range []struct {
		name, codename, release string
		ok, aptRuns             bool
	}{
		{"bookworm installs 11.8", "bookworm", "11.8", true, true},
		{"bookworm installs another release", "bookworm", "12.4", false, true},
		{"trixie refused before apt", "trixie", "12.4", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			require.NoError(t, os.Mkdir(bin, 0o755))
			osRelease := filepath.Join(dir, "os-release")
			require.NoError(t, os.WriteFile(osRelease, []byte("ID=debian\nVERSION_CODENAME="+c.codename+"\nPRETTY_NAME=\"Debian ("+c.codename+")\"\n"), 0o644))
			nvcc := filepath.Join(bin, "nvcc")
			aptLog := filepath.Join(dir, "apt.log")
			fakeApt := "#!/bin/sh\necho \"$*\" >>" + aptLog + "\ncase \"$*\" in *install*)\n" +
				"printf '#!/bin/sh\\necho \"Cuda compilation tools, release " + c.release + "\"\\necho \"Build cuda_" + c.release + ".r" + c.release + "/compiler.0\"\\n' >" + nvcc +
				"\nchmod +x " + nvcc + ";;\nesac\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "apt-get"), []byte(fakeApt), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(bin, "sudo"), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755))
			run := func() ([]byte, error) {
				cmd := exec.Command("bash", script)
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "NVCC="+nvcc,
					"SETUP_CUDA_OS_RELEASE="+osRelease, "SETUP_CUDA_APTDIR="+filepath.Join(dir, "apt"))
				return cmd.CombinedOutput()
			}
			out, err := run()
			if c.ok {
				require.NoError(t, err, "%s", out)
				again, err := run()
				assert.NoError(t, err, "second run (idempotent): %s", again)
			} else {
				assert.Error(t, err, "the script succeeded: %s", out)
			}
			_, statErr := os.Stat(aptLog)
			assert.Equal(t, c.aptRuns, statErr == nil, "apt-get ran: %v\n%s", statErr == nil, out)
		})
	}
}
