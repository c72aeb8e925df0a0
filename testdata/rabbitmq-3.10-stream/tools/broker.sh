#!/usr/bin/env bash
# broker.sh start|stop|ctl ARGS...: a private Debian rabbitmq-server 3.10.8
# node for making the stream fixtures. Everything lives under $RUN
# (mnesia, logs, config, HOME); ports from $AMQP_PORT, $DIST_PORT,
# $EPMD_PORT (never the defaults 5672/25672/4369).
set -euo pipefail
: "${RUN:?set RUN to the scratch dir of the node}"
AMQP_PORT=${AMQP_PORT:-35672} DIST_PORT=${DIST_PORT:-35673} EPMD_PORT=${EPMD_PORT:-34369}
NODE=${NODE:-rmq310@localhost}
mkdir -p "$RUN/home" "$RUN/log" "$RUN/mnesia"
[ -f "$RUN/rabbitmq.conf" ] || printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users.guest = true\nlog.console = false\nlog.file.level = debug\n' "$AMQP_PORT" >"$RUN/rabbitmq.conf"
[ -f "$RUN/enabled_plugins" ] || echo '[].' >"$RUN/enabled_plugins"
: >"$RUN/rabbitmq-env.conf"
export HOME=$RUN/home RABBITMQ_NODENAME=$NODE RABBITMQ_MNESIA_BASE=$RUN/mnesia RABBITMQ_LOG_BASE=$RUN/log \
	RABBITMQ_CONFIG_FILE=$RUN/rabbitmq.conf RABBITMQ_CONF_ENV_FILE=$RUN/rabbitmq-env.conf \
	RABBITMQ_ENABLED_PLUGINS_FILE=$RUN/enabled_plugins RABBITMQ_PID_FILE=$RUN/node.pid \
	RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$AMQP_PORT RABBITMQ_DIST_PORT=$DIST_PORT \
	ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1 \
	RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
	RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
BIN=/usr/lib/rabbitmq/bin
case $1 in
start)
	setsid "$BIN/rabbitmq-server" >"$RUN/server.out" 2>&1 &
	for _ in $(seq 60); do
		"$BIN/rabbitmqctl" -n "$NODE" await_startup --timeout 5 >/dev/null 2>&1 && exit 0
		sleep 1
	done
	echo "broker did not start" >&2; exit 1 ;;
stop)
	"$BIN/rabbitmqctl" -n "$NODE" stop || true
	epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true ;;
ctl)
	shift; exec "$BIN/rabbitmqctl" -n "$NODE" "$@" ;;
esac
