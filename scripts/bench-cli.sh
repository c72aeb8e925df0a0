#!/usr/bin/env bash
# bench-cli.sh: whole-process benchmark of storectl against cat on the same
# generated stores (make bench-cli). For each kind (BENCH_KINDS, default
# "rocketmq rabbitmq rabbitmq-clean": the last is the RabbitMQ store with
# the files a clean stop leaves, genstore -clean) and size (BENCH_SIZES,
# default "1GiB 4GiB") it generates a store with
# internal/cmd/genstore, warms the page cache, and times (wall seconds
# from the clock, peak RSS and CPU time from /usr/bin/time):
#   cat of the store files to /dev/null      (the reference)
#   storectl scan (default --jobs = CPUs)     target >= 0.5 x cat
#   storectl scan --jobs 1                    target >= 0.3 x cat
#   storectl verify                           target >= 0.25 x cat
#   storectl rebuild-index (dry run, RocketMQ) target >= 1000 MB/s
# The RocketMQ 5.x kinds rocketmq-timer (timer messages, their timerlog,
# wheel and checkpoint: cat reads commitlog + timerlog) and
# rocketmq-dledger (a DLedger log: cat reads its data files) hold scan to
# >= 0.8 x cat, the others as above.
# and, once, rebuild-index on a 64 MiB RocketMQ store: its fixed cost
# (building the files the format preallocates), so the scaling table can
# also show rebuild-index's time less that cost.
# Peak RSS of scan and verify must stay under 100 MiB and grow by at most
# 20% from 1 GiB to 4 GiB; time must grow 4x (within 25%).
# Every figure is the best (lowest) wall time of BENCH_REPS runs (default 9:
# with 5, three runs in five had one scaling ratio at 2.94-2.99, a 1 GiB
# command of 0.2-0.3 s whose best of 5 still caught a slow spell of the
# shared 2-CPU host),
# taken in rounds that interleave the sizes (see the loop below); the page
# cache is warmed again before each run (kernels with proactive
# reclaim, e.g. DAMON, drop idle file pages within seconds). The CPU column
# (user+sys of that run) shows where the machine, not the code, was the
# limit (other load on the host inflates wall times but not CPU time).
# It prints a table with MB/s (1 MB = 10^6 bytes), the ratio to cat, peak
# RSS and PASS/FAIL per target. It exits non-zero only on a harness error
# (build or generation failed, storectl exit code >= 2), never on a missed
# target. Stores go to $BENCH_DIR (default: a temp dir) and are removed.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
SIZES=${BENCH_SIZES:-"1GiB 4GiB"}
KINDS=${BENCH_KINDS:-"rocketmq rabbitmq rabbitmq-clean rocketmq-timer rocketmq-dledger"}
REPS=${BENCH_REPS:-9}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench-cli: $TIME (GNU time) is required" >&2; exit 2; }

if [ -n "${BENCH_DIR:-}" ]; then
	mkdir -p "$BENCH_DIR"
	WORK=$(mktemp -d "$BENCH_DIR/storectl-bench.XXXXXX")
else
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/storectl-bench.XXXXXX")
fi
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

"$GO" build -o bin/storectl ./cmd/storectl
"$GO" build -o "$WORK/genstore" ./internal/cmd/genstore
STORECTL=$PWD/bin/storectl
RESULTS=$WORK/results.tsv
: >"$RESULTS"
harness_error=0

# bytes of the files a list holds
sum_bytes() { xargs -0 stat -c %s <"$1" | awk '{s+=$1} END {printf "%.0f\n", s}'; }

# one_run NAME CMD...: runs CMD once under GNU time after warming the page
# cache with $WARM, and keeps for NAME the fastest wall time (BEST), the
# CPU time of that run (CPU) and the largest peak RSS (PEAK).
declare -A BEST CPU PEAK
one_run() {
	local name=$1; shift
	local t m u s rc t0 t1
	[ "${BEST[$name]:-}" = nan ] && return
	warm "$WARM"
	rc=0
	# Wall time from the clock in ns (GNU time's %e has 10 ms steps,
	# 5% of a 0.2 s run); RSS and CPU time from GNU time.
	t0=$(date +%s%N)
	"$TIME" -f '%M %U %S' -o "$WORK/time.out" "$@" >/dev/null 2>"$WORK/$name.err" || rc=$?
	t1=$(date +%s%N)
	if [ "$rc" -ge 2 ]; then
		echo "bench-cli: $name: exit code $rc: $*" >&2
		tail -5 "$WORK/$name.err" >&2
		harness_error=1
		BEST[$name]=nan PEAK[$name]=0 CPU[$name]=0
		return
	fi
	read -r m u s < <(tail -n1 "$WORK/time.out")
	t=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", (b-a)/1e9}')
	if [ -z "${BEST[$name]:-}" ] || awk -v a="$t" -v b="${BEST[$name]}" 'BEGIN{exit !(a<b)}'; then
		BEST[$name]=$t
		CPU[$name]=$(awk -v u="$u" -v s="$s" 'BEGIN{print u+s}')
	fi
	[ "$m" -gt "${PEAK[$name]:-0}" ] && PEAK[$name]=$m
	return 0
}

