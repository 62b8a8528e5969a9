#!/usr/bin/env bash
# Runs every Fuzz target briefly (go test -fuzz takes one target at a time).
# -fuzzminimizetime=0: a short run spends its time fuzzing, not minimising
# the large seeds (BPMN files) of what it found; each run prints its execs/s.
set -euo pipefail
t=${1:-10s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz: $pkg $fn ($t)"
		go test -run='^$' -fuzz="^${fn}\$" -fuzztime="$t" -fuzzminimizetime=0 "$pkg"
	done
done
