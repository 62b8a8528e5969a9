#!/usr/bin/env bash
# Runs every Fuzz target briefly (go test -fuzz takes one target at a time).
set -euo pipefail
t=${1:-10s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		echo "fuzz: $pkg $fn ($t)"
		go test -run='^$' -fuzz="^${fn}\$" -fuzztime="$t" "$pkg"
	done
done
