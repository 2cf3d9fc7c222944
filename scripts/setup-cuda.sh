#!/usr/bin/env bash
# setup-cuda.sh installs the CUDA toolchain the repo's kernels are built
# with: Debian 12's non-free nvidia-cuda-toolkit (nvcc/ptxas 11.8, g++-11 as
# nvcc's host compiler). It is idempotent and returns at once when nvcc is
# already on PATH. Run as root (or via sudo) on a Debian/Ubuntu machine with
# the non-free component enabled. Nothing here is needed for the default
# (CPU-only) build or for the SIMT host build, which uses only the system g++.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1; then
	echo "setup-cuda: $(nvcc --version | tail -n 1) already installed"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "setup-cuda: need root (or sudo) to apt-get install nvidia-cuda-toolkit" >&2
		exit 1
	fi
	SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
# nvidia-cuda-toolkit lives in Debian's non-free component, which many
# images do not enable. Rather than edit the system's apt sources, use a
# private source list (bookworm main+contrib+non-free) and a private package
# index for this install only; the packages land in the system as usual.
. /etc/os-release
SUITE="${VERSION_CODENAME:-bookworm}"
APTDIR="${SETUP_CUDA_APTDIR:-/var/tmp/setup-cuda-apt}"
mkdir -p "$APTDIR/sources" "$APTDIR/lists/partial"
cat >"$APTDIR/sources/nonfree.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $SUITE $SUITE-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT="$SUDO apt-get -o DPkg::Lock::Timeout=600 -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$APTDIR/sources -o Dir::State::Lists=$APTDIR/lists"
$APT update
$APT install -y --no-install-recommends nvidia-cuda-toolkit

nvcc --version | tail -n 1
