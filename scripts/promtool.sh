#!/usr/bin/env bash
# Prints the path of a working promtool, installing it first when missing.
#
# promtool comes from Debian's `prometheus` package. Installing that package
# would pull a web UI's JavaScript and start a Prometheus server, so only the
# promtool binary is taken out of the package (apt-get download + dpkg-deb)
# into the tools directory, $SUTRA_TOOLS_DIR (default ~/.cache/sutra-tools),
# which survives fresh clones of the repository on the same machine.
# Idempotent: when promtool is already on PATH or in the tools directory, it
# prints its path at once and downloads nothing.
set -euo pipefail

tools=${SUTRA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sutra-tools}

works() { "$1" --version >/dev/null 2>&1; }

if p=$(command -v promtool 2>/dev/null) && works "$p"; then
	echo "$p"
	exit 0
fi
if [ -x "$tools/bin/promtool" ] && works "$tools/bin/promtool"; then
	echo "$tools/bin/promtool"
	exit 0
fi

if ! command -v apt-get >/dev/null; then
	echo "promtool.sh: promtool is missing and apt-get is not available; install promtool (Prometheus 2.x) and put it on PATH" >&2
	exit 1
fi

echo "promtool.sh: installing promtool from Debian's prometheus package into $tools/bin" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download() { (cd "$work" && apt-get download prometheus >/dev/null 2>"$work/apt.log"); }
if ! download; then
	# A fresh machine may have no package lists yet.
	if [ "$(id -u)" -ne 0 ]; then
		cat "$work/apt.log" >&2
		echo "promtool.sh: apt-get download failed; run 'apt-get update' as root, or install promtool yourself" >&2
		exit 1
	fi
	apt-get update -qq >/dev/null
	download || { cat "$work/apt.log" >&2; exit 1; }
fi
mkdir -p "$work/x" "$tools/bin"
dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work/x" ./usr/bin/promtool
# A name of its own: two fresh clones may install at once.
install -m 0755 "$work/x/usr/bin/promtool" "$tools/bin/promtool.new.$$"
mv -f "$tools/bin/promtool.new.$$" "$tools/bin/promtool"
works "$tools/bin/promtool" || { echo "promtool.sh: the installed promtool does not run" >&2; exit 1; }
echo "promtool.sh: $("$tools/bin/promtool" --version 2>&1 | head -1)" >&2
echo "$tools/bin/promtool"
