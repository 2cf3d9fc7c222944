#!/usr/bin/env bash
# cuda-kernels.sh builds kernels/cuda's .cu sources with nvcc 11.8
# (scripts/setup-cuda.sh installs it): for each family X.cu,
#   X.ptx          PTX (ISA 7.8) for compute_90, JIT-compiled by newer drivers
#   X.sm_90.cubin  SASS for sm_90 (H100/H200)
# and ptxas.sm_90.txt, ptxas's resource report (registers, shared memory,
# stack, spills) for every kernel. It fails if any kernel spills.
#
#   scripts/cuda-kernels.sh            regenerate kernels/cuda/gen (commit the result)
#   scripts/cuda-kernels.sh -o DIR     build into DIR instead
#   scripts/cuda-kernels.sh --check    build into a temporary directory and fail
#                                      unless it equals the committed kernels/cuda/gen
#                                      file for file, byte for byte (what CI runs; the
#                                      working tree is not touched)
#
# The outputs are deterministic: nvcc runs in kernels/cuda on relative source
# paths, without -lineinfo or -G, so neither PTX nor cubin holds a path, a
# time stamp or a temporary name. Building into two directories at different
# paths, with different TMPDIRs, gives identical bytes (checked 2026-12-01,
# nvcc 11.8.89), which is what lets CI compare a fresh build with the
# committed files.
set -euo pipefail
export LC_ALL=C # the glob order of *.cu, hence the report's order, must not depend on the locale

cd "$(dirname "$0")/../kernels/cuda"
out=gen
check=0
case "${1:-}" in
"") ;;
-o)
	out=${2:?usage: $0 [-o DIR | --check]}
	;;
--check)
	check=1
	out=$(mktemp -d "${TMPDIR:-/tmp}/cuda-kernels.XXXXXX")
	trap 'rm -rf "$out"' EXIT
	;;
*)
	echo "usage: $0 [-o DIR | --check]" >&2
	exit 2
	;;
esac

NVCC="${NVCC:-nvcc}"
if ! command -v "$NVCC" >/dev/null 2>&1; then
	echo "cuda-kernels: $NVCC not found; run scripts/setup-cuda.sh (make cuda-setup)" >&2
	exit 1
fi
version=$("$NVCC" --version | tail -n 1)
case "$version" in
*cuda_11.8*) ;;
*) echo "cuda-kernels: warning: the committed kernels are built with nvcc 11.8; this is $version, whose output may differ" >&2 ;;
esac

FLAGS=(-std=c++17 -O3)
mkdir -p "$out"
rm -f "$out"/*.ptx "$out"/*.cubin
report=$out/ptxas.sm_90.txt
: >"$report.tmp"
for src in *.cu; do
	base="${src%.cu}"
	"$NVCC" "${FLAGS[@]}" -ptx -arch=compute_90 -o "$out/$base.ptx" "$src"
	"$NVCC" "${FLAGS[@]}" -cubin -arch=sm_90 -Xptxas -v -o "$out/$base.sm_90.cubin" "$src" 2>"$out/$base.log" || {
		cat "$out/$base.log" >&2
		rm -f "$out/$base.log"
		exit 1
	}
	{
		echo "# $src"
		grep -E "Compiling entry|stack frame|Used" "$out/$base.log" | sed -e 's/^ptxas info *: //' -e 's/^ *//'
	} >>"$report.tmp"
	rm -f "$out/$base.log"
done
mv "$report.tmp" "$report"

if grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$report" >/dev/null; then
	echo "cuda-kernels: ptxas reports spills:" >&2
	grep -B1 -E "[1-9][0-9]* bytes spill" "$report" >&2
	exit 1
fi
echo "cuda-kernels: $(ls "$out"/*.cubin | wc -l) cubins, $(grep -c 'Compiling entry' "$report") kernels, no spills ($version)"

if [ "$check" = 1 ]; then
	if ! diff -r -q gen "$out" >&2; then
		echo "cuda-kernels: kernels/cuda/gen differs from what $version builds from the .cu sources (files listed above):" >&2
		echo "  run make cuda-kernels and commit kernels/cuda/gen" >&2
		exit 1
	fi
	echo "cuda-kernels: kernels/cuda/gen equals a fresh build, byte for byte"
fi
