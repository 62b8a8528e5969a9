#!/usr/bin/env bash
# Prints the path of a working headless Chromium for the console's browser
# tests (console/browser_test.go), installing Debian's `chromium` package
# first when it is missing (as root; otherwise it says what to run).
# Idempotent: when Chromium is already installed it prints its path at once.
set -euo pipefail

works() { "$1" --version >/dev/null 2>&1; }

for c in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
	[ -n "$c" ] || continue
	if p=$(command -v "$c" 2>/dev/null) && works "$p"; then
		echo "$p"
		exit 0
	fi
done

if ! command -v apt-get >/dev/null || [ "$(id -u)" -ne 0 ]; then
	echo "chromium.sh: Chromium is missing; install Debian's chromium package (apt-get install chromium) or set CHROMIUM; the console's browser tests will be skipped" >&2
	exit 0
fi

echo "chromium.sh: installing Debian's chromium package" >&2
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
if ! install; then
	# A fresh machine may have no package lists yet.
	apt-get update -qq >/dev/null
	install
fi
p=$(command -v chromium)
works "$p" || { echo "chromium.sh: the installed chromium does not run" >&2; exit 1; }
echo "chromium.sh: $("$p" --version 2>&1 | head -1)" >&2
echo "$p"
