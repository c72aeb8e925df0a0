#!/bin/bash
# make.sh NAME [PHASE] : make the quorum-queue dataset NAME (R1 R2 R3) with
# Debian's rabbitmq-server 3.10.8 on private ports, then its oracles:
#   datasets/NAME.tar.gz         the node dir(s) as the broker left them
#   results/NAME/workload/       what the workload did (qqwork JSON lines)
#   results/NAME/oracle/         radump.escript over every WAL, segment and snapshot
#   results/NAME/restart/        a restart of a fresh copy: list_queues, then every
#                                delivery of each quorum queue (consumed without ack)
# Run as root from the repository root: testdata/rabbitmq-3.10-qq/tools/make.sh R1
# Needs rabbitmq-server (Debian 12: 3.10.8), erlang-base, go.
set -euo pipefail
NAME=$1
PHASE=${2:-all}   # all | oracle | restart (oracle and restart re-run on datasets/NAME.tar.gz)
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

# node_env N BASE AMQP DIST: the environment of a private node N under BASE
node_env() {
  local n=$1 base=$2 amqp=$3 dist=$4
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
  [ -f "$base/home/.erlang.cookie" ] || echo QQ310COOKIEQQ310 > "$base/home/.erlang.cookie"
  chmod 600 "$base/home/.erlang.cookie"
  ENV=(HOME="$base/home" RABBITMQ_NODENAME="$n" RABBITMQ_MNESIA_BASE="$base/mnesia"
       RABBITMQ_MNESIA_DIR="$base/mnesia/$n" RABBITMQ_LOG_BASE="$base/log" RABBITMQ_CONFIG_FILE="$base/rabbitmq.conf"
       RABBITMQ_CONF_ENV_FILE="$base/rabbitmq-env.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$base/enabled_plugins"
       RABBITMQ_PID_FILE="$base/node.pid" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$amqp"
       RABBITMQ_DIST_PORT="$dist" "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}"
       "RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}")
}
start() { # start N BASE AMQP DIST
  node_env "$@"; local n=$1 base=$2
  env "${ENV[@]}" setsid "$BIN/rabbitmq-server" > "$base/server.out" 2>&1 &
  for i in $(seq 60); do env "${ENV[@]}" "$BIN/rabbitmqctl" -n "$n" await_startup --timeout 5 >/dev/null 2>&1 && return 0; sleep 1; done
  echo "node $n did not start"; cat "$base/server.out"; exit 1
}
ctl() { local n=$1 base=$2 amqp=$3 dist=$4; shift 4; node_env "$n" "$base" "$amqp" "$dist"; env "${ENV[@]}" "$BIN/rabbitmqctl" -n "$n" "$@"; }
stop() { ctl "$@" stop >/dev/null 2>&1 || true; sleep 1; }
killnode() { local base=$2; kill -9 "$(cat "$base/node.pid")"; sleep 2; }

NODE=rmq310@localhost
BASE=$SCRATCH/$NAME
RES=$OUT/results/$NAME
A=$(port); D=$(port)
if [ "$PHASE" = all ]; then
rm -rf "$BASE" "$RES"; mkdir -p "$BASE" "$RES/workload" "$RES/restart" "$OUT/datasets"
URL=amqp://guest:guest@127.0.0.1:$A/
W=$RES/workload
step() { echo "$(date -u +%FT%TZ) $*" >> "$W/steps.txt"; }

case $NAME in
R1) # single node, clean stop: basic.get with ack/requeue/discard, a prefetch consumer,
    # delivery limit, max-length drop-head, purge, per-message TTL, SAC
  start $NODE "$BASE" "$A" "$D"
  $Q declare -url $URL -queue ra
  $Q declare -url $URL -queue rb -arg x-delivery-limit=3
  $Q declare -url $URL -queue rc -arg x-delivery-limit=1
  $Q declare -url $URL -queue rd -arg x-max-length=100
  $Q declare -url $URL -queue re
  $Q declare -url $URL -queue rf
  $Q declare -url $URL -queue rg -arg x-single-active-consumer=true
  step publish; $Q publish -url $URL -queue ra -from 0 -n 3000 > $W/publish-ra.jsonl
  $Q publish -url $URL -queue rb -from 10000 -n 600 > $W/publish-rb.jsonl
  $Q publish -url $URL -queue rc -from 20000 -n 300 > $W/publish-rc.jsonl
  $Q publish -url $URL -queue rd -from 30000 -n 300 > $W/publish-rd.jsonl
  $Q publish -url $URL -queue re -from 40000 -n 200 > $W/publish-re-1.jsonl
  $Q publish -url $URL -queue rf -from 50000 -n 300 -expire-every 4 > $W/publish-rf.jsonl
  $Q publish -url $URL -queue rg -from 60000 -n 400 > $W/publish-rg.jsonl
  step get; $Q get -url $URL -queue ra -n 2000 -ack 6 -requeue 2 -discard 1 > $W/get-ra.jsonl
  step consume; $Q consume -url $URL -queue rb -prefetch 20 -n 500 -ack 3 -requeue 2 -discard 0 -hold 15 > $W/consume-rb.jsonl
  $Q consume -url $URL -queue rb -prefetch 5 -n 200 -ack 1 -requeue 1 -hold 0 -consumer-priority 3 > $W/consume-rb-2.jsonl
  $Q consume -url $URL -queue rc -prefetch 50 -n 400 -ack 0 -requeue 1 -hold 0 > $W/consume-rc.jsonl
  $Q consume -url $URL -queue rd -prefetch 10 -n 30 -ack 1 > $W/consume-rd.jsonl
  step purge; $Q purge -url $URL -queue re > $W/purge-re.jsonl
  $Q publish -url $URL -queue re -from 40200 -n 50 > $W/publish-re-2.jsonl
  $Q get -url $URL -queue rf -n 100 -ack 1 > $W/get-rf.jsonl
  $Q consume -url $URL -queue rg -prefetch 10 -n 120 -ack 4 -requeue 1 -hold 10 > $W/consume-rg-1.jsonl &
  C1=$!
  sleep 1
  $Q consume -url $URL -queue rg -prefetch 10 -n 60 -ack 1 > $W/consume-rg-2.jsonl
  wait $C1
  $Q publish -url $URL -queue ra -from 3000 -n 200 > $W/publish-ra-2.jsonl
  $Q get -url $URL -queue ra -n 150 -ack 1 -requeue 0 -discard 1 > $W/get-ra-2.jsonl
  ctl $NODE "$BASE" "$A" "$D" list_queues name type messages messages_ready messages_unacknowledged > $W/list_queues-before-stop.tsv
  step stop; stop $NODE "$BASE" "$A" "$D"
  ;;
