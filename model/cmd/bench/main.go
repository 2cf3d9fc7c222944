// Command bench measures Qwen3 prefill and decode speed on the CPU, in the
// spirit of llama-bench: each test is repeated -r times after one warm-up,
// and reports mean and standard deviation of tokens/s.
//
//	go run ./model/cmd/bench -model DIR -threads 2 -p 512 -n 64 -r 5 -json
//	go run ./model/cmd/bench -random qwen3-0.6b -dtype bf16 -p 512 -n 64 -b 1,8,64
//
// A prefill test (pN) feeds N random tokens to an empty cache and computes
// the logits of the last one. A decode test (tgN at batch B) runs N steps
// of B sequences, each feeding one token and sampling the next greedily
// (after an untimed prefill of -d tokens per sequence), so its tokens/s is
// B·N divided by the time; -temp T samples at temperature T instead (no
// top-k, top-p or min-p: what a GRPO rollout draws from), and the test is
// named tgN@T. A log-prob test (lpN at batch B) scores B
// sequences of N tokens by teacher forcing (every token, with entropies),
// as a GRPO step does for the old and reference policies. A rollout test
// (-rollouts R) is a GRPO generation round: -groups prompts of -rp random
// tokens are prefilled once, each is forked R/groups times (the forks
// share the prompt's KV blocks), and all R generate -rn tokens together
// (temperature 1, no stop); it reports tokens/s, peak RSS and the KV
// pool's bytes (-kv f32 or bf16 selects the KV storage). -random writes a
// random-weight checkpoint of a named shape to a temporary folder (removed
// at exit unless -keep).
//
//	go run ./model/cmd/bench -random qwen3-0.6b -p 0 -n 0 -rollouts 64 -groups 8 -rp 128 -rn 384 -kv bf16 -r 1
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/x/kernels"
	"github.com/x/kernels/cpu"
	"github.com/x/model"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	modelDir string
	random   string
	dtype    kernels.DType
	keep     bool
	threads  []int
	prompts  []int
	gens     []int
	scores   []int
	batches  []int
	depth    int
	temp     float64
	reps     int
	json     bool
	seed     uint64
	rollouts int
	groups   int
	rp, rn   int
	kv       string
	// precision is the Backend's matmul precision (-matmul).
	precision kernels.MatMulPrecision
}

