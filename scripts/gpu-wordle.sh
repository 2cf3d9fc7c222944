#!/usr/bin/env bash
# gpu-wordle.sh: the Wordle demo on a GPU, issue 21's "-device cuda" figures.
#
#   scripts/gpu-wordle.sh build [DIR]   here (needs Go and cuda.h: scripts/setup-cuda.sh): builds
#                                       examples/wordle with -tags cuda into DIR (default
#                                       bin/gpu-wordle) and copies this script next to it.
#   scripts/gpu-wordle.sh run [DIR]     on the GPU machine, from the repository root (needs
#                                       libcuda.so.1; no Go, no network): runs the demo twice with
#                                       -device cuda, each under its own time limit:
#                                         default  the CPU demo's defaults (seed 1), so its table
#                                                  can be set beside the CPU's (README, "The Wordle
#                                                  run"): the same recipe on the other backend;
#                                         big      a bigger embedded model (-hidden 512) on all 16
#                                                  words of the built-in list (GPU_WORDLE_BIG
#                                                  replaces its flags);
#                                       and writes each run's table, plot and metrics to
#                                       $OUT/<run>/ (default ./gpu-wordle-out) and one summary,
#                                       $OUT/summary.md, with the wall time of each.
#
# From a session with the device tool:
#   make gpu-wordle                    # here
#   run(command="scripts/gpu-wordle.sh run", carry=["bin/gpu-wordle"], timeout_s=600)
# The summary goes into BENCHMARKS.md ("Issue 21") and README ("The Wordle run").
set -uo pipefail

mode=${1:-}
dir=${2:-bin/gpu-wordle}
words16="brave brick bride chair charm chart crane crash grace grade grain grand plain plane plant plate" # wordlegame.DefaultWordList
big=${GPU_WORDLE_BIG:--hidden 512 -words "$words16" -eval-every 0}
limit_default=${GPU_WORDLE_TIMEOUT_default:-240}
limit_big=${GPU_WORDLE_TIMEOUT_big:-300}

case "$mode" in
build)
	set -e
	mkdir -p "$dir"
	go build -tags cuda -ldflags=-s -o "$dir/wordle" ./examples/wordle
	cp "$0" "$dir/gpu-wordle.sh"
	git rev-parse HEAD >"$dir/commit" 2>/dev/null || true
	echo "built $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: scripts/gpu-wordle.sh run $dir"
	exit 0
	;;
run) ;;
*)
	echo "usage: $0 build|run [DIR]" >&2
	exit 2
	;;
esac

if [ ! -x "$dir/wordle" ]; then
	echo "gpu-wordle: $dir/wordle missing: run 'make gpu-wordle' on the build machine and carry $dir" >&2
	exit 2
fi
out=$(realpath -m "${OUT:-./gpu-wordle-out}")
mkdir -p "$out"
summary="$out/summary.md"
{
	echo "Wordle demo on the GPU, $(date -u +%FT%TZ), commit $(cat "$dir/commit" 2>/dev/null || echo unknown)"
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	echo
} >"$summary"

failed=0
# play NAME LIMIT FLAGS...: one demo run, its table appended to the summary.
play() {
	local name=$1 lim=$2 t0 t1 rc
	shift 2
	mkdir -p "$out/$name"
	echo "== $name (timeout ${lim}s): wordle -device cuda $*" | tee -a "$summary"
	t0=$(date +%s)
	timeout --kill-after=10 "$lim" "$dir/wordle" -device cuda -out "$out/$name" "$@" >"$out/$name/log.txt" 2>&1
	rc=$?
	t1=$(date +%s)
	echo "rc $rc, $((t1 - t0)) s wall" | tee -a "$summary"
	[ "$rc" -ne 0 ] && failed=$((failed + 1)) && tail -n 5 "$out/$name/log.txt" >>"$summary"
	grep '^|' "$out/$name/log.txt" >>"$summary"
	echo >>"$summary"
}
play default "$limit_default"
eval "set -- $big"
play big "$limit_big" "$@"
cat "$summary"
[ "$failed" -eq 0 ]
