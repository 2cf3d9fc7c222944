#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a short time (FUZZTIME, default 5s),
# one target at a time (go test -fuzz accepts a single target per package run).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-5s}
status=0
while IFS=: read -r file name; do
	dir=$(dirname "$file")
	echo "fuzz ./$dir $name ($FUZZTIME)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "./$dir" >/tmp/fuzz-$$.log 2>&1; then
		cat /tmp/fuzz-$$.log
		status=1
	fi
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' . | sed -E 's#^\./##; s#:func #:#' | sort -u)
rm -f /tmp/fuzz-$$.log
exit $status
