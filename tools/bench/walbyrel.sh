#!/bin/bash
# WAL per step by relation: runs a command (a benchmark) and splits the WAL
# the server wrote meanwhile by the relation each record names, in the
# benchmark's database, per step. Needs pg_waldump and read access to the
# server's pg_wal (a local server, as root or postgres). Relations are
# named by a poll of pg_class while the command runs (the benchmark drops
# its schemas when done); partitions by day are summed under their table.
#
#   tools/bench/walbyrel.sh sutra_bench 20000 bin/sutra-bench -db postgres://postgres@127.0.0.1:5432/sutra_bench \
#     -lanes 16 -pgbench-clients '' -baseline=false -sync-claims=false -outbox-lanes 0 -task-lanes 0 \
#     -job-lanes 0 -latency-loads '' -batch-size 0 -relays 20000
set -euo pipefail
db=$1 steps=$2
shift 2
psql=(psql -h "${PGHOST:-127.0.0.1}" -U "${PGUSER:-postgres}" -At)
pgwal=${PGWAL:-$("${psql[@]}" -c "SHOW data_directory")/pg_wal}
waldump=${WALDUMP:-$(ls /usr/lib/postgresql/*/bin/pg_waldump 2>/dev/null | tail -1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lsn0=$("${psql[@]}" -c "SELECT pg_current_wal_lsn()")
(while :; do
	"${psql[@]}" -d "$db" -F' ' -c "SELECT c.relfilenode, n.nspname || '.' || c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relfilenode <> 0" >>"$tmp/map" 2>/dev/null || true
	sleep 1
done) &
poll=$!
"$@" >&2
kill "$poll"
lsn1=$("${psql[@]}" -c "SELECT pg_current_wal_lsn()")
oid=$("${psql[@]}" -c "SELECT oid FROM pg_database WHERE datname = '$db'")
"$waldump" -p "$pgwal" -s "$lsn0" -e "$lsn1" 2>/dev/null | awk -v oid="$oid" '
	match($0, /len \(rec\/tot\): *[0-9]+\/ *[0-9]+/) {
		t = substr($0, RSTART, RLENGTH); sub(/.*\/ */, "", t)
		key = "(no relation: " $2 ")"
		if (match($0, /rel [0-9]+\/[0-9]+\/[0-9]+/)) {
			split(substr($0, RSTART + 4, RLENGTH - 4), r, "/")
			key = r[2] == oid ? r[3] : "(other databases)"
		}
		print key, t
	}' >"$tmp/recs"
sort -u "$tmp/map" | awk -v steps="$steps" '
	NR == FNR { name[$1] = $2; next }
	{ n = ($1 in name) ? name[$1] : $1; sub(/^[^.]*\./, "", n); gsub(/_[0-9]{8}/, "", n); sum[n] += $2; if (n != "(other databases)") all += $2 }
	END {
		for (n in sum) printf "%8.1f %s\n", sum[n] / steps, n
		printf "%8.1f %s\n", all / steps, "TOTAL bytes of WAL per step (this database and the shared records)"
	}' - "$tmp/recs" | sort -rn
