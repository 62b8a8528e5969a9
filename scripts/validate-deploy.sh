#!/usr/bin/env bash
# Validates deploy/k8s (as `kubectl kustomize` renders it, or file by file
# without kubectl) and docker-compose.yml against the Kubernetes API schemas
# and the compose specification, offline (scripts/validate-deploy/validate.mjs).
# Its npm packages are installed once, from package-lock.json, into
# $SUTRA_TOOLS_DIR/validate-deploy (default ~/.cache/sutra-tools), and again
# only when the lock file changes.
set -euo pipefail
# No npm package's install-time telemetry (see scripts/console.sh).
export IBM_TELEMETRY_DISABLED=true
cd "$(dirname "$0")/.."

tools=${SUTRA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sutra-tools}
dir=$tools/validate-deploy
src=scripts/validate-deploy

command -v node >/dev/null && command -v npm >/dev/null || {
	echo "validate-deploy.sh: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
	exit 1
}

# One run at a time per tools directory: parallel clones of the repository
# (make test in each) share it, and an install half done by one would be
# read by the other.
mkdir -p "$tools"
exec 9>"$tools/validate-deploy.lock"
flock 9

lock=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$dir/.lock-sha256" 2>/dev/null)" != "$lock" ] || [ ! -d "$dir/node_modules" ]; then
	echo "validate-deploy.sh: installing the validator's npm packages into $dir" >&2
	mkdir -p "$dir"
	cp "$src/package.json" "$src/package-lock.json" "$dir/"
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	echo "$lock" >"$dir/.lock-sha256"
fi
cp "$src/validate.mjs" "$dir/validate.mjs"

if command -v kubectl >/dev/null; then
	kubectl kustomize deploy/k8s >"$dir/k8s.yaml"
	k8s=(--k8s "$dir/k8s.yaml")
else
	echo "validate-deploy.sh: no kubectl: validating deploy/k8s file by file (the generated ConfigMap is not checked)" >&2
	k8s=()
	for f in deploy/k8s/*.yaml; do
		[ "$(basename "$f")" = kustomization.yaml ] || k8s+=(--k8s "$f")
	done
fi
# The highly available engines (deploy/k8s/ha) are custom resources: their
# operators' CRDs (CloudNativePG's Cluster, the RabbitMQ cluster operator's
# RabbitmqCluster, with their licences) are kept beside the repository, in
# the steering repository's shared/crds, or in $SUTRA_CRD_DIR.
crds=${SUTRA_CRD_DIR:-$(cd .. && pwd)/shared/crds}
ha=()
if [ -f "$crds/postgresql.cnpg.io_clusters.yaml" ] && [ -f "$crds/rabbitmq.com_rabbitmqclusters.yaml" ]; then
	ha=(--crd "$crds/postgresql.cnpg.io_clusters.yaml" --crd "$crds/rabbitmq.com_rabbitmqclusters.yaml")
	if command -v kubectl >/dev/null; then
		kubectl kustomize deploy/k8s/ha >"$dir/k8s-ha.yaml"
		ha+=(--k8s "$dir/k8s-ha.yaml")
	else
		for f in deploy/k8s/ha/*.yaml; do
			[ "$(basename "$f")" = kustomization.yaml ] || ha+=(--k8s "$f")
		done
	fi
else
	echo "validate-deploy.sh: NOT VALIDATED: deploy/k8s/ha (no CRDs in $crds; set SUTRA_CRD_DIR)" >&2
fi
node "$dir/validate.mjs" "${k8s[@]}" "${ha[@]}" --compose docker-compose.yml
