#!/usr/bin/env bash
# Makes sure PostgreSQL and RabbitMQ answer, starting the locally installed
# services when they are stopped. When they are not installed, says how to
# run them with docker compose. Where they are: SUTRA_TEST_DATABASE_URL and
# SUTRA_TEST_AMQP_URL (make test), else SUTRA_DATABASE_URL and SUTRA_AMQP_URL
# (make demo), else 127.0.0.1:5432 and 127.0.0.1:5672.
set -uo pipefail

# host_port URL DEFAULT_PORT prints "host port" of a postgres:// or amqp:// URL.
host_port() {
	local rest=${1#*://}
	rest=${rest#*@}
	rest=${rest%%/*}
	rest=${rest%%\?*}
	local host=${rest%:*} port=$2
	[ "$host" != "$rest" ] && port=${rest##*:}
	echo "${host:-127.0.0.1} $port"
}
read -r pg_host pg_port < <(host_port "${SUTRA_TEST_DATABASE_URL:-${SUTRA_DATABASE_URL:-postgres://127.0.0.1:5432/}}" 5432)
read -r amqp_host amqp_port < <(host_port "${SUTRA_TEST_AMQP_URL:-${SUTRA_AMQP_URL:-amqp://127.0.0.1:5672/}}" 5672)

pg_up() { pg_isready -q -h "$pg_host" -p "$pg_port" 2>/dev/null || (exec 3<>"/dev/tcp/$pg_host/$pg_port") 2>/dev/null; }
amqp_up() { (exec 3<>"/dev/tcp/$amqp_host/$amqp_port") 2>/dev/null; }

wait_for() { # name check seconds
	for _ in $(seq "$3"); do "$2" && return 0; sleep 1; done
	echo "services: $1 did not come up" >&2
	return 1
}

missing=()
if ! pg_up; then
	if [ "$pg_port" = 5432 ] && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
		echo "services: starting PostgreSQL"
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
		wait_for PostgreSQL pg_up 30 || exit 1
	else
		missing+=(postgres)
	fi
fi
if ! amqp_up; then
	if [ "$amqp_port" = 5672 ] && command -v rabbitmq-server >/dev/null; then
		echo "services: starting RabbitMQ"
		rabbitmq-server -detached || true
		wait_for RabbitMQ amqp_up 90 || exit 1
	else
		missing+=(rabbitmq)
	fi
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "services: ${missing[*]} not answering and not installed here; start them with docker compose and point the worker at them:" >&2
	echo "  docker compose up -d --wait postgres rabbitmq" >&2
	echo "  export SUTRA_DATABASE_URL=postgres://postgres@127.0.0.1:55432/sutra SUTRA_AMQP_URL=amqp://guest:guest@127.0.0.1:55672/   # make demo" >&2
	echo "  export SUTRA_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:55432/sutra_test SUTRA_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:55672/   # make test" >&2
	exit 1
fi
