#!/usr/bin/env bash
# gpu-check.sh: the one command that says whether the GPU path works (kernels/cuda, the model
# and the trainer on a GPU, against kernels/cpu and against the Hugging Face stack).
#
#   scripts/gpu-check.sh build [DIR]   here (needs Go, cuda.h: scripts/setup-cuda.sh): builds into
#                                      DIR (default bin/gpu-check) the `go test -c -tags cuda`
#                                      binaries of kernels/cuda (cuda.test) and grpo (grpo.test),
#                                      model/cmd/hfcheck (-tags cuda), and copies this script and
#                                      the Python stages' scripts next to them.
#   scripts/gpu-check.sh run [DIR]     on the GPU machine, from the repository root (needs
#                                      libcuda.so.1, coreutils and tar; the hf and torch stages
#                                      need python3 with torch, transformers and peft, the ncu
#                                      stage Nsight Compute; no Go, no network): runs the stages
#                                      below, each Go stage in its package's folder (as `go test`
#                                      runs a test binary: some tests read the package's sources),
#                                      each under its own time limit, and prints one table last.
#                                      $OUT (default ./gpu-check-out) gets two files: table.md and
#                                      gpu-check.tar.gz (env.txt, every stage's log, hf.json,
#                                      torch.json and the ncu CSVs), rewritten after every stage so
#                                      that a run cut short still brings its logs back; the device
#                                      tool returns at most 8 files.
#   scripts/gpu-check.sh check         here (needs Go, no cuda.h): checks that every Go stage's
#                                      pattern selects a Test or Benchmark that the cuda build of
#                                      its package compiles (build runs it first).
#
# Stages (GPU_CHECK_STAGES selects a subset, e.g. "info grpo"; seconds are each stage's time
# limit, override with e.g. GPU_CHECK_TIMEOUT_grpo=300):
#   info     15  device, modules loaded (cubin or PTX), registers/local memory per kernel
#   kernels  70  the conformance suite (every kerneltest family on the Device vs kernels/ref at
#                the suite's awkward shapes, the one tolerance table, integer outputs exact), the
#                SIMT probes (mma.sync fragment layout, barrier/shared/shuffle/ballot) on hardware,
#                a pinned-memory round trip, and the runtime layer (TestSeam*: device-side index
#                errors, staging, DownloadAll, graph capture/replay, two streams with an event)
#   model    45  inference: logits of random tiny and Qwen3-0.6B-shaped models, GPU vs kernels/cpu;
#                the model end to end on a tiny random bf16 checkpoint (logits, continuous batched
#                generation through the paged KV cache with forked prefixes, LogProbs) and its
#                crossings through kerneltest.Counting (a decode step downloads no logits) and
#                syncs (TestModelE2ESyncsGPU); decode steps replayed from CUDA graphs equal op by op
#                and alone bit for bit, recaptured when the KV pool moves (TestModelE2EGraphsGPU)
#   train    40  the model's training steps on the GPU vs kernels/cpu: three LoRA steps
#                (Accumulate with the clipped objective and a KL term, AdamW; loss, log-probs,
#                gradients, updated adapters) and their crossings (no foreign host memory)
#   gemm     40  MatMul's kernels at the Qwen3-0.6B projections, both precisions: GEMV
#                (M 1, 8) GB/s and % of HBM in weight bytes, GEMM (M 4096) TFLOP/s and %
#                of the 989 TFLOP/s dense peak; MatMulTN at the LoRA gradients (% of FP32)
#   decode   40  decode tok/s at batch 1, 64, 256 vs the HBM bandwidth ceiling, and one decode
#                step's wall µs and host ns, launches, graph launches and waits, replayed from
#                CUDA graphs and op by op, interleaved (BenchmarkDecodeStep, one iteration); attention
#                alone at decode shapes (batch 1/64/256 at context 512, 1 at 4096: µs, K/V GB/s)
#   prefill  25  prefill tok/s (8 × 512 tokens); attention alone at 8 × 512 and 1 × 4096
#                (TFLOP/s)
#   grpo    180  the trainer on the GPU (grpo.test): a 3-step GRPO run of a small model (LoRA with
#                the KL reference, and full weights) vs the same run on kernels/cpu (the same
#                completions and rewards, losses within ModelLogProbs, weights within
#                GRPORunParams, sampled log-probs within samplingLogpBound of the training
#                forward's), SFT vs kernels/cpu, a bit-exact resume with the PEFT adapter checked on
#                kernels/cpu; then the Qwen3-0.6B 64 × 512 LoRA r16 step through the trainer
#                (BenchmarkGRPOStepMemory: backend memory by phase, fails above 40 GiB)
#   hf       75  transformers' save_pretrained checkpoints (tied 0.6B-shaped and untied, bf16)
#                loaded by model.Load on kernels/cpu and the GPU, logits vs transformers' float64
#                CPU forward (≤ 1e-4 relative); a peft adapter loaded by ours, ours loaded by peft
#                (scripts/hf_interop.py with hfcheck)
#   ncu      45  GPU time per kernel of one decode step (batch 64) and one LoRA training step
#                (4 × 512) of the 0.6B shape: ncu --clock-control none --profile-from-start off
#                around Device.SetProfiling (scripts/ncu_summary.py makes the tables)
#   torch    90  the PyTorch anchor on the same shapes in the same call: decode, prefill, a train
#                step, the GRPO step with its peak memory (scripts/torch_anchor.py)
# GPU_CHECK_BUDGET (default 530 s, under 9 minutes) caps the whole run: a stage gets at most what is
# left of it (minus 10 s for the table and the tarball), and stages that would get under 10 s are
# skipped and marked so, so the table always prints inside the device tool's 600 s per command.
#
# `check` (which `build` runs first) makes sure that every Go stage's -test.run / -test.bench
# pattern selects at least one Test or Benchmark of the test files the cuda build of its package
# compiles (go list -tags cuda: a test only in a cudahost file does not count; the binaries cannot
# list them here: without a GPU they exit before main), and that the ncu stage's benchmarks and the
# script stages' files exist; `build` also checks that DIR fits the device tool's
# 64 MiB carry limit.
#
# From a session with the device tool:
#   make gpu-check                     # here
#   run(command="scripts/gpu-check.sh run", carry=["bin/gpu-check"], timeout_s=600)
# Its table goes into BENCHMARKS.md ("CUDA backend on an H200"); the logs come back in
# $OUT/gpu-check.tar.gz.
set -uo pipefail

