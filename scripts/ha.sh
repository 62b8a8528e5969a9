#!/usr/bin/env bash
# The highly available forms of the worker's two engines, on this machine
# beside the ordinary services (scripts/services.sh), for make test-ha and
# for trying failovers by hand:
#
#   a RabbitMQ cluster of three nodes, sutra-ha1..3@localhost, AMQP on
#   127.0.0.1:5681-5683 (Erlang distribution on 25681-25683), one shared
#   Erlang cookie, no management plugin; virtual host "ha" for guest;
#
#   a pg_auto_failover formation (Debian's postgresql-15-auto-failover,
#   installed on first use as scripts/promtool.sh installs promtool): the
#   monitor on 127.0.0.1:5690, a primary and a synchronous standby on 5691
#   and 5692 (which is which changes with every failover), database
#   "sutra", trust authentication on loopback. PostgreSQL refuses to run as
#   root: pg_autoctl runs as the postgres user.
#
# Usage:
#   scripts/ha.sh up     start whatever of it is not running (idempotent;
#                        also restarts a node that was killed)
#   scripts/ha.sh down   stop all of it and remove its state
#   scripts/ha.sh env    print the worker's SUTRA_AMQP_URL and
#                        SUTRA_DATABASE_URL for it
#   scripts/ha.sh leader QUEUE
#                        the number (1-3) of the RabbitMQ node leading
#                        quorum queue QUEUE of virtual host "ha"
#   scripts/ha.sh primary
#                        the number (1-2) of the PostgreSQL primary
#   scripts/ha.sh pid rabbit N | pg N
#                        the process group of RabbitMQ node N (1-3) or of
#                        PostgreSQL node N (1-2: its pg_autoctl and postgres),
#                        for a test that kills one
#
# State (data, logs, process ids) lives in $SUTRA_HA_DIR (default
# /tmp/sutra-ha). Every process is started in a process group of its own
# whose id is kept there; down ends those groups and nothing else.
set -euo pipefail

dir=${SUTRA_HA_DIR:-/tmp/sutra-ha}
vhost=ha
rabbit_ports=(5681 5682 5683)
pg_monitor_port=5690
pg_ports=(5691 5692)
pgbin=/usr/lib/postgresql/15/bin

log() { echo "ha: $*" >&2; }

# alive GROUP_FILE: the process group recorded there still has a member.
alive() { [ -f "$1" ] && kill -0 -- "-$(cat "$1")" 2>/dev/null; }

# spawn GROUP_FILE LOG CMD...: CMD in a new session (and process group)
# whose id is recorded.
spawn() {
	local group=$1 out=$2
	shift 2
	setsid "$@" >>"$out" 2>&1 </dev/null &
	echo $! >"$group"
}

