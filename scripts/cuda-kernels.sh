#!/usr/bin/env bash
# cuda-kernels.sh regenerates kernels/cuda/gen from the .cu sources with
# nvcc 11.8 (scripts/setup-cuda.sh installs it): for each family X.cu,
#   gen/X.ptx          PTX (ISA 7.8) for compute_90, JIT-compiled by newer drivers
#   gen/X.sm_90.cubin  SASS for sm_90 (H100/H200)
# and gen/ptxas.sm_90.txt, ptxas's resource report (registers, shared
# memory, stack, spills) for every kernel. It fails if any kernel spills.
# Outputs are deterministic (nvcc runs in kernels/cuda on relative paths),
# so CI regenerates them and requires `git diff --exit-code`.
set -euo pipefail

cd "$(dirname "$0")/../kernels/cuda"
NVCC="${NVCC:-nvcc}"
if ! command -v "$NVCC" >/dev/null 2>&1; then
	echo "cuda-kernels: $NVCC not found; run scripts/setup-cuda.sh" >&2
	exit 1
fi
case "$("$NVCC" --version | tail -n 1)" in
*cuda_11.8*) ;;
*) echo "cuda-kernels: warning: committed kernels are built with nvcc 11.8; this is $("$NVCC" --version | tail -n 1)" >&2 ;;
esac

FLAGS=(-std=c++17 -O3)
mkdir -p gen
rm -f gen/*.ptx gen/*.cubin
report=gen/ptxas.sm_90.txt
: >"$report.tmp"
for src in *.cu; do
	base="${src%.cu}"
	"$NVCC" "${FLAGS[@]}" -ptx -arch=compute_90 -o "gen/$base.ptx" "$src"
	"$NVCC" "${FLAGS[@]}" -cubin -arch=sm_90 -Xptxas -v -o "gen/$base.sm_90.cubin" "$src" 2>"gen/$base.log" || {
		cat "gen/$base.log" >&2
		rm -f "gen/$base.log"
		exit 1
	}
	{
		echo "# $src"
		grep -E "Compiling entry|stack frame|Used" "gen/$base.log" | sed -e 's/^ptxas info *: //' -e 's/^ *//'
	} >>"$report.tmp"
	rm -f "gen/$base.log"
done
mv "$report.tmp" "$report"

if grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$report" >/dev/null; then
	echo "cuda-kernels: ptxas reports spills:" >&2
	grep -B1 -E "[1-9][0-9]* bytes spill" "$report" >&2
	exit 1
fi
echo "cuda-kernels: $(ls gen/*.cubin | wc -l) cubins, $(grep -c 'Compiling entry' "$report") kernels, no spills"
