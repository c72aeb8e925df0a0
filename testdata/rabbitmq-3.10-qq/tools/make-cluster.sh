#!/bin/bash
# make-cluster.sh [PHASE] : make the 3-node quorum-queue dataset C1 with
# Debian's rabbitmq-server 3.10.8: nodes rmq310a, rmq310b, rmq310c
# @localhost on 127.0.0.1 (distinct AMQP and distribution ports, one
# private epmd), clustered; then its oracles:
#   datasets/C1.tar.gz     the three node dirs as the brokers left them
#   results/C1/workload/   what the workload did, and each queue's
#                          quorum_status (every member's log index, commit
#                          index, snapshot index) while rmq310c was down
#                          and just before the stop
#   results/C1/oracle/<node>/  radump.escript over every WAL, segment, snapshot
#   results/C1/restart/    the three nodes restarted on fresh copies:
#                          list_queues, quorum_status, every delivery
# Run as root from the repository root: testdata/rabbitmq-3.10-qq/tools/make-cluster.sh
set -euo pipefail
PHASE=${1:-all}   # all | oracle | restart
NAME=C1
SCRATCH=${SCRATCH:-/tmp/qq310}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
OUT=$HERE/..
BIN=/usr/lib/rabbitmq/bin
mkdir -p "$SCRATCH"
go build -o "$SCRATCH/qqwork" "$REPO/internal/cmd/qqwork"
Q="$SCRATCH/qqwork"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
EPMD=$(port)
export ERL_EPMD_PORT=$EPMD ERL_EPMD_ADDRESS=127.0.0.1

NODES=(rmq310a@localhost rmq310b@localhost rmq310c@localhost)
declare -A AMQP DIST
for n in "${NODES[@]}"; do AMQP[$n]=$(port); DIST[$n]=$(port); done
BASE=$SCRATCH/$NAME
RES=$OUT/results/$NAME

# node_env N: the environment of private node N under $BASE/<short name>
node_env() {
  local n=$1 base=$BASE/${1%@*} amqp=${AMQP[$1]} dist=${DIST[$1]}
  mkdir -p "$base/home" "$base/log"
  cat > "$base/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$amqp
loopback_users.guest = true
log.console = false
log.file.level = debug
raft.wal_max_size_bytes = 1048576
raft.segment_max_entries = 1024
EOF
  echo '[].' > "$base/enabled_plugins"
  : > "$base/rabbitmq-env.conf"
  echo QQ310CLUSTERCOOKIE > "$base/home/.erlang.cookie"
  chmod 600 "$base/home/.erlang.cookie"
  ENV=(HOME="$base/home" RABBITMQ_NODENAME="$n" RABBITMQ_MNESIA_BASE="$base/mnesia"
       RABBITMQ_MNESIA_DIR="$base/mnesia/$n" RABBITMQ_LOG_BASE="$base/log" RABBITMQ_CONFIG_FILE="$base/rabbitmq.conf"
       RABBITMQ_CONF_ENV_FILE="$base/rabbitmq-env.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$base/enabled_plugins"
       RABBITMQ_PID_FILE="$base/node.pid" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$amqp"
       RABBITMQ_DIST_PORT="$dist" "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
       "RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}")
}
launch() { node_env "$1"; env "${ENV[@]}" setsid "$BIN/rabbitmq-server" > "$BASE/${1%@*}/server.out" 2>&1 & }
await() {
  node_env "$1"
  for i in $(seq 120); do env "${ENV[@]}" "$BIN/rabbitmqctl" -n "$1" await_startup --timeout 5 >/dev/null 2>&1 && return 0; sleep 1; done
  echo "node $1 did not start"; cat "$BASE/${1%@*}/server.out"; exit 1
}
ctl() { local n=$1; shift; node_env "$n"; env "${ENV[@]}" "$BIN/rabbitmqctl" -n "$n" "$@"; }
queues() { local n=$1; shift; node_env "$n"; env "${ENV[@]}" "$BIN/rabbitmq-queues" -n "$n" "$@"; }
stop() { ctl "$1" stop >/dev/null 2>&1 || true; sleep 1; }
url() { echo "amqp://guest:guest@127.0.0.1:${AMQP[$1]}/"; }
A=${NODES[0]} B=${NODES[1]} C=${NODES[2]}
status() { # status DIR: quorum_status of every queue, through node a
  mkdir -p "$1"
  for q in ca cb cc; do queues "$A" quorum_status "$q" --formatter json > "$1/quorum_status-$q.json" 2>&1 || true; done
}

