#!/usr/bin/env bash
# Checks the README's quick start as a user would meet it: the Go blocks
# marked <!-- quickstart: FILE --> in README.md are written to a fresh module
# outside this repository that depends on github.com/x through a replace
# directive (github.com/x cannot be fetched with `go get`), then built, vetted,
# tested and run. Needs only the Go module cache that `make setup` fills.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Each marker line names the file the next ```go block goes to.
awk -v dir="$tmp" '
	/^<!-- quickstart: [^ ]+ -->$/ { file = dir "/" $3; want = 1; next }
	want && /^```go$/ { inblock = 1; want = 0; n++; next }
	inblock && /^```$/ { inblock = 0; close(file); next }
	inblock { print > file }
	END { if (n == 0) { print "quickstart: no marked Go blocks in README.md" > "/dev/stderr"; exit 1 } }
' "$repo/README.md"

cd "$tmp"
cat > go.mod <<MOD
module quickstart

go $(awk '/^go /{print $2}' "$repo/go.mod")

require github.com/x v0.0.0

replace github.com/x => $repo
MOD
cp "$repo/go.sum" go.sum
export GOFLAGS=-mod=mod
go mod tidy
go vet ./...
go test -count=1 ./...
go run .
# Without -tags cuda, -device cuda must stop with advice, not a panic.
if out=$(go run . -device cuda 2>&1); then
	echo "quickstart: -device cuda succeeded in a build without -tags cuda" >&2
	exit 1
fi
if ! grep -q 'go build -tags cuda' <<<"$out"; then
	echo "quickstart: -device cuda without the tag said: $out" >&2
	exit 1
fi
echo "quickstart: the README's module builds, its tests pass and its program runs (-device cuda without the tag: $(head -n 1 <<<"$out" | cut -d" " -f3-))"