mode=${1:-}
dir=${2:-bin/gpu-check}
all_stages="info kernels model train gemm decode prefill grpo hf ncu torch"

# Go stages: the test binary (its package), the arguments; script stages: a command line run in
# DIR with $out set. One entry per stage, so each helper's stage is one place to edit.
declare -A bins pkgs args cmds timeouts
bins=([info]=cuda.test [kernels]=cuda.test [model]=cuda.test [train]=cuda.test [gemm]=cuda.test
	[decode]=cuda.test [prefill]=cuda.test [grpo]=grpo.test)
pkgs=([cuda.test]=./kernels/cuda [grpo.test]=./grpo)
args[info]="-test.run ^TestDeviceInfo$ -test.v"
args[kernels]="-test.run ^(TestGPU|TestPinnedRoundTrip|TestSeam) -test.v"
args[model]="-test.run ^(TestModelLogitsGPUvsCPU|TestModelE2EGPUvsCPU|TestModelE2ETransfersGPU|TestModelE2ESyncsGPU|TestModelE2EGraphsGPU|TestModelE2EForwardInvarianceGPU)$ -test.v"
args[train]="-test.run ^(TestModelE2ETrainGPUvsCPU|TestModelE2ETrainTransfersGPU)$ -test.v"
args[gemm]="-test.run ^$ -test.bench ^BenchmarkGEMM(LoRAGrad)?$ -test.benchtime 20x"
args[decode]="-test.run ^$ -test.bench ^(BenchmarkDecode(Step)?|BenchmarkAttentionDecode)$ -test.benchtime 1x"
args[prefill]="-test.run ^$ -test.bench ^(BenchmarkPrefill|BenchmarkAttentionPrefill)$ -test.benchtime 2x"
args[grpo]="-test.run ^(TestGRPOGPUvsCPU|TestGRPOGPUResume|TestSFTGPUvsCPU)$ -test.bench ^BenchmarkGRPOStepMemory$ -test.benchtime 1x -test.v"
cmds[hf]='python3 hf_interop.py ./hfcheck'
cmds[ncu]='ncu_stage'
cmds[torch]='python3 torch_anchor.py'
timeouts=([info]=15 [kernels]=70 [model]=45 [train]=40 [gemm]=40 [decode]=40 [prefill]=25
	[grpo]=180 [hf]=75 [ncu]=45 [torch]=90)