if [ "$PHASE" = all ]; then
rm -rf "$BASE" "$RES"; mkdir -p "$BASE" "$RES/workload" "$RES/restart" "$OUT/datasets"
W=$RES/workload
step() { echo "$(date -u +%FT%TZ) $*" >> "$W/steps.txt"; }
for n in "${NODES[@]}"; do launch "$n"; done
for n in "${NODES[@]}"; do await "$n"; done
for n in "$B" "$C"; do ctl "$n" stop_app; ctl "$n" join_cluster "$A"; ctl "$n" start_app; done
ctl "$A" cluster_status > "$W/cluster_status.txt"
# ca, cb: declared on a (leader a); cc: declared on b (leader b); 3 members each
step declare
$Q declare -url "$(url "$A")" -queue ca -arg x-quorum-initial-group-size=3
$Q declare -url "$(url "$A")" -queue cb -arg x-quorum-initial-group-size=3 -arg x-delivery-limit=4
$Q declare -url "$(url "$B")" -queue cc -arg x-quorum-initial-group-size=3
step publish
$Q publish -url "$(url "$A")" -queue ca -from 0 -n 1500 > "$W/publish-ca-1.jsonl"
$Q publish -url "$(url "$A")" -queue cb -from 10000 -n 300 > "$W/publish-cb-1.jsonl"
$Q publish -url "$(url "$B")" -queue cc -from 20000 -n 200 > "$W/publish-cc-1.jsonl"
$Q get -url "$(url "$A")" -queue ca -n 1100 -ack 1 > "$W/get-ca-1.jsonl"
# c goes down: a and b (a majority) go on without it, c's replicas lag
step stop "$C"; stop "$C"
$Q publish -url "$(url "$A")" -queue ca -from 1500 -n 400 > "$W/publish-ca-2.jsonl"
$Q publish -url "$(url "$A")" -queue cb -from 10300 -n 200 > "$W/publish-cb-2.jsonl"
$Q get -url "$(url "$A")" -queue ca -n 300 -ack 3 -requeue 1 -discard 1 > "$W/get-ca-2.jsonl"
$Q consume -url "$(url "$A")" -queue cb -prefetch 10 -n 150 -ack 2 -requeue 1 -hold 5 > "$W/consume-cb.jsonl"
$Q get -url "$(url "$B")" -queue cc -n 50 -ack 1 > "$W/get-cc.jsonl"
sleep 6
ctl "$A" list_queues name type messages messages_ready messages_unacknowledged > "$W/list_queues-before-stop.tsv"
status "$W/before-stop"
step stop "$B" "$A"; stop "$B"; stop "$A"
for n in "${NODES[@]}"; do gzip -c "$BASE/${n%@*}"/log/*.log > "$W/broker-log-${n%@*}.txt.gz" 2>/dev/null || true; done
# capture: the three node dirs side by side
CAP=$SCRATCH/$NAME-capture
rm -rf "$CAP"; mkdir -p "$CAP"
for n in "${NODES[@]}"; do cp -a "$BASE/${n%@*}/mnesia/$n" "$CAP/"; done
tar -C "$CAP" -czf "$OUT/datasets/$NAME.tar.gz" "${NODES[@]}"
( cd "$CAP" && find . -type f -printf '%s\t%P\n' | sort -k2 ) > "$RES/files.tsv"
fi

if [ "$PHASE" = all ] || [ "$PHASE" = oracle ]; then
MN=$SCRATCH/$NAME-oracle
rm -rf "$MN" "$RES/oracle"; mkdir -p "$MN"
tar -C "$MN" -xzf "$OUT/datasets/$NAME.tar.gz"
for n in "${NODES[@]}"; do
  O=$RES/oracle/$n
  for sys in quorum coordination; do
    d=$MN/$n/$sys/$n
    [ -d "$d" ] || continue
    mkdir -p "$O/$sys/wal"
    for f in "$d"/*.wal; do [ -f "$f" ] && escript "$HERE/radump.escript" wal "$f" > "$O/$sys/wal/$(basename "$f").jsonl"; done
    for u in "$d"/*/; do
      u=${u%/}; uid=$(basename "$u"); mkdir -p "$O/$sys/$uid"
      cp "$u/config" "$O/$sys/$uid/config.txt" 2>/dev/null || true
      for f in "$u"/*.segment; do [ -f "$f" ] && escript "$HERE/radump.escript" segment "$f" > "$O/$sys/$uid/$(basename "$f").jsonl"; done
      for k in snapshots checkpoints; do
        for s in "$u/$k"/*/; do [ -d "$s" ] && escript "$HERE/radump.escript" snapshot "${s%/}" > "$O/$sys/$uid/$k-$(basename "$s").jsonl"; done
      done
    done
  done
done
fi

if [ "$PHASE" = all ] || [ "$PHASE" = restart ]; then
# restart fresh copies at the paths the data was written at (ra 2.2.0 pins
# the data dir in each replica's config), all three at once (mnesia waits
# for the node that stopped last)
for n in "${NODES[@]}"; do
  b=$BASE/${n%@*}; rm -rf "$b/mnesia" "$b/log"; mkdir -p "$b/mnesia"
  tar -C "$b/mnesia" -xzf "$OUT/datasets/$NAME.tar.gz" "$n"
done
for n in "${NODES[@]}"; do launch "$n"; done
for n in "${NODES[@]}"; do await "$n"; done
sleep 15
ctl "$A" list_queues name type messages messages_ready messages_unacknowledged > "$RES/restart/list_queues.tsv"
status "$RES/restart"
for q in $(awk -F'\t' '$2=="quorum"{print $1}' "$RES/restart/list_queues.tsv"); do
  $Q dump -url "$(url "$A")" -queue "$q" > "$RES/restart/dump-$q.jsonl" 2> "$RES/restart/dump-$q.err" || true
  [ -s "$RES/restart/dump-$q.err" ] || rm -f "$RES/restart/dump-$q.err"
done
for n in "${NODES[@]}"; do
  grep -hE 'wal|segment|snapshot|recover|ra_log|error|could not be restarted' "$BASE/${n%@*}"/log/$n.log > "$RES/restart/recovery-log-${n%@*}.txt" || true
done
for n in "$C" "$B" "$A"; do stop "$n"; done
fi
epmd -port "$EPMD" -kill >/dev/null 2>&1 || true
find "$RES" -name '*.jsonl' -size +256k -exec gzip -f {} \;
echo "made $NAME: $(ls -la "$OUT/datasets/$NAME.tar.gz")"
