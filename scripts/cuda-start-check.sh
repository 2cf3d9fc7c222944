#!/usr/bin/env bash
# cuda-start-check.sh: what a user meets who starts a `-tags cuda` binary
# (part of `make cudabuild`). Builds examples/guess with -tags cuda and
# starts it with a bad flag, which it refuses at once if it gets that far:
#   - on a machine with a GPU, it starts and refuses the flag;
#   - without a GPU (but with libcuda.so.1), kernels/device/internal/cuinit
#     stops it before main with a message naming the GPU, libcuda.so.1 and
#     how to run without one (not gorgonia.org/cu's bare "NoDevice");
#   - without libcuda.so.1, the dynamic loader refuses it, naming the library.
# Anything else (a panic, a hang, cu's own message) fails.
set -euo pipefail
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -tags cuda -o "$tmp/guess" ./examples/guess
set +e
out=$(timeout 60 "$tmp/guess" -max 1 2>&1)
rc=$?
set -e
if grep -q 'needs an NVIDIA GPU and its driver (libcuda.so.1)' <<<"$out" && grep -q -- '-device cpu' <<<"$out"; then
	echo "cuda-start-check: no GPU here; the -tags cuda binary says so (rc $rc): $(head -n 1 <<<"$out" | cut -c1-160)"
elif grep -q 'libcuda.so.1: cannot open shared object file' <<<"$out"; then
	echo "cuda-start-check: no libcuda.so.1 here; the loader names it (rc $rc)"
elif grep -q -- '-max 1: want 2..1000' <<<"$out"; then
	echo "cuda-start-check: a GPU is present; the -tags cuda binary started (rc $rc)"
else
	echo "cuda-start-check: unexpected start of a -tags cuda binary (rc $rc):" >&2
	echo "$out" >&2
	exit 1
fi