warm() { xargs -0 cat <"$1" >/dev/null; }

# gen NAME KIND SIZE: generates a store under $WORK/NAME, writes it back
# to disk (else the kernel writes back its gigabytes of dirty pages during
# the timings) and sets TARGET[NAME], FILES[NAME] (what cat reads),
# ALL[NAME] (what the commands read: the page cache is warmed with it) and
# BYTES[NAME].
declare -A TARGET FILES ALL BYTES
gen() {
	local name=$1 kind=$2 size=$3 dir=$WORK/$1 out
	local args=(-kind "$kind")
	[ "$kind" = rabbitmq-clean ] && args=(-kind rabbitmq -clean)
	echo "== generating $kind $size" >&2
	out=$("$WORK/genstore" "${args[@]}" -size "$size" -out "$dir" -seed 1) || { echo "bench-cli: genstore failed" >&2; exit 2; }
	sync
	TARGET[$name]=$(printf '%s' "$out" | cut -f1)
	FILES[$name]=$WORK/$name.files ALL[$name]=$WORK/$name.all
	if [ "$kind" = rocketmq ]; then
		find "$dir/commitlog" -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rocketmq-timer ]; then
		find "$dir/commitlog" "$dir/timerlog" -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rocketmq-dledger ]; then
		find "$dir/dledger-n0/data" -type f -print0 | sort -z >"${FILES[$name]}"
	else
		find "$dir" -name '*.rdq' -type f -print0 | sort -z >"${FILES[$name]}"
	fi
	find "$dir" -type f -print0 >"${ALL[$name]}"
	BYTES[$name]=$(sum_bytes "${FILES[$name]}")
}

# For each kind, every size's store is generated first, then the rounds
# run: each round times every command once on every size, so the REPS
# runs of one figure are spread over the whole timing of the kind, and a
# slow spell of the host (other tenants, writeback) falls on both sizes of
# a scaling ratio alike instead of on one of them.
for kind in $KINDS; do
	for size in $SIZES; do
		gen "$kind-$size" "$kind" "$size"
	done
	# rebuild-index's fixed cost: whatever the store size it builds the
	# files the format preallocates (a 420 MB index file, a 5.7 MB file
	# per consume queue) and reads the existing ones. A 64 MiB store with
	# the same topics and queues measures it, so the scaling table can
	# show the time that grows with the store apart from it.
	[ "$kind" = rocketmq ] && gen rocketmq-fixed rocketmq 64MiB
	echo "== timing $kind: $SIZES, $REPS rounds" >&2
	for ((round = 0; round < REPS; round++)); do
		for size in $SIZES; do
			n=$kind-$size t=${TARGET[$kind-$size]} WARM=${ALL[$kind-$size]}
			one_run "$n-cat" sh -c 'xargs -0 cat <"$1" >/dev/null' sh "${FILES[$n]}"
			one_run "$n-scan" "$STORECTL" scan --progress none -o jsonl "$t"
			one_run "$n-scan-j1" "$STORECTL" scan --progress none -o jsonl --jobs 1 "$t"
			one_run "$n-verify" "$STORECTL" verify --progress none -o jsonl "$t"
			if [ "$kind" = rocketmq ]; then
				one_run "$n-rebuild-index" "$STORECTL" rebuild-index --progress none -o jsonl "$t"
			fi
		done
		if [ "$kind" = rocketmq ]; then
			WARM=${ALL[rocketmq-fixed]}
			one_run rocketmq-fixed "$STORECTL" rebuild-index --progress none -o jsonl "${TARGET[rocketmq-fixed]}"
		fi
	done
	for size in $SIZES; do
		n=$kind-$size
		cmds=(cat scan scan-j1 verify)
		[ "$kind" = rocketmq ] && cmds+=(rebuild-index)
		for c in "${cmds[@]}"; do
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$size" "$c" "${BYTES[$n]}" "${BEST[$n-$c]}" "${PEAK[$n-$c]}" "${CPU[$n-$c]}" >>"$RESULTS"
		done
		if [ "$kind" = rocketmq ] && [ "$size" = "${SIZES%% *}" ]; then
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$size" rebuild-fixed "${BYTES[rocketmq-fixed]}" "${BEST[rocketmq-fixed]}" "${PEAK[rocketmq-fixed]}" "${CPU[rocketmq-fixed]}" >>"$RESULTS"
		fi
		rm -rf "${WORK:?}/$n"
	done
	rm -rf "$WORK/rocketmq-fixed"
done