scripts="hf_interop.py torch_anchor.py ncu_summary.py"

# check_stages fails unless every Go stage's patterns select a Test or Benchmark function
# of the test files the cuda build of its package compiles, the ncu stage's benchmarks
# exist, and the script stages' files are there.
check_stages() {
	local s pkg files names f
	for s in $all_stages; do
		[ -n "${bins[$s]:-}" ] || continue
		pkg=${pkgs[${bins[$s]}]}
		files=$(go list -tags cuda -f '{{range .TestGoFiles}}{{$.Dir}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$.Dir}}/{{.}} {{end}}' "$pkg") || return 1
		# shellcheck disable=SC2086 # a list of paths without spaces
		names=$(sed -n 's/^func \(\(Test\|Benchmark\)[A-Za-z0-9_]*\)(.*/\1/p' $files)
		# shellcheck disable=SC2086 # args are word lists
		set -- ${args[$s]}
		while [ $# -gt 0 ]; do
			case $1 in
			-test.run | -test.bench)
				if [ "$2" != '^$' ]; then
					if ! grep -qE "$2" <<<"$names"; then
						echo "gpu-check: stage $s: $1 $2 selects no test or benchmark of the cuda build of $pkg" >&2
						return 1
					fi
					echo "gpu-check: stage $s ($pkg) $1 selects $(grep -cE "$2" <<<"$names") functions ($2)"
				fi
				;;
			esac
			shift
		done
	done
	# The ncu stage profiles these two benchmarks of kernels/cuda.
	files=$(go list -tags cuda -f '{{range .TestGoFiles}}{{$.Dir}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$.Dir}}/{{.}} {{end}}' ./kernels/cuda) || return 1
	for f in BenchmarkProfileDecodeStep BenchmarkProfileTrainStep; do
		# shellcheck disable=SC2086 # a list of paths without spaces
		grep -q "^func $f(" $files || {
			echo "gpu-check: stage ncu: $f is not in the cuda build of ./kernels/cuda" >&2
			return 1
		}
	done
	for f in $scripts; do
		[ -f "scripts/$f" ] || {
			echo "gpu-check: scripts/$f missing" >&2
			return 1
		}
	done
}

case "$mode" in
check)
	check_stages
	exit
	;;
