#!/usr/bin/env bash
# Builds the web console's bundle into console/dist, which the worker embeds
# (console/console.go): installs the pinned npm packages of console/web from
# its package-lock.json on first use (and again when the lock changes), then
# bundles with esbuild and writes the bundle's third-party notice beside it
# (console/dist/third-party-notices.txt, served at
# /ui/third-party-notices.txt). Needs node and npm; without them it leaves
# the bundle as it is and says so (the worker then serves a page that says
# how to build it). Quick when nothing changed.
set -euo pipefail
# @carbon/grid and @carbon/layout (under @bpmn-io/form-js) run @ibm/telemetry-js
# on install, which in CI and containers starts a background process that
# sends usage data to IBM; this is its documented opt-out.
export IBM_TELEMETRY_DISABLED=true
root="$(cd "$(dirname "$0")/.." && pwd)"
web="$root/console/web"
out="$root/console/dist"

if ! command -v npm >/dev/null; then
	echo "console.sh: npm not found: the worker is built without its web console (install Node.js and npm, then make console)" >&2
	exit 0
fi
stamp="$web/node_modules/.package-lock.sha256"
want="$(sha256sum "$web/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	npm ci --prefix "$web" --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
fi

# Rebuild only when a source is newer than the bundle.
notice="$out/third-party-notices.txt"
if [ -f "$out/app.js" ] && [ -f "$notice" ] &&
	[ -z "$(find "$web/src" "$web/index.html" "$web/favicon.ico" "$web/package-lock.json" "$web/notices.mjs" -newer "$out/app.js" -print -quit)" ]; then
	exit 0
fi
mkdir -p "$out"
# The metafile lists every input of the bundle (paths relative to $web), from
# which notices.mjs writes the licences of the packages the bundle holds; the
# minified bundle itself keeps no legal comments.
cd "$web"
meta="$web/node_modules/.esbuild-meta.json"
node_modules/.bin/esbuild src/main.js --bundle --minify --format=iife --target=es2020 \
	--legal-comments=none --log-level=warning --outfile="$out/app.js" --metafile="$meta" \
	--loader:.woff=empty --loader:.woff2=empty --loader:.ttf=empty --loader:.eot=empty --loader:.svg=dataurl
node notices.mjs "$meta" "$notice"
cp "$web/index.html" "$web/favicon.ico" "$out/"
echo "console.sh: built console/dist ($(gzip -c "$out/app.js" | wc -c) bytes of JavaScript gzipped)" >&2
