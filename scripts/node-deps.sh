#!/usr/bin/env bash
# Installs, from their package-locks, the Camunda Node.js clients the tests
# drive against a worker: Camunda 7's external-task client
# (api/camunda_node_test.go), Camunda 8's SDK as a Zeebe job worker
# (api/zeebe/camunda8_node_test.go) and as the Starter and the job workers
# of Camunda's realistic benchmark (tools/camundaload, make bench-camunda),
# and Camunda 8.8's REST clients (api/rest/camunda_rest_node_test.go).
# Idempotent and quick when already
# installed; needs node and npm (on this kind of machine).
set -euo pipefail
# No npm package's install-time telemetry (see scripts/console.sh).
export IBM_TELEMETRY_DISABLED=true
root="$(dirname "$0")/.."
install() { # dir, a package whose presence means installed
	if [ -d "$root/$1/node_modules/$2" ]; then
		return 0
	fi
	npm ci --prefix "$root/$1" --no-audit --no-fund --loglevel=error
}
if ! command -v npm >/dev/null; then
	echo "node-deps: npm not found: the Camunda Node.js client tests will be skipped" >&2
	exit 0
fi
install api/testdata/camunda-js camunda-external-task-client-js
install api/zeebe/testdata/camunda8-js @camunda8/sdk
install tools/camundaload/testdata/camunda8-js @camunda8/sdk
install api/rest/testdata/camunda-rest-js @camunda8/orchestration-cluster-api