R2) # single node, kill -9 during a flood while a second connection consumes and acks
  start $NODE "$BASE" "$A" "$D"
  $Q declare -url $URL -queue rk
  $Q publish -url $URL -queue rk -from 0 -n 500 > $W/publish-rk.jsonl
  step flood; $Q flood -url $URL -queue rk -from 500 -ack-queue rk > $W/flood.jsonl &
  F=$!
  sleep 6
  step kill; killnode $NODE "$BASE"
  wait $F || true
  ;;
R3) # single node, two small queues whose entries are all in the WAL, clean stop
  start $NODE "$BASE" "$A" "$D"
  $Q declare -url $URL -queue wa
  $Q declare -url $URL -queue wb -arg x-delivery-limit=5
  $Q publish -url $URL -queue wa -from 0 -n 200 > $W/publish-wa.jsonl
  $Q publish -url $URL -queue wb -from 1000 -n 200 > $W/publish-wb.jsonl
  $Q get -url $URL -queue wa -n 80 -ack 3 -requeue 1 -discard 1 > $W/get-wa.jsonl
  $Q consume -url $URL -queue wb -prefetch 10 -n 60 -ack 2 -requeue 1 -hold 5 > $W/consume-wb.jsonl
  $Q publish -url $URL -queue wa -from 200 -n 50 > $W/publish-wa-2.jsonl
  step stop; stop $NODE "$BASE" "$A" "$D"
  ;;
*) echo "unknown dataset $NAME"; exit 2;;
esac

# capture
MN=$BASE/mnesia
tar -C "$MN" -czf "$OUT/datasets/$NAME.tar.gz" "$NODE"
( cd "$MN" && find "$NODE" -type f -printf '%s\t%p\n' | sort -k2 ) > "$RES/files.tsv"
gzip -c "$BASE"/log/*.log > "$W/broker-log.txt.gz" 2>/dev/null || true
fi

if [ "$PHASE" = all ] || [ "$PHASE" = oracle ]; then
MN=$SCRATCH/$NAME-oracle
rm -rf "$MN" "$RES/oracle"; mkdir -p "$MN"
tar -C "$MN" -xzf "$OUT/datasets/$NAME.tar.gz"

# dump oracle with the broker's own ra
O=$RES/oracle
for sys in quorum coordination; do
  d=$MN/$NODE/$sys/$NODE
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

fi

if [ "$PHASE" = all ] || [ "$PHASE" = restart ]; then
# restart a fresh copy, at the path the data was written at: ra 2.2.0
# writes its system config (the absolute data_dir) into each replica's
# config file and reads the member's log from there (ra < 2.4.2)
mkdir -p "$RES/restart"
RB=$BASE
rm -rf "$RB/mnesia" "$RB/log"; mkdir -p "$RB/mnesia"
tar -C "$RB/mnesia" -xzf "$OUT/datasets/$NAME.tar.gz"
A2=$(port); D2=$(port)
start $NODE "$RB" "$A2" "$D2"
sleep 10
ctl $NODE "$RB" "$A2" "$D2" list_queues name type messages messages_ready messages_unacknowledged > "$RES/restart/list_queues.tsv"
for q in $(awk -F'\t' '$2=="quorum"{print $1}' "$RES/restart/list_queues.tsv"); do
  $Q dump -url amqp://guest:guest@127.0.0.1:$A2/ -queue "$q" > "$RES/restart/dump-$q.jsonl" 2> "$RES/restart/dump-$q.err" || true
  [ -s "$RES/restart/dump-$q.err" ] || rm -f "$RES/restart/dump-$q.err"
done
grep -hE 'wal|segment|snapshot|recover|ra_log|error|could not be restarted' "$RB"/log/rmq310@localhost.log > "$RES/restart/recovery-log.txt" || true
gzip -c "$RB"/log/rmq310@localhost.log > "$RES/restart/full-log.txt.gz"
stop $NODE "$RB" "$A2" "$D2"
fi
epmd -port "$EPMD" -kill >/dev/null 2>&1 || true
find "$RES" -name '*.jsonl' -size +256k -exec gzip -f {} \;
echo "made $NAME: $(ls -la "$OUT/datasets/$NAME.tar.gz")"
