#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a short budget (FUZZTIME, default
# 20000x executions), one target at a time (go test -fuzz accepts a single
# target per package run).
#
# The default budget is a count, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# the deadline races a busy worker (golang/go#75804, fixed in Go 1.27), which
# made CI fail on a loaded machine with no failing input. A count has no
# deadline to race; FUZZ_TIMEOUT bounds each target's wall time instead.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20000x}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-5m}
status=0
while IFS=: read -r file name; do
	dir=$(dirname "$file")
	echo "fuzz ./$dir $name ($FUZZTIME)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -timeout "$FUZZ_TIMEOUT" "./$dir" >/tmp/fuzz-$$.log 2>&1; then
		cat /tmp/fuzz-$$.log
		status=1
	fi
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' . | sed -E 's#^\./##; s#:func #:#' | sort -u)
rm -f /tmp/fuzz-$$.log
exit $status