echo
echo "storectl bench-cli: $(nproc) CPUs, load $(cut -d" " -f1-3 /proc/loadavg), $(uname -sr), go $("$GO" env GOVERSION), best of $REPS, page cache warm"
awk -F'\t' -v sizes="$SIZES" '
function mbs(b, s) { return s > 0 ? b / s / 1e6 : 0 }
{
	key = $1 SUBSEP $2 SUBSEP $3
	bytes[key] = $4; secs[key] = $5; rss[key] = $6; cpu[key] = $7
	if (!($1 in seenk)) { seenk[$1] = 1; kinds[++nk] = $1 }
	if (!(($1 SUBSEP $3) in seenc)) { seenc[$1 SUBSEP $3] = 1; cmds[$1, ++nc[$1]] = $3 }
}
END {
	ns = split(sizes, sz, " ")
	printf "%-14s %-5s %-14s %8s %8s %9s %7s %9s  %-26s %s\n", "kind", "size", "command", "seconds", "CPU s", "MB/s", "x cat", "RSS MiB", "target", "result"
	for (k = 1; k <= nk; k++) for (s = 1; s <= ns; s++) for (c = 1; c <= nc[kinds[k]]; c++) {
		kd = kinds[k]; cm = cmds[kd, c]; key = kd SUBSEP sz[s] SUBSEP cm
		if (!(key in secs)) continue
		catk = kd SUBSEP sz[s] SUBSEP "cat"
		r = secs[key] > 0 ? secs[catk] / secs[key] : 0
		tg = ""; ok = ""
		if (cm == "scan") { tg = ">= 0.50 x cat"; ok = r >= 0.5 }
		# The 5.x stores (#20): the timer store scan (commitlog + timerlog) and
		# the DLedger scan are held to 0.8 x cat.
		if (cm == "scan" && kd ~ /^rocketmq-(timer|dledger)$/) { tg = ">= 0.80 x cat"; ok = r >= 0.8 }
		if (cm == "scan-j1") { tg = ">= 0.30 x cat"; ok = r >= 0.3 }
		if (cm == "verify") { tg = ">= 0.25 x cat"; ok = r >= 0.25 }
		if (cm == "rebuild-index") { tg = ">= 1000 MB/s"; ok = mbs(bytes[key], secs[key]) >= 1000 }
		if (cm == "rebuild-fixed") tg = "(64 MiB store: fixed cost)"
		res = tg == "" ? "" : (ok ? "PASS" : "FAIL")
		if ((cm == "scan" || cm == "scan-j1" || cm == "verify") && sz[s] == sz[1]) {
			tg = tg ", RSS < 100"; res = res "/" (rss[key] / 1024 < 100 ? "PASS" : "FAIL")
		}
		if (cm == "rebuild-fixed") { res = ""; r = 0 }
		if (secs[key] == "nan") res = "ERROR"
		printf "%-14s %-5s %-14s %8.3f %8.2f %9.0f %7.2f %9.1f  %-26s %s\n", kd, sz[s], cm, secs[key], cpu[key], mbs(bytes[key], secs[key]), r, rss[key] / 1024, tg, res
	}
	if (ns < 2) exit
	printf "\nscaling %s -> %s (time ratio target: size ratio within 25%%; RSS within 20%%)\n", sz[1], sz[ns]
	printf "%-14s %-14s %10s %10s %10s %8s  %s\n", "kind", "command", "time x", "want x", "RSS x", "", "result"
	for (k = 1; k <= nk; k++) for (c = 1; c <= nc[kinds[k]]; c++) {
		kd = kinds[k]; cm = cmds[kd, c]; a = kd SUBSEP sz[1] SUBSEP cm; b = kd SUBSEP sz[ns] SUBSEP cm
		if (!(a in secs) || !(b in secs)) continue
		# A harness error (nan): no ratio, and no verdict (awk compares NaN as true).
		if (secs[a] == "nan" || secs[b] == "nan") { printf "%-14s %-14s %10s %10s %10s %8s  %s\n", kd, cm, "nan", "", "", "", "ERROR"; continue }
		if (secs[a] <= 0) continue
		want = bytes[b] / bytes[a]; tx = secs[b] / secs[a]; rx = rss[a] > 0 ? rss[b] / rss[a] : 0
		ok = tx >= want * 0.75 && tx <= want * 1.25
		res = "time " (ok ? "PASS" : "FAIL")
		if (cm == "cat") res = "(the reference: no target)"
		# The RSS target is for scan and verify (rebuild-index stages files).
		if (cm == "scan" || cm == "scan-j1" || cm == "verify") res = res ", RSS " (rx <= 1.2 ? "PASS" : "FAIL")
		printf "%-14s %-14s %10.2f %10.2f %10.2f %8s  %s\n", kd, cm, tx, want, rx, "", res
		# rebuild-index less its fixed cost (the time of the 64 MiB store).
		f = kd SUBSEP sz[1] SUBSEP "rebuild-fixed"
		if (cm == "rebuild-index" && (f in secs) && secs[a] > secs[f] && bytes[a] > bytes[f]) {
			tx = (secs[b] - secs[f]) / (secs[a] - secs[f]); want = (bytes[b] - bytes[f]) / (bytes[a] - bytes[f])
			ok = tx >= want * 0.75 && tx <= want * 1.25
			printf "%-14s %-14s %10.2f %10.2f %10s %8s  %s\n", kd, "rebuild-fixed", tx, want, "", "", "time less fixed cost " (ok ? "PASS" : "FAIL")
		}
	}
}' "$RESULTS"
if [ "$harness_error" -ne 0 ]; then
	echo "bench-cli: harness errors (see above)" >&2
	exit 2
fi
