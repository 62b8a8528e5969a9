#!/usr/bin/env bash
# Makes sure PostgreSQL (127.0.0.1:5432) and RabbitMQ (127.0.0.1:5672) answer,
# starting the locally installed services when they are stopped. When they
# are not installed, says how to run them with docker compose.
set -uo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
amqp_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

wait_for() { # name check seconds
	for _ in $(seq "$3"); do "$2" && return 0; sleep 1; done
	echo "services: $1 did not come up" >&2
	return 1
}

missing=()
if ! pg_up; then
	if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
		echo "services: starting PostgreSQL"
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
		wait_for PostgreSQL pg_up 30 || exit 1
	else
		missing+=(postgres)
	fi
fi
if ! amqp_up; then
	if command -v rabbitmq-server >/dev/null; then
		echo "services: starting RabbitMQ"
		rabbitmq-server -detached || true
		wait_for RabbitMQ amqp_up 90 || exit 1
	else
		missing+=(rabbitmq)
	fi
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "services: ${missing[*]} not installed here; start them with: docker compose up -d ${missing[*]}" >&2
	exit 1
fi
