#!/usr/bin/env bash
# gpu-check.sh: the prepared GPU check of the CUDA backend (kernels/cuda).
#
#   scripts/gpu-check.sh build [DIR]   here (needs Go, cuda.h: scripts/setup-cuda.sh):
#                                      builds DIR/cuda.test (default bin/gpu-check), the
#                                      `go test -c -tags cuda` binary holding the GPU tests
#                                      and benchmarks, and copies this script next to it.
#   scripts/gpu-check.sh run [DIR]     on the GPU machine (needs only libcuda.so.1 and
#                                      coreutils; no Go, no network): runs the stages below,
#                                      each under its own timeout, logs each to $OUT/<stage>.log
#                                      ($OUT defaults to ./gpu-check-out) and prints one table
#                                      last (also written to $OUT/table.md).
#
# Stages (GPU_CHECK_STAGES selects a subset, e.g. "info kernels"; seconds are
# each stage's time limit, override with e.g. GPU_CHECK_TIMEOUT_grpo=300):
#   info     20  device, modules loaded (cubin or PTX), registers/local memory per kernel
#   kernels 100  the conformance suite (every kerneltest family on the Device vs
#                kernels/ref at the suite's awkward shapes, the one tolerance table,
#                integer outputs exact), the SIMT probes (mma.sync fragment layout,
#                barrier/shared/shuffle/ballot) on hardware, a pinned-memory round trip,
#                and the runtime layer (TestSeam*: device-side index errors, staging,
#                DownloadAll, graph capture/replay, two streams with an event)
#   model    75  logits of random tiny and Qwen3-0.6B-shaped models, GPU vs kernels/cpu;
#                the model end to end on a tiny random bf16 checkpoint, GPU vs kernels/cpu
#                (logits, continuous batched generation through the paged KV cache with
#                forked prefixes, LogProbs, three LoRA training steps), and its crossings
#                through kerneltest.Counting (a decode step downloads no logits; no op gets
#                foreign host memory)
#   gemm     30  bf16 tensor-core GEMM TFLOP/s (and % of the 989 TFLOP/s dense peak)
#   decode   50  decode tok/s at batch 1, 64, 256 vs the HBM bandwidth ceiling
#                and one decode step's wall and host µs, launches and waits (BenchmarkDecodeStep)
#   prefill  25  prefill tok/s (8 × 512 tokens)
#   grpo    rest one GRPO-shaped step: 64 rollouts × 512 tokens of the Qwen3-0.6B shape
#                (generation, scoring, backward into LoRA r16, AdamW): whatever the
#                budget has left (at least 170 s when every earlier stage uses its limit)
# GPU_CHECK_BUDGET (default 470 s, under 8 minutes) caps the whole run: a stage
# gets at most what is left of it (minus 5 s for the table), and stages that
# would get under 10 s are skipped and marked so, so the table always prints
# inside the device tool's 600 s per command, with time left in a 15-minute
# device lease to rerun one stage (GPU_CHECK_STAGES=kernels) on the warm machine.
#
# `build` also checks that every stage's -test.run / -test.bench pattern selects
# at least one Test or Benchmark in kernels/cuda's sources (the binary itself
# cannot list them here: without a GPU it exits in cu's package init), and that
# the binary fits the device tool's 64 MiB carry limit.
#
# From a session with the device tool:
#   make gpu-check                     # here
#   run(command="scripts/gpu-check.sh run", carry=["bin/gpu-check"], timeout_s=600)
# Its table goes into BENCHMARKS.md ("CUDA backend on an H200"); the logs come
# back under $OUT (<stage>.log, env.txt, table.md).
set -uo pipefail

mode=${1:-}
dir=${2:-bin/gpu-check}
all_stages="info kernels model gemm decode prefill grpo"

declare -A args timeouts
args[info]="-test.run ^TestDeviceInfo$ -test.v"
args[kernels]="-test.run ^(TestGPU|TestPinnedRoundTrip|TestSeam) -test.v"
args[model]="-test.run ^(TestModelLogitsGPUvsCPU|TestModelE2E) -test.v"
args[gemm]="-test.run ^$ -test.bench ^BenchmarkGEMM$ -test.benchtime 20x"
args[decode]="-test.run ^$ -test.bench ^BenchmarkDecode(Step)?$ -test.benchtime 2x"
args[prefill]="-test.run ^$ -test.bench ^BenchmarkPrefill$ -test.benchtime 2x"
args[grpo]="-test.run ^$ -test.bench ^BenchmarkGRPOStep$ -test.benchtime 1x"
timeouts=([info]=20 [kernels]=100 [model]=75 [gemm]=30 [decode]=50 [prefill]=25 [grpo]=600)