build)
	set -e
	mkdir -p "$dir"
	check_stages
	for f in $scripts; do
		cp "scripts/$f" "$dir/$f"
	done
	for b in "${!pkgs[@]}"; do
		go vet -tags cuda "${pkgs[$b]}"
		go test -c -tags cuda -ldflags=-s -o "$dir/$b" "${pkgs[$b]}" # -s: no symbol table (panics still name functions)
	done
	go build -tags cuda -ldflags=-s -o "$dir/hfcheck" ./model/cmd/hfcheck
	cp "$0" "$dir/gpu-check.sh"
	git rev-parse HEAD >"$dir/commit" 2>/dev/null || true
	size=$(du -sb "$dir" | cut -f1)
	if [ "$size" -gt $((60 << 20)) ]; then
		echo "gpu-check: $dir is $((size >> 20)) MiB; the device tool carries at most 64 MiB" >&2
		exit 1
	fi
	echo "built $dir ($(du -sh "$dir" | cut -f1): $(cd "$dir" && ls | tr '\n' ' ')); on the GPU machine: scripts/gpu-check.sh run $dir"
	exit 0
	;;
run) ;;
*)
	echo "usage: $0 build|check|run [DIR]" >&2
	exit 2
	;;
esac

# The Go stages run in their packages' folders, as go test runs a test binary (the cuda build's
# TestSeam* read kernels/cuda's sources): the run starts from the repository root.
for b in "${!pkgs[@]}"; do
	if [ ! -d "${pkgs[$b]}" ]; then
		echo "gpu-check: run from the repository root (${pkgs[$b]} not found here)" >&2
		exit 2
	fi
done
dir=$(realpath "$dir")
for b in "${!pkgs[@]}" hfcheck; do
	if [ ! -x "$dir/$b" ]; then
		echo "gpu-check: $dir/$b missing: run 'make gpu-check' on the build machine and carry $dir" >&2
		exit 2
	fi
done
out=$(realpath -m "${OUT:-./gpu-check-out}")
mkdir -p "$out"
logs=$(mktemp -d) # every stage's log and files, packed into $out/gpu-check.tar.gz
trap 'rm -rf "$logs"' EXIT
stages=${GPU_CHECK_STAGES:-$all_stages}

{
	echo "date: $(date -u +%FT%TZ)"
	echo "commit: $(cat "$dir/commit" 2>/dev/null || echo unknown)"
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
	uname -a
	python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)' 2>&1 | tail -n 1
	command -v ncu >/dev/null && ncu --version | tail -n 1
} >"$logs/env.txt" 2>&1

# pack rewrites $out/gpu-check.tar.gz from what the stages have logged so far.
pack() { tar -czf "$out/gpu-check.tar.gz" -C "$logs" . 2>/dev/null || true; }
pack

# ncu_stage profiles one decode step and one training step (see the stage list).
ncu_stage() {
	local ncu rc=0
	ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
	if [ -z "$ncu" ]; then
		echo "ncu (Nsight Compute) not found"
		return 1
	fi
	for step in DecodeStep TrainStep; do
		"$ncu" --clock-control none --profile-from-start off --csv --metrics gpu__time_duration.sum \
			--log-file "$logs/ncu-$step.csv" ./cuda.test -test.run '^$' -test.bench "^BenchmarkProfile$step\$" -test.benchtime 1x || rc=1
		python3 ncu_summary.py "$step" "$logs/ncu-$step.csv" || rc=1
	done
	return $rc
}