# wait_until SECONDS WHAT CMD...: CMD succeeds within SECONDS.
wait_until() {
	local seconds=$1 what=$2
	shift 2
	for _ in $(seq "$((seconds * 2))"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	log "$what did not happen within ${seconds}s"
	return 1
}

# --- RabbitMQ -------------------------------------------------------------------

rabbit_node() { echo "sutra-ha$1@localhost"; }

# rabbit_env N CMD...: CMD with node N's environment.
rabbit_env() {
	local n=$1 d="$dir/rabbit$1" port=${rabbit_ports[$(($1 - 1))]}
	shift
	env HOME="$dir/rabbit-home" RABBITMQ_NODENAME="$(rabbit_node "$n")" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$((port + 20000))" \
		RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/beam.pid" \
		RABBITMQ_CONFIG_FILE="$d/rabbitmq" RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
		RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
		ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" "$@"
}

ctl() { # ctl N ARGS...: rabbitmqctl against node N; its chatter to $dir/rabbitmqctl.log
	local n=$1
	shift
	rabbit_env "$n" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$(rabbit_node "$n")" "$@" 2>>"$dir/rabbitmqctl.log"
}

rabbit_start() {
	local n=$1 d="$dir/rabbit$1"
	alive "$d/group" && return 0
	mkdir -p "$d/mnesia" "$d/log" "$dir/rabbit-home"
	if [ ! -f "$dir/rabbit-home/.erlang.cookie" ]; then
		head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/rabbit-home/.erlang.cookie"
		chmod 400 "$dir/rabbit-home/.erlang.cookie"
	fi
	echo "[]." >"$d/enabled_plugins"
	: >"$d/rabbitmq-env.conf"
	echo "[]." >"$d/advanced.config"
	cat >"$d/rabbitmq.conf" <<-EOF
		listeners.tcp.default = 127.0.0.1:${rabbit_ports[$((n - 1))]}
		cluster_partition_handling = pause_minority
	EOF
	log "starting RabbitMQ node $(rabbit_node "$n") on ${rabbit_ports[$((n - 1))]}"
	spawn "$d/group" "$d/log/console.log" "$0" rabbit-server "$n"
	wait_until 120 "RabbitMQ node $n's listener" port_open "${rabbit_ports[$((n - 1))]}"
	ctl "$n" await_startup >/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

rabbit_up() {
	local fresh=0
	[ -d "$dir/rabbit1/mnesia" ] || fresh=1
	for n in 1 2 3; do rabbit_start "$n"; done
	if [ "$fresh" = 1 ] || ! ctl 1 cluster_status 2>/dev/null | grep -q "$(rabbit_node 3)"; then
		for n in 2 3; do
			if ! ctl 1 cluster_status | grep -q "$(rabbit_node "$n")"; then
				log "joining $(rabbit_node "$n") to the cluster"
				ctl "$n" stop_app >/dev/null
				ctl "$n" reset >/dev/null
				ctl "$n" join_cluster "$(rabbit_node 1)" >/dev/null
				ctl "$n" start_app >/dev/null
			fi
		done
	fi
	ctl 1 add_vhost "$vhost" >/dev/null || true
	ctl 1 set_permissions -p "$vhost" guest '.*' '.*' '.*' >/dev/null
}

# --- PostgreSQL (pg_auto_failover) ----------------------------------------------

install_pg_auto_failover() {
	command -v pg_autoctl >/dev/null && return 0
	if ! command -v apt-get >/dev/null || [ "$(id -u)" -ne 0 ]; then
		log "pg_autoctl is missing: install Debian's postgresql-15-auto-failover as root"
		exit 1
	fi
	log "installing postgresql-15-auto-failover"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-auto-failover >"$dir/apt.log" 2>&1; then
		# A fresh machine may have no package lists yet.
		apt-get update -q >>"$dir/apt.log" 2>&1
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-auto-failover >>"$dir/apt.log" 2>&1 || {
			cat "$dir/apt.log" >&2
			exit 1
		}
	fi
}

# pg_autoctl keeps its configuration and state under the XDG directories:
# in the state dir, so that down removes them too.
pg_env() {
	echo PATH="$pgbin:$PATH" PG_CONFIG="$pgbin/pg_config" XDG_RUNTIME_DIR="$dir/pg/run" \
		XDG_CONFIG_HOME="$dir/pg/config" XDG_DATA_HOME="$dir/pg/share"
}

# shellcheck disable=SC2046 # pg_env's words are VAR=value pairs without spaces
as_postgres() { runuser -u postgres -- env $(pg_env) "$@"; }

monitor_url() { echo "postgres://autoctl_node@127.0.0.1:$pg_monitor_port/pg_auto_failover?sslmode=disable"; }

# pg_node NAME PGDATA PORT CREATE_ARGS...: create (once) and run one
# pg_autoctl node.
pg_node() {
	local name=$1 pgdata=$2 port=$3
	shift 3
	alive "$dir/pg/$name.group" && return 0
	if [ ! -f "$pgdata/postgresql.conf" ]; then
		log "creating pg_auto_failover $name on $port"
		as_postgres pg_autoctl create "$@" --pgdata "$pgdata" --pgport "$port" --hostname 127.0.0.1 \
			--listen 127.0.0.1 --auth trust --no-ssl >>"$dir/pg/$name.log" 2>&1 || {
			tail -20 "$dir/pg/$name.log" >&2
			exit 1
		}
	fi
	log "running pg_auto_failover $name on $port"
	# shellcheck disable=SC2046
	spawn "$dir/pg/$name.group" "$dir/pg/$name.log" runuser -u postgres -- env $(pg_env) pg_autoctl run --pgdata "$pgdata"
	wait_until 120 "PostgreSQL $name's start" pg_isready -q -h 127.0.0.1 -p "$port"
}

pg_up() {
	install_pg_auto_failover
	mkdir -p "$dir/pg/run" "$dir/pg/config" "$dir/pg/share"
	chown -R postgres: "$dir/pg"
	pg_node monitor "$dir/pg/monitor" "$pg_monitor_port" monitor
	# Fail over within seconds of a node's loss rather than the defaults'
	# minute: health checks every second, a node unhealthy after 3 s, and
	# the standby promoted 5 s after the primary was told to demote (the
	# default waits 30 s for a primary that is gone). An old primary that
	# is only cut off cannot commit meanwhile: its synchronous standby
	# stopped replicating from it.
	local setting
	for setting in health_check_period=1000 health_check_timeout=1000 health_check_max_retries=1 \
		health_check_retry_delay=500 node_considered_unhealthy_timeout=3000 primary_demote_timeout=5000; do
		as_postgres psql -q -h 127.0.0.1 -p "$pg_monitor_port" -d pg_auto_failover -U postgres \
			-c "ALTER SYSTEM SET pgautofailover.${setting%=*} = ${setting#*=}" >/dev/null
	done
	as_postgres psql -q -h 127.0.0.1 -p "$pg_monitor_port" -d pg_auto_failover -U postgres -c "SELECT pg_reload_conf()" >/dev/null
	local fresh=0
	[ -f "$dir/pg/node1/postgresql.conf" ] || fresh=1
	for n in 1 2; do
		pg_node "node$n" "$dir/pg/node$n" "${pg_ports[$((n - 1))]}" postgres --monitor "$(monitor_url)" --dbname sutra \
			--name "node$n" --candidate-priority 50 --replication-quorum true
		if [ "$fresh" = 1 ] && [ "$n" = 1 ]; then
			# The first node must be the primary before the second is created.
			wait_until 120 "node1 as the primary" primary_is 1
		fi
	done
	# Up once the standby is synchronous: the primary's commits wait for it.
	wait_until 180 "a synchronous standby" synchronous
}

# primary_is N: node N is the formation's primary.
primary_is() {
	[ "$(as_postgres psql -qAt -h 127.0.0.1 -p "${pg_ports[$(($1 - 1))]}" -U postgres -d sutra -c 'SELECT NOT pg_is_in_recovery()')" = t ]
}

# synchronous: the primary names a standby and one streams as sync or quorum.
synchronous() {
	local port
	for port in "${pg_ports[@]}"; do
		[ "$(as_postgres psql -qAt -h 127.0.0.1 -p "$port" -U postgres -d sutra -c "SELECT NOT pg_is_in_recovery()
			AND current_setting('synchronous_standby_names') <> ''
			AND EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))" 2>/dev/null)" = t ] && return 0
	done
	return 1
}