case "$mode" in
build)
	set -e
	mkdir -p "$dir"
	# Every stage must select something: match its patterns against the
	# Test/Benchmark functions of kernels/cuda's test sources.
	names=$(sed -n 's/^func \(\(Test\|Benchmark\)[A-Za-z0-9_]*\)(.*/\1/p' kernels/cuda/*_test.go)
	for s in $all_stages; do
		# shellcheck disable=SC2086 # args are word lists
		set -- ${args[$s]}
		run="" bench=""
		while [ $# -gt 0 ]; do
			case $1 in
			-test.run) run=$2 ;;
			-test.bench) bench=$2 ;;
			esac
			shift
		done
		pat=$bench
		[ -z "$pat" ] && pat=$run
		if ! grep -qE "$pat" <<<"$names"; then
			echo "gpu-check: stage $s selects no test or benchmark in kernels/cuda (pattern $pat)" >&2
			exit 1
		fi
		echo "gpu-check: stage $s runs $(grep -cE "$pat" <<<"$names") functions ($pat)"
	done
	go vet -tags cuda ./kernels/cuda/
	go test -c -tags cuda -o "$dir/cuda.test" ./kernels/cuda/
	size=$(stat -c %s "$dir/cuda.test")
	if [ "$size" -gt $((60 << 20)) ]; then
		echo "gpu-check: $dir/cuda.test is $((size >> 20)) MiB; the device tool carries at most 64 MiB" >&2
		exit 1
	fi
	cp "$0" "$dir/gpu-check.sh"
	git rev-parse HEAD >"$dir/commit" 2>/dev/null || true
	echo "built $dir/cuda.test ($(du -h "$dir/cuda.test" | cut -f1)); on the GPU machine: scripts/gpu-check.sh run $dir"
	exit 0
	;;
run) ;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac

bin="$dir/cuda.test"
if [ ! -x "$bin" ]; then
	echo "gpu-check: $bin missing: run 'make gpu-check' on the build machine and carry $dir" >&2
	exit 2
fi
out=${OUT:-./gpu-check-out}
mkdir -p "$out"
stages=${GPU_CHECK_STAGES:-$all_stages}

{
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(cat "$dir/commit" 2>/dev/null || echo unknown)"
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
	uname -a
} >"$out/env.txt" 2>&1

rows=()
failed=0
budget=${GPU_CHECK_BUDGET:-470}
begin=$(date +%s)
for s in $stages; do
	if [ -z "${args[$s]:-}" ]; then
		rows+=("| $s | unknown stage | | |")
		failed=$((failed + 1))
		continue
	fi
	var="GPU_CHECK_TIMEOUT_$s"
	lim=${!var:-${timeouts[$s]}}
	left=$((budget - ($(date +%s) - begin) - 5))
	if [ "$left" -lt 10 ]; then
		rows+=("| $s | SKIPPED (budget ${budget}s spent) | | |")
		continue
	fi
	if [ "$lim" -gt "$left" ]; then
		lim=$left
	fi
	log="$out/$s.log"
	echo "== $s (timeout ${lim}s): $bin ${args[$s]}" | tee "$log"
	t0=$(date +%s)
	# shellcheck disable=SC2086 # args are word lists
	timeout --kill-after=10 "$lim" "$bin" ${args[$s]} -test.count 1 >>"$log" 2>&1
	rc=$?
	t1=$(date +%s)
	case $rc in
	0) status=PASS ;;
	124 | 137) status="TIMEOUT (${lim}s)" ;;
	*) status="FAIL (rc $rc)" ;;
	esac
	[ "$rc" -ne 0 ] && failed=$((failed + 1))
	pass=$(grep -c -- '--- PASS' "$log")
	fail=$(grep -c -- '--- FAIL' "$log")
	figures=""
	if grep -q '^Benchmark' "$log"; then
		# name, then every "value unit" pair except ns/op
		figures=$(grep '^Benchmark' "$log" | awk '{
			name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name); line=name ":";
			for (i = 3; i < NF; i += 2) if ($(i+1) != "ns/op") line = line " " $i " " $(i+1);
			printf "%s<br>", line }')
	elif [ "$s" = info ]; then
		figures=$(grep -m1 'sm_' "$log" | sed 's/^ *//; s/|/\//g')
	else
		figures="$pass passed, $fail failed"
		if [ "$fail" -gt 0 ]; then
			figures="$figures: $(grep -- '--- FAIL' "$log" | awk '{print $3}' | head -8 | tr '\n' ' ')"
		fi
	fi
	if [ "$s" = model ]; then
		figures="$figures $(grep -o '[a-z0-9.-]*: [0-9]*×[0-9]* logits, max abs diff GPU vs CPU [0-9.e+-]*' "$log" | tr '\n' ';')"
		figures="$figures $(grep -o 'Model[A-Za-z]*: max abs difference vs kernels/cpu [0-9.e+-]*' "$log" | sed 's/ max abs difference vs kernels.cpu//' | tr '\n' ';')"
	fi
	if [ "$rc" -ne 0 ] && [ "$pass$fail" = "00" ]; then
		figures="$figures last line: $(tail -n 1 "$log" | cut -c1-160 | sed 's/|/\//g')"
	fi
	rows+=("| $s | $status | $((t1 - t0)) | $figures |")
	echo "   -> $status in $((t1 - t0))s"
done

{
	echo
	echo "GPU check, $(date -u +%FT%TZ), commit $(cat "$dir/commit" 2>/dev/null || echo unknown)"
	grep -A1 '^name' "$out/env.txt" | tail -n 1 || true
	echo
	echo "| stage | status | s | figures |"
	echo "|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} | tee "$out/table.md"
# The exit status says whether every stage that ran passed (the table says which did not).
[ "$failed" -eq 0 ]
