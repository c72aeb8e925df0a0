#!/usr/bin/env bash
# make.sh OUT: makes dataset T1 of testdata/rabbitmq-3.10-stream with
# Debian's rabbitmq-server 3.10.8 (osiris 1.3.1): the workload below on a
# fresh private node, a clean stop, the node dir captured, a fresh copy
# restarted at the same path (ra and the stream coordinator keep absolute
# paths) and every stream consumed from its first offset, and the dump
# oracle of osiris131-dump.escript on the captured files.
# Needs: rabbitmq-server 3.10.8, escript (erlang-base), go.
set -euo pipefail
OUT=${1:?output dir}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/stream310.XXXXXX")
export RUN=$SCRATCH/run
mkdir -p "$OUT/datasets" "$OUT/results/T1/workload" "$OUT/results/T1/restart" "$OUT/results/T1/oracle/stream"
(cd "$REPO" && go build -o "$SCRATCH/streamfixture" ./internal/cmd/streamfixture)
F=$SCRATCH/streamfixture WL=$OUT/results/T1/workload
# 1. the workload (ports: a client connection leaves the AMQP port in
#    TIME_WAIT, and the broker does not listen with SO_REUSEADDR, so the
#    restart below uses another one)
export AMQP_PORT=35672
"$HERE/broker.sh" start
"$HERE/broker.sh" ctl add_vhost prod_eu
"$HERE/broker.sh" ctl set_permissions -p prod_eu guest '.*' '.*' '.*'
U=amqp://guest:guest@127.0.0.1:$AMQP_PORT
A=x-queue-type=stream,x-stream-max-segment-size-bytes=150000
"$F" publish -url "$U/" -queue t1a -declare-args "$A" -from 0 -count 300 -batch 1 -out "$WL/publish-t1a.jsonl"
"$F" publish -url "$U/" -queue t1a -declare-args "$A" -from 300 -count 300 -batch 10 -out "$WL/publish-t1a.jsonl"
"$F" publish -url "$U/" -queue t1a -declare-args "$A" -from 600 -count 300 -batch 50 -out "$WL/publish-t1a.jsonl"
"$F" publish -url "$U/" -queue t1b -from 900 -count 200 -batch 25 -out "$WL/publish-t1b.jsonl"
"$F" publish -url "$U/prod_eu" -queue orders_v2 -declare-args x-queue-type=stream,x-stream-max-segment-size-bytes=60000 \
	-from 1100 -count 200 -batch 5 -out "$WL/publish-orders_v2.jsonl"
{ "$HERE/broker.sh" ctl list_queues -p / name type messages; "$HERE/broker.sh" ctl list_queues -p prod_eu name type messages; } \
	2>/dev/null >"$WL/list_queues-before-stop.tsv"
"$HERE/broker.sh" stop
sleep 3
# 2. capture
tar czf "$OUT/datasets/T1.tar.gz" -C "$RUN/mnesia" rmq310@localhost rmq310@localhost-feature_flags
(cd "$RUN/mnesia" && find rmq310@localhost -type f -printf '%s\t%p\n' | sort -k2) >"$OUT/results/T1/files.tsv"
# 3. restart a fresh copy at the same path, consume every stream
rm -rf "$RUN" && mkdir -p "$RUN/mnesia" && tar xzf "$OUT/datasets/T1.tar.gz" -C "$RUN/mnesia"
export AMQP_PORT=35682
U=amqp://guest:guest@127.0.0.1:$AMQP_PORT
R=$OUT/results/T1/restart
"$HERE/broker.sh" start
sleep 12
{ "$HERE/broker.sh" ctl list_queues -p / name type messages; "$HERE/broker.sh" ctl list_queues -p prod_eu name type messages; } 2>/dev/null >"$R/list_queues.tsv"
"$F" dump -url "$U/" -queue t1a -out "$R/dump-t1a.jsonl"
"$F" dump -url "$U/" -queue t1b -out "$R/dump-t1b.jsonl"
"$F" dump -url "$U/prod_eu" -queue orders_v2 -out "$R/dump-orders_v2.jsonl"
"$HERE/broker.sh" stop
grep -E 'osiris|stream|error|warning' "$RUN/log/rmq310@localhost.log" | sed "s#$SCRATCH#<scratch>#g" >"$R/recovery-log.txt" || true
# 4. the dump oracle, on the captured files
X=$SCRATCH/x && mkdir -p "$X" && tar xzf "$OUT/datasets/T1.tar.gz" -C "$X"
for d in "$X"/rmq310@localhost/stream/*; do
	escript "$HERE/osiris131-dump.escript" "$d" >"$OUT/results/T1/oracle/stream/$(basename "$d").jsonl"
done
rm -rf "$SCRATCH"
