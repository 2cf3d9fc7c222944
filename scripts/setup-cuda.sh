#!/usr/bin/env bash
# setup-cuda.sh installs the CUDA toolchain the repo's kernels are built
# with: Debian 12's non-free nvidia-cuda-toolkit (nvcc/ptxas 11.8, cuda.h,
# g++-11 as nvcc's host compiler). `make test` (CI) runs it through
# `make cuda-setup`. It is idempotent: it returns at once when nvcc 11.8 is
# already on PATH (or is $NVCC). Run as root (or via sudo) on a Debian
# machine; it enables the non-free component for this install only. Nothing
# here is needed for the default (CPU-only) build or for the SIMT host build,
# which uses only the system g++; `make test CUDA=0` skips the nvcc half.
#
# Cost on a fresh Debian 12 machine (measured 2026-12-01 on the 2-core
# development machine, loaded by parallel work): 65 packages, 1.62 GB to
# download (28 s here) and 5.3 GB installed; apt-get update 12 s; unpacking
# and configuring 5 min 27 s. The download is cached when $SETUP_CUDA_APTDIR
# (default /var/tmp/setup-cuda-apt) is kept between CI runs: the .debs land
# in its archives/ directory.
set -euo pipefail

NVCC="${NVCC:-nvcc}"
if command -v "$NVCC" >/dev/null 2>&1; then
	version=$("$NVCC" --version 2>&1 | tail -n 1 || true)
	case "$version" in
	*cuda_11.8*)
		echo "setup-cuda: nvcc 11.8 already installed ($(command -v "$NVCC")), nothing to do"
		exit 0
		;;
	*)
		echo "setup-cuda: $(command -v "$NVCC") is $version, but the committed kernels are built with nvcc 11.8;" >&2
		echo "  put an 11.8 nvcc first on PATH (or set NVCC=/path/to/nvcc-11.8), or run make test CUDA=0 to skip the nvcc half" >&2
		exit 1
		;;
	esac
fi
ID=""
VERSION_CODENAME=""
# SETUP_CUDA_OS_RELEASE overrides the os-release file (for the script's own
# test, kernels/cuda/setupcuda_test.go).
OS_RELEASE="${SETUP_CUDA_OS_RELEASE:-/etc/os-release}"
[ -r "$OS_RELEASE" ] && . "$OS_RELEASE"
if [ "$ID" != debian ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "setup-cuda: nvcc 11.8 not found, and this is not Debian (${PRETTY_NAME:-unknown system}), whose package this script installs:" >&2
	echo "  install CUDA 11.8's nvcc yourself, or run make test CUDA=0 to skip the nvcc half" >&2
	exit 1
fi
# Only bookworm's nvidia-cuda-toolkit is 11.8 (bullseye has 11.2, trixie
# 12.4): refuse before a 1.6 GB download of the wrong release.
if [ "$VERSION_CODENAME" != bookworm ]; then
	echo "setup-cuda: nvcc 11.8 not found, and this is Debian ${VERSION_CODENAME:-(unknown release)}, whose nvidia-cuda-toolkit is not 11.8 (only bookworm's is):" >&2
	echo "  install CUDA 11.8's nvcc yourself (NVCC=/path/to/nvcc), or run make test CUDA=0 to skip the nvcc half" >&2
	exit 1
fi
echo "setup-cuda: installing Debian's nvidia-cuda-toolkit (nvcc 11.8): 1.6 GB download, about 6 minutes"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "setup-cuda: need root (or sudo) to apt-get install nvidia-cuda-toolkit; or run make test CUDA=0 to skip the nvcc half" >&2
		exit 1
	fi
	SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# nvidia-cuda-toolkit lives in Debian's non-free component, which many
# images do not enable. Rather than edit the system's apt sources, use a
# private source list (bookworm main+contrib+non-free) and a private package
# index for this install only; the packages land in the system as usual.
SUITE=bookworm
APTDIR="${SETUP_CUDA_APTDIR:-/var/tmp/setup-cuda-apt}"
mkdir -p "$APTDIR/sources" "$APTDIR/lists/partial" "$APTDIR/archives/partial"
cat >"$APTDIR/sources/nonfree.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $SUITE $SUITE-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT="$SUDO apt-get -o DPkg::Lock::Timeout=600 -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$APTDIR/sources -o Dir::State::Lists=$APTDIR/lists -o Dir::Cache::Archives=$APTDIR/archives"
$APT update
$APT install -y --no-install-recommends nvidia-cuda-toolkit

# What the install left on PATH must be the 11.8 the kernels are built
# with (a newer nvcc earlier on PATH would shadow it).
version=$("$NVCC" --version 2>&1 | tail -n 1 || true)
case "$version" in
*cuda_11.8*) echo "setup-cuda: installed $version" ;;
*)
	echo "setup-cuda: after installing nvidia-cuda-toolkit, $NVCC is ${version:-missing}, not 11.8;" >&2
	echo "  put an 11.8 nvcc first on PATH (or set NVCC=/path/to/nvcc-11.8), or run make test CUDA=0 to skip the nvcc half" >&2
	exit 1
	;;
esac
