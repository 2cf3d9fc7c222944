// Command trainbench measures training throughput of the Qwen3 model:
// forward+backward tokens per second (LoRA on every projection, or full
// fine-tuning) and peak memory, on a random-weight checkpoint of a named
// shape that it writes once into a cache folder.
//
//	go run ./model/cmd/trainbench -shape qwen3-0.6b -dtype bf16 -seqs 4 -len 1024
//	go run ./model/cmd/trainbench -shape tiny -seqs 4 -len 1024 -steps 5
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/kernels/ref"
	"github.com/x/model"
)

type flags struct {
	shape, dtype, dir, backend  string
	cpuprofile                  string
	seqs, length, steps, prompt int
	warmup                      int
	rank, threads, chunk        int
	full, checkpoint, forward   bool
	optimes                     bool
}

func main() {
	var f flags
	flag.StringVar(&f.shape, "shape", "tiny", "model shape: tiny, qwen3-0.6b, qwen3-1.7b")
	flag.StringVar(&f.dtype, "dtype", "f32", "weight storage type of the random checkpoint: f32, bf16")
	flag.StringVar(&f.dir, "dir", "", "checkpoint folder (default: a random one written under $TMPDIR once)")
	flag.StringVar(&f.backend, "backend", "cpu", "kernel backend: cpu or ref")
	flag.IntVar(&f.seqs, "seqs", 4, "sequences per step")
	flag.IntVar(&f.length, "len", 1024, "tokens per sequence")
	flag.IntVar(&f.prompt, "prompt", 1, "unscored prompt tokens per sequence (the rest are scored, as PyTorch's anchor scores all)")
	flag.IntVar(&f.steps, "steps", 3, "measured steps")
	flag.IntVar(&f.warmup, "warmup", 1, "unmeasured warm-up steps before them")
	flag.IntVar(&f.rank, "rank", 16, "LoRA rank on all seven projections (alpha = 2·rank)")
	flag.IntVar(&f.threads, "threads", 0, "kernel threads (0: all cores)")
	flag.IntVar(&f.chunk, "chunk", 0, "logits rows per chunk (0: default)")
	flag.BoolVar(&f.full, "full", false, "full fine-tuning instead of LoRA")
	flag.BoolVar(&f.checkpoint, "checkpoint", true, "activation checkpointing")
	flag.BoolVar(&f.forward, "forward", true, "also time the no-grad forward (LogProbs)")
	flag.BoolVar(&f.optimes, "optimes", false, "time each heavy op (adds a little overhead) and print the breakdown of the measured steps")
	flag.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured steps to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, f); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, f flags) error {
	cfg, err := model.NamedConfig(f.shape)
	if err != nil {
		return err
	}
	var dtype kernels.DType
	switch strings.ToLower(f.dtype) {
	case "f32", "float32":
		dtype = kernels.F32
	case "bf16", "bfloat16":
		dtype = kernels.BF16
	default:
		return fmt.Errorf("unknown -dtype %q (want f32 or bf16)", f.dtype)
	}
	if f.seqs <= 0 || f.length < 2 || f.steps <= 0 || f.prompt < 1 || f.prompt >= f.length {
		return errors.New("-seqs, -steps must be > 0, -len ≥ 2 and 1 ≤ -prompt < -len")
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("trainbench-%s-%s", f.shape, dtype))
		if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
			fmt.Printf("writing random %s %s checkpoint to %s\n", f.shape, dtype, dir)
			if err := model.WriteRandom(dir, cfg, dtype, 1, model.RandomOptions{}); err != nil {
				return err
			}
		}
	}
	var be kernels.Backend = ref.Backend{}
	if f.backend == "cpu" {
		c := cpu.New(f.threads)
		defer c.Close()
		be = c
		fmt.Printf("backend cpu, %d threads, %s\n", c.Threads(), c.SIMD())
	} else if f.backend != "ref" {
		return fmt.Errorf("unknown -backend %q (want cpu or ref)", f.backend)
	}
	var timed *timedBackend
	if f.optimes {
		timed = newTimedBackend(be)
		be = timed
	}
	m, err := model.Load(dir, be)
	if err != nil {
		return err
	}
	defer m.Close()
	if !f.full {
		if err := model.AttachLoRA(m, model.LoRAConfig{R: f.rank, Alpha: float64(2 * f.rank)}, 1); err != nil {
			return err
		}
	}
	tr, err := model.NewTrainable(m, model.TrainOptions{Full: f.full, KeepActivations: !f.checkpoint, LogitsChunk: f.chunk})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([]model.TrainSeq, f.seqs)
	tokens, scored := 0, 0
	for i := range seqs {
		ids := make([]int32, f.length)
		for j := range ids {
			ids[j] = int32(rng.IntN(cfg.VocabSize))
		}
		seqs[i] = model.TrainSeq{IDs: ids, Start: f.prompt}
		tokens += f.length
		scored += seqs[i].Scored()
	}
	w := model.SFTLoss(seqs)
	mode := fmt.Sprintf("LoRA r=%d all projections", f.rank)
	if f.full {
		mode = "full fine-tuning"
	}
	fmt.Printf("%s %s, %s, checkpoint=%v, %d × %d tokens (%d scored)\n", f.shape, dtype, mode, f.checkpoint, f.seqs, f.length, scored)

	for range f.warmup { // buffers, page-in
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			return err
		}
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if timed != nil {
		clear(timed.total)
		clear(timed.calls)
	}
	start := time.Now()
	for range f.steps {
		tr.ZeroGrad()
		if _, err := tr.Accumulate(ctx, seqs, w); err != nil {
			return err
		}
	}
	el := time.Since(start).Seconds() / float64(f.steps)
	fmt.Printf("forward+backward: %.3f s/step, %.1f tok/s\n", el, float64(tokens)/el)
	if timed != nil {
		timed.report(os.Stdout, f.steps)
	}
	if f.forward {
		start = time.Now()
		if _, _, err := tr.LogProbs(ctx, seqs, true); err != nil {
			return err
		}
		el := time.Since(start).Seconds()
		fmt.Printf("forward only (LogProbs): %.3f s, %.1f tok/s\n", el, float64(tokens)/el)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("peak RSS %s (includes touched weight pages), Go heap in use %s, heap obtained %s, activations+grads held %s\n",
		peakRSS(), mib(ms.HeapInuse), mib(ms.HeapSys), mib(uint64(tr.ActivationBytes())))
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// peakRSS is VmHWM from /proc/self/status, or "n/a" off Linux.
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "n/a"
}