# --- commands -------------------------------------------------------------------

stop_group() { # GROUP_FILE
	local f=$1 g
	[ -f "$f" ] || return 0
	g=$(cat "$f")
	if kill -0 -- "-$g" 2>/dev/null; then
		kill -TERM -- "-$g" 2>/dev/null || true
		for _ in $(seq 40); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.25; done
		kill -KILL -- "-$g" 2>/dev/null || true
	fi
	rm -f "$f"
}

case "${1:-}" in
rabbit-server) # the foreground of node $2, as spawned by rabbit_start
	rabbit_env "$2" /usr/lib/rabbitmq/bin/rabbitmq-server
	;;
up)
	mkdir -p "$dir"
	chmod 755 "$dir"
	rabbit_up
	pg_up
	log "up: $(sed 's/^/export /' < <("$0" env) | tr '\n' ' ')"
	;;
down)
	for f in "$dir"/pg/node1.group "$dir"/pg/node2.group "$dir"/pg/monitor.group "$dir"/rabbit{1,2,3}/group; do
		stop_group "$f"
	done
	rm -rf "$dir"
	log "down"
	;;
env)
	urls=()
	for p in "${rabbit_ports[@]}"; do urls+=("amqp://guest:guest@127.0.0.1:$p/$vhost"); done
	echo "SUTRA_AMQP_URL=$(
		IFS=,
		echo "${urls[*]}"
	)"
	echo "SUTRA_DATABASE_URL=postgres://postgres@127.0.0.1:${pg_ports[0]},127.0.0.1:${pg_ports[1]}/sutra?target_session_attrs=read-write&connect_timeout=2&sslmode=disable"
	echo "SUTRA_HA_MONITOR_URL=postgres://postgres@127.0.0.1:$pg_monitor_port/pg_auto_failover?sslmode=disable"
	;;
leader) # leader QUEUE: the number of the RabbitMQ node leading quorum queue QUEUE
	for n in 1 2 3; do
		if out=$(ctl "$n" -p "$vhost" -q --no-table-headers list_queues name leader); then
			node=$(awk -v q="${2:?queue}" '$1 == q { print $2 }' <<<"$out")
			[ -n "$node" ] && { node=${node%@*}; echo "${node#sutra-ha}"; exit 0; }
		fi
	done
	echo "ha: no node knows queue $2" >&2
	exit 1
	;;
primary) # the number of the PostgreSQL node that is the primary
	for n in 1 2; do primary_is "$n" 2>/dev/null && { echo "$n"; exit 0; }; done
	echo "ha: no primary" >&2
	exit 1
	;;
pid)
	case "${2:-}" in
	rabbit) cat "$dir/rabbit${3:?node 1-3}/group" ;;
	pg) cat "$dir/pg/node${3:?node 1-2}.group" ;;
	*)
		echo "usage: $0 pid rabbit N|pg N" >&2
		exit 2
		;;
	esac
	;;
*)
	echo "usage: $0 up|down|env|leader QUEUE|primary|pid rabbit N|pid pg N" >&2
	exit 2
	;;
esac
