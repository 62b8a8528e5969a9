#!/usr/bin/env bash
# Installs, from its package-lock.json, Camunda's Node.js external-task client
# that api/camunda_node_test.go drives against a worker. Idempotent and quick
# when already installed; needs node and npm (on this kind of machine).
set -euo pipefail
dir="$(dirname "$0")/../api/testdata/camunda-js"
if [ -d "$dir/node_modules/camunda-external-task-client-js" ]; then
	exit 0
fi
if ! command -v npm >/dev/null; then
	echo "node-deps: npm not found: the Camunda Node.js client test will be skipped" >&2
	exit 0
fi
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