// Result is one test's figures (one JSON object per line with -json).
type Result struct {
	Model      string    `json:"model"`
	Shape      string    `json:"shape,omitempty"`
	Params     int64     `json:"n_params"`
	DType      string    `json:"dtype"`
	Threads    int       `json:"threads"`
	SIMD       string    `json:"simd"`
	MatMul     string    `json:"matmul"`    // the matmul precision: exact or bf16
	BF16Dot    bool      `json:"vdpbf16ps"` // bf16 precision ran on VDPBF16PS (not the exact kernels on rounded x)
	Test       string    `json:"test"`
	NPrompt    int       `json:"n_prompt"`
	NGen       int       `json:"n_gen"`
	NDepth     int       `json:"n_depth"`
	Temp       float64   `json:"temperature,omitempty"` // decode tests: 0 = greedy
	Batch      int       `json:"batch"`
	Reps       int       `json:"reps"`
	AvgTS      float64   `json:"avg_ts"`
	StddevTS   float64   `json:"stddev_ts"`
	SamplesTS  []float64 `json:"samples_ts"`
	AvgNS      float64   `json:"avg_ns"`
	PeakRSSMiB float64   `json:"peak_rss_mib"`
	KVMiB      float64   `json:"kv_pool_mib,omitempty"` // rollout tests: the KV pool's blocks after the run
	GoSysMiB   float64   `json:"go_sys_mib"`
	GoHeapMiB  float64   `json:"go_heap_inuse_mib"`
	Time       string    `json:"test_time"`
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad number %q in %q", f, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var threads, prompts, gens, scores, batches, dtype, precision string
	fs.StringVar(&o.modelDir, "model", "", "Hugging Face Qwen3 folder (config.json + model.safetensors)")
	fs.StringVar(&o.random, "random", "", "write random weights of a named shape instead: qwen3-0.6b, qwen3-1.7b, tiny")
	fs.StringVar(&dtype, "dtype", "bf16", "dtype of -random weights: bf16, f16, f32")
	fs.BoolVar(&o.keep, "keep", false, "keep the -random checkpoint folder (its path is printed)")
	fs.StringVar(&threads, "threads", strconv.Itoa(runtime.NumCPU()), "threads, comma-separated list")
	fs.StringVar(&prompts, "p", "512", "prefill tests: prompt lengths, comma-separated (0 = none)")
	fs.StringVar(&gens, "n", "64", "decode tests: generated tokens, comma-separated (0 = none)")
	fs.StringVar(&scores, "lp", "", "log-prob tests: tokens per sequence scored by teacher forcing, comma-separated (batch sizes from -b)")
	fs.StringVar(&batches, "b", "1", "decode and log-prob tests: batch sizes, comma-separated")
	fs.IntVar(&o.depth, "d", 0, "decode tests: prompt tokens per sequence before decoding (untimed)")
	fs.Float64Var(&o.temp, "temp", 0, "decode tests: sampling temperature (0 = greedy; no top-k/top-p/min-p)")
	fs.IntVar(&o.reps, "r", 5, "repetitions of each test")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per test")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for random weights and tokens")
	fs.IntVar(&o.rollouts, "rollouts", 0, "rollout test: sequences generated together (0 = none)")
	fs.IntVar(&o.groups, "groups", 8, "rollout test: prompts, each shared by rollouts/groups sequences")
	fs.IntVar(&o.rp, "rp", 128, "rollout test: prompt tokens")
	fs.IntVar(&o.rn, "rn", 128, "rollout test: generated tokens per sequence")
	fs.StringVar(&o.kv, "kv", "f32", "KV cache storage: f32 or bf16")
	fs.StringVar(&precision, "matmul", "exact", "matmul precision for bf16 weights: exact, or bf16 (activations rounded to bf16, as llama.cpp does; see kernels.MatMulBF16)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	for _, l := range []struct {
		dst *[]int
		s   string
	}{{&o.threads, threads}, {&o.prompts, prompts}, {&o.gens, gens}, {&o.scores, scores}, {&o.batches, batches}} {
		if *l.dst, err = intList(l.s); err != nil {
			return o, err
		}
	}
	if o.precision, err = kernels.ParseMatMulPrecision(precision); err != nil {
		return o, fmt.Errorf("-matmul: %w", err)
	}
	switch strings.ToLower(dtype) {
	case "bf16":
		o.dtype = kernels.BF16
	case "f16":
		o.dtype = kernels.F16
	case "f32":
		o.dtype = kernels.F32
	default:
		return o, fmt.Errorf("-dtype %q: want bf16, f16 or f32", dtype)
	}
	switch {
	case (o.modelDir == "") == (o.random == ""):
		return o, errors.New("give exactly one of -model DIR or -random SHAPE")
	case o.reps < 1:
		return o, fmt.Errorf("-r %d: need at least 1", o.reps)
	case !(o.temp >= 0) || math.IsInf(o.temp, 1):
		return o, fmt.Errorf("-temp %g: want a finite temperature ≥ 0", o.temp)
	case len(o.threads) == 0 || len(o.batches) == 0:
		return o, errors.New("-threads and -b need at least one value")
	}
	for _, b := range o.batches {
		if b < 1 {
			return o, fmt.Errorf("-b %d: batch sizes must be ≥ 1", b)
		}
	}
	if o.rollouts > 0 && (o.groups < 1 || o.rollouts%o.groups != 0 || o.rp < 1 || o.rn < 1) {
		return o, fmt.Errorf("-rollouts %d -groups %d -rp %d -rn %d: need groups ≥ 1 dividing rollouts, rp and rn ≥ 1", o.rollouts, o.groups, o.rp, o.rn)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, name, shape := o.modelDir, filepath.Base(o.modelDir), ""
	if o.random != "" {
		cfg, err := model.NamedConfig(o.random)
		if err != nil {
			return err
		}
		dir, err = os.MkdirTemp("", "qwen3-bench-*")
		if err != nil {
			return err
		}
		if o.keep {
			fmt.Fprintln(stderr, "bench: random checkpoint in", dir)
		} else {
			defer os.RemoveAll(dir)
		}
		start := time.Now()
		if err := model.WriteRandom(dir, cfg, o.dtype, o.seed, model.RandomOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: wrote random %s %s in %.1fs\n", o.random, o.dtype, time.Since(start).Seconds())
		name, shape = "random-"+o.random, o.random
	}
	if !o.json {
		fmt.Fprintln(stdout, "| model | dtype | threads | test | batch | t/s | ms/step |")
		fmt.Fprintln(stdout, "| --- | --- | ---: | --- | ---: | ---: | ---: |")
	}
	for _, th := range o.threads {
		if err := runThreads(ctx, o, dir, name, shape, th, stdout); err != nil {
			return err
		}
	}
	return nil
}

func runThreads(ctx context.Context, o options, dir, name, shape string, threads int, stdout io.Writer) error {
	be := cpu.New(threads)
	defer be.Close()
	if err := be.SetMatMulPrecision(o.precision); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	m, err := model.Load(dir, be)
	if err != nil {
		return err
	}
	defer m.Close()
	kvBytes, err := setKV(m, o.kv)
	if err != nil {
		return err
	}
	base := Result{Model: name, Shape: shape, Params: params(m.Config), DType: m.DType.String(), Threads: be.Threads(), SIMD: be.SIMD(), MatMul: o.precision.String(), BF16Dot: o.precision == kernels.MatMulBF16 && be.BF16Dot(), Reps: o.reps}
	rng := rand.New(rand.NewPCG(o.seed, 99))
	V := m.Config.VocabSize
	emit := func(r Result, samples []float64, ns float64) error {
		r.SamplesTS = samples
		r.AvgTS, r.StddevTS = meanStd(samples)
		r.AvgNS = ns
		r.PeakRSSMiB, r.GoSysMiB, r.GoHeapMiB = memory()
		r.Time = time.Now().UTC().Format(time.RFC3339)
		if o.json {
			return json.NewEncoder(stdout).Encode(r)
		}
		_, err := fmt.Fprintf(stdout, "| %s | %s | %d | %s | %d | %.2f ± %.2f | %.2f |\n", r.Model, r.DType, r.Threads, r.Test, r.Batch, r.AvgTS, r.StddevTS, ns/1e6)
		return err
	}
	for _, p := range o.prompts {
		if p == 0 {
			continue
		}
		toks := make([]int32, p)
		r := m.NewRunner()
		var cache model.KVCache
		var samples []float64
		var total time.Duration
		for rep := -1; rep < o.reps; rep++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			for i := range toks {
				toks[i] = int32(rng.IntN(V))
			}
			cache.Reset()
			start := time.Now()
			h := r.Forward([]*model.KVCache{&cache}, [][]int32{toks})
			C := m.Config.HiddenSize
			r.Logits(h[(p-1)*C:], 1)
			d := time.Since(start)
			if rep >= 0 { // rep −1 is the warm-up
				samples = append(samples, float64(p)/d.Seconds())
				total += d
			}
		}
		res := base
		res.Test, res.NPrompt, res.Batch = fmt.Sprintf("pp%d", p), p, 1
		if err := emit(res, samples, float64(total.Nanoseconds())/float64(o.reps)); err != nil {
			return err
		}
	}
	for _, n := range o.gens {
		if n == 0 {
			continue
		}
		for _, b := range o.batches {
			var samples []float64
			var total time.Duration
			for rep := -1; rep < o.reps; rep++ {
				d, err := decode(ctx, m, rng, b, max(o.depth, 1), n, float32(o.temp))
				if err != nil {
					return err
				}
				if rep >= 0 {
					samples = append(samples, float64(b*n)/d.Seconds())
					total += d
				}
			}
			res := base
			res.Test, res.NGen, res.NDepth, res.Batch, res.Temp = fmt.Sprintf("tg%d", n), n, o.depth, b, o.temp
			if o.temp != 0 {
				res.Test += fmt.Sprintf("@T%g", o.temp)
			}
			if err := emit(res, samples, float64(total.Nanoseconds())/float64(o.reps*n)); err != nil {
				return err
			}
		}
	}
	if o.rollouts > 0 {
		var samples []float64
		var total time.Duration
		for rep := 0; rep < o.reps; rep++ { // no warm-up: the peak RSS is the point
			d, err := rollouts(ctx, m, rng, o)
			if err != nil {
				return err
			}
			samples = append(samples, float64(o.rollouts*o.rn)/d.Seconds())
			total += d
		}
		res := base
		res.Test, res.NPrompt, res.NGen, res.Batch = fmt.Sprintf("rollouts%d/%d:%s", o.rollouts, o.groups, o.kv), o.rp, o.rn, o.rollouts
		res.KVMiB = float64(kvBytes()) / (1 << 20)
		if err := emit(res, samples, float64(total.Nanoseconds())/float64(o.reps*o.rn)); err != nil {
			return err
		}
	}
	for _, n := range o.scores {
		if n < 2 {
			continue
		}
		for _, b := range o.batches {
			seqs := make([]model.Scored, b)
			var samples []float64
			var total time.Duration
			for rep := -1; rep < o.reps; rep++ {
				for i := range seqs {
					toks := make([]int32, n)
					for j := range toks {
						toks[j] = int32(rng.IntN(V))
					}
					seqs[i] = model.Scored{Tokens: toks}
				}
				start := time.Now()
				if _, err := m.LogProbs(ctx, seqs, model.LogProbsOptions{Entropy: true}); err != nil {
					return err
				}
				d := time.Since(start)
				if rep >= 0 {
					samples = append(samples, float64(b*n)/d.Seconds())
					total += d
				}
			}
			res := base
			res.Test, res.NPrompt, res.Batch = fmt.Sprintf("lp%d", n), n, b
			if err := emit(res, samples, float64(total.Nanoseconds())/float64(o.reps)); err != nil {
				return err
			}
		}
	}
	return nil
}