rows=()
failed=0
budget=${GPU_CHECK_BUDGET:-530}
begin=$(date +%s)
for s in $stages; do
	if [ -z "${args[$s]:-}" ] && [ -z "${cmds[$s]:-}" ]; then
		rows+=("| $s | unknown stage | | |")
		failed=$((failed + 1))
		continue
	fi
	var="GPU_CHECK_TIMEOUT_$s"
	lim=${!var:-${timeouts[$s]}}
	left=$((budget - ($(date +%s) - begin) - 10))
	if [ "$left" -lt 10 ]; then
		rows+=("| $s | SKIPPED (budget ${budget}s spent) | | |")
		continue
	fi
	[ "$lim" -gt "$left" ] && lim=$left
	log="$logs/$s.log"
	t0=$(date +%s)
	if [ -n "${bins[$s]:-}" ]; then
		echo "== $s (timeout ${lim}s): ${bins[$s]} ${args[$s]}" | tee "$log"
		# shellcheck disable=SC2086 # args are word lists
		(cd "${pkgs[${bins[$s]}]}" && timeout --kill-after=10 "$lim" "$dir/${bins[$s]}" ${args[$s]} -test.count 1) >>"$log" 2>&1
		rc=$?
	else
		echo "== $s (timeout ${lim}s): ${cmds[$s]}" | tee "$log"
		# shellcheck disable=SC2086 # a command line
		(cd "$dir" && export OUT="$logs" logs && export -f ncu_stage && timeout --kill-after=10 "$lim" bash -c "${cmds[$s]}") >>"$log" 2>&1
		rc=$?
	fi
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
	case $s in
	info) figures=$(grep -m1 'sm_' "$log" | sed 's/^ *//; s/|/\//g') ;;
	hf) figures=$(grep -E '^hf: .*(PASS|FAIL|info)$|passed, .* failed' "$log" | sed 's/^hf: //; s/|/\//g' | awk '{printf "%s<br>", $0}') ;;
	ncu) figures=$(grep '^ncu: ' "$log" | sed 's/^ncu: //' | awk '{printf "%s<br>", $0}') ;;
	torch) figures=$(grep -E '^(decode|prefill|train|grpo) ' "$log" | cut -c1-300 | sed 's/|/\//g' | awk '{printf "%s<br>", $0}') ;;
	*)
		if [ "$pass$fail" != "00" ]; then
			figures="$pass passed, $fail failed"
			[ "$fail" -gt 0 ] && figures="$figures: $(grep -- '--- FAIL' "$log" | awk '{print $3}' | head -8 | tr '\n' ' ')"
		fi
		if grep -q '^Benchmark' "$log"; then
			# name, then every "value unit" pair except ns/op
			figures="$figures $(grep '^Benchmark' "$log" | awk '{
				name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name); line=name ":";
				for (i = 3; i < NF; i += 2) if ($(i+1) != "ns/op") line = line " " $i " " $(i+1);
				printf "%s<br>", line }')"
		fi
		;;
	esac
	case $s in
	model | train)
		figures="$figures $(grep -o '[a-z0-9.-]*: [0-9]*×[0-9]* logits, max abs diff GPU vs CPU [0-9.e+-]*' "$log" | tr '\n' ';')"
		figures="$figures $(grep -o 'Model[A-Za-z]*: max abs difference vs kernels/cpu [0-9.e+-]*' "$log" | sed 's/ max abs difference vs kernels.cpu//' | sort -u | tr '\n' ';')"
		;;
	grpo)
		figures="$figures $(grep -oE '(parameters after [0-9]+ steps: max abs difference vs kernels/cpu [0-9.e+-]*|sampling_logp_difference/max [0-9.e+-]*)' "$log" | sort | uniq -c | sort -rn | head -4 | sed 's/^ *//' | tr '\n' ';')"
		figures="$figures $(grep -E '^qwen3-0.6b/.*: (generation|learning)' "$log" | sed 's/|/\//g' | awk '{printf "%s<br>", $0}')"
		;;
	esac
	if [ "$rc" -ne 0 ] && [ "$pass$fail" = "00" ]; then
		figures="$figures last line: $(tail -n 1 "$log" | cut -c1-160 | sed 's/|/\//g')"
	fi
	rows+=("| $s | $status | $((t1 - t0)) | $figures |")
	echo "   -> $status in $((t1 - t0))s"
	pack
done

{
	echo
	echo "GPU check, $(date -u +%FT%TZ), commit $(cat "$dir/commit" 2>/dev/null || echo unknown)"
	grep -A1 '^name' "$logs/env.txt" | tail -n 1 || true
	echo
	echo "| stage | status | s | figures |"
	echo "|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
} | tee "$out/table.md"
cp "$out/table.md" "$logs/"
pack
# The exit status says whether every stage that ran passed (the table says which did not).
[ "$failed" -eq 0 ]
