package model

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
)

// BenchmarkKVPeakRollouts measures (does not compute) the memory of the KV
// pool for GRPO's rollout shape at the Qwen3-0.6B shape (28 layers × 8 KV
// heads × 128): 8 prompts of P tokens prefilled once, each forked 8 times
// with copy on write, and all 64 rollouts filled to 2,048 positions. The
// K/V rows are random (no model runs: decoding 131k tokens takes hours on
// a CPU), but every position is a real write through the pool's block
// table with the backend's Copy (casting to bf16 for a bf16 pool), the
// same calls Forward makes; each fork re-feeds its prompt's last token
// (Truncate to P−1), as Generate does, so it copies the block holding it.
// The pool's memory is the growth ladder's size for the blocks in use (at
// most a quarter more). It reports the pool's bytes and blocks, the process's resident set
// before the case and its peak during it (VmRSS and VmHWM of
// /proc/self/status, the peak reset through /proc/self/clear_refs), in MiB.
// A case whose pool would not fit in 3/4 of MemAvailable is skipped. It
// runs only with KVPEAK=1 in the environment (a case takes up to 17 GiB,
// which `make bench`'s sweep of every benchmark must not take on a shared
// machine), one case per process so that the peak is that case's, e.g.
//
//	KVPEAK=1 nice -n 10 go test ./model -run XXX -bench 'KVPeakRollouts/bf16_P128$' -benchtime 1x
func BenchmarkKVPeakRollouts(b *testing.B) {
	cfg, err := NamedConfig("qwen3-0.6b")
	require.NoError(b, err)
	const prompts, forks, total, bs = 8, 8, 2048, 64
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		for _, p := range []int{128, 1024, 1536} {
			b.Run(fmt.Sprintf("%v_P%d", strings.ToLower(dt.String()), p), func(b *testing.B) {
				if os.Getenv("KVPEAK") != "1" {
					b.Skip("set KVPEAK=1 to run (up to 17 GiB; one case per process)")
				}
				if runtime.GOOS != "linux" {
					b.Skip("needs /proc/self/status")
				}
				debug.FreeOSMemory() // a previous case's pool, before reading MemAvailable
				blocks := prompts*((p+bs-1)/bs) + prompts*forks*(total/bs-(p-1)/bs)
				want := int64(blocks) * int64(2*cfg.NumLayers*bs*cfg.KVDim()*dt.Size())
				avail, err := procKiB("/proc/meminfo", "MemAvailable:")
				require.NoError(b, err)
				if want > avail*1024/4*3 {
					b.Skipf("pool of %d MiB does not fit in 3/4 of MemAvailable (%d MiB)", want>>20, avail>>10)
				}
				for b.Loop() {
					debug.FreeOSMemory()
					if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
						b.Skipf("cannot reset the peak RSS: %v", err)
					}
					base, err := procKiB("/proc/self/status", "VmRSS:")
					require.NoError(b, err)
					st := fillRollouts(b, cfg, KVOptions{BlockSize: bs, DType: dt}, prompts, forks, p, total)
					peak, err := procKiB("/proc/self/status", "VmHWM:")
					require.NoError(b, err)
					require.Equal(b, blocks, st.InUse, "blocks in use")
					require.Equal(b, int64(growLadder(blocks))*want/int64(blocks), st.Bytes, "pool bytes: the ladder's size for the blocks in use")
					b.ReportMetric(float64(st.Bytes)/(1<<20), "pool-MiB")
					b.ReportMetric(float64(st.Blocks), "blocks")
					b.ReportMetric(float64(base)/1024, "baseRSS-MiB")
					b.ReportMetric(float64(peak)/1024, "peakRSS-MiB")
				}
			})
		}
	}
}

// fillRollouts builds a pool of shape cfg, prefills prompts caches of p
// random positions, forks each forks times, fills every fork to total
// positions, and returns the pool's stats with every cache still held
// (then releases them and trims the pool).
func fillRollouts(b *testing.B, cfg Config, o KVOptions, prompts, forks, p, total int) KVStats {
	be := cpu.New(2)
	defer be.Close()
	pool := newKVPool(cfg, o)
	rl := cfg.KVDim()
	rng := rand.New(rand.NewPCG(uint64(p), uint64(o.DType)))
	chunk := make([]float32, 2*o.BlockSize*rl)
	for i := range chunk {
		chunk[i] = rng.Float32()*2 - 1
	}
	k, v := kernels.HostF32(chunk[:o.BlockSize*rl]), kernels.HostF32(chunk[o.BlockSize*rl:])
	fill := func(c *KVCache, n int) {
		for c.Len < n {
			run := min(o.BlockSize, n-c.Len)
			require.NoError(b, c.reserve(be, pool, c.Len+run))
			for l := range cfg.NumLayers {
				writeRows(be, pool, c, l, k, v, run)
			}
			c.Len += run
		}
	}
	var caches []*KVCache
	for range prompts {
		root := &KVCache{}
		fill(root, p)
		caches = append(caches, root)
		for range forks {
			f := root.fork()
			f.Truncate(p - 1) // the fork re-feeds the prompt's last token
			fill(&f, total)
			caches = append(caches, &f)
		}
	}
	st := pool.stats()
	for _, c := range caches {
		c.Release()
	}
	pool.trim(be)
	return st
}

// procKiB returns the value in kB of the line starting with key in a
// /proc file such as /proc/self/status or /proc/meminfo.
func procKiB(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s: %s: %w", path, key, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return 0, fmt.Errorf("reading %s: no %s line", path, key)
}