// decode prefills b sequences of depth random tokens (untimed) and times
// n batched decode steps, greedy at temperature 0, else sampled.
func decode(ctx context.Context, m *model.Model, rng *rand.Rand, b, depth, n int, temp float32) (time.Duration, error) {
	batch := m.NewBatch(model.BatchOptions{MaxBatch: b, PrefillTokens: b * depth})
	for i := range b {
		prompt := make([]int32, depth)
		for j := range prompt {
			prompt[j] = int32(rng.IntN(m.Config.VocabSize))
		}
		req := model.Request{Seq: model.NewSequence(uint64(i), prompt...), MaxNewTokens: n + 1, Sampling: kernels.SamplingParams{Temperature: temp}}
		if _, err := batch.Add(req); err != nil {
			return 0, err
		}
	}
	if _, err := batch.Step(ctx); err != nil { // prefill + first token
		return 0, err
	}
	start := time.Now()
	for range n {
		if _, err := batch.Step(ctx); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	if batch.Len() != 0 {
		return 0, fmt.Errorf("decode: %d sequences left after %d steps", batch.Len(), n)
	}
	return d, nil
}

// rollouts prefills o.groups random prompts, forks each o.rollouts/o.groups
// times and times generating o.rn tokens on every fork at once.
func rollouts(ctx context.Context, m *model.Model, rng *rand.Rand, o options) (time.Duration, error) {
	roots := make([]*model.Sequence, o.groups)
	for g := range roots {
		prompt := make([]int32, o.rp)
		for j := range prompt {
			prompt[j] = int32(rng.IntN(m.Config.VocabSize))
		}
		roots[g] = model.NewSequence(uint64(g), prompt...)
	}
	start := time.Now()
	if err := m.Prefill(ctx, roots, model.BatchOptions{}); err != nil {
		return 0, err
	}
	var reqs []model.Request
	for g, root := range roots {
		for i := range o.rollouts / o.groups {
			reqs = append(reqs, model.Request{Seq: root.Fork(uint64(g*1000 + i)), MaxNewTokens: o.rn,
				Sampling: kernels.SamplingParams{Temperature: 1}})
		}
	}
	out, err := m.Generate(ctx, reqs, model.BatchOptions{MaxBatch: o.rollouts})
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	for i, c := range out {
		if len(c.Tokens) != o.rn {
			return 0, fmt.Errorf("rollout %d: %d tokens, want %d", i, len(c.Tokens), o.rn)
		}
	}
	releaseAll(roots, reqs)
	return d, nil
}

func params(c model.Config) int64 {
	C, F, L := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.NumLayers)
	per := C*int64(c.QDim())*2 + C*int64(c.KVDim())*2 + 3*C*F + 2*C + 2*int64(c.HeadDim)
	n := L*per + int64(c.VocabSize)*C + C
	if !c.TieWordEmbeddings {
		n += int64(c.VocabSize) * C
	}
	return n
}

func meanStd(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1))
}
