#!/usr/bin/env bash
# bench-cli.sh: whole-process benchmark of storectl against cat on the same
# generated stores (make bench-cli), with a PASS or FAIL for every target.
#
# A row is one generated store (STORES below: a name, the genstore kind,
# size and flags, and whether it also gets cold-cache runs) times one
# command: cat of the store files to /dev/null (the reference), storectl
# scan, scan --jobs 1, verify and, for RocketMQ and RabbitMQ classic
# queues, rebuild-index (dry run),
# each as a whole process: wall time from the clock, CPU seconds and peak
# RSS from /usr/bin/time. Before every warm run the store's files are
# evicted from the page cache and read back front to back
# (internal/cmd/pagecache -evict, then -warm, 1 MiB reads; holes are
# skipped), so warm means what a sequential read leaves in the cache,
# the same before every run: the page cache's folio sizes decide what a
# mapped read costs (on Linux 6.18, the 1 GiB DLedger scan took 0.49-0.57
# CPU s in the small folios genstore's writes and the host's evictions
# left, 0.33-0.43 after a sequential read), and storectl's own cold reads
# leave 2 MiB folios (fileview's MADV_HUGEPAGE) that would make a warm
# row after a cold one cheaper still (RabbitMQ scan 0.31 -> 0.21 CPU s).
# Cold rows evict the store's files before every run
# (internal/cmd/pagecache -evict, posix_fadvise DONTNEED; with BENCH_DROP_CACHES=1
# and the right to, echo 3 > /proc/sys/vm/drop_caches instead, which drops
# every tenant's cache too).
#
# Every figure is the best (lowest) wall time of BENCH_REPS runs (default
# 5), taken in rounds that time every command on every store of a group,
# so a slow spell of a shared host falls on both sides of a scaling ratio;
# the CPU column (user+sys of that run) shows where the host, not the
# code, was the limit. TARGETS below says what each row must reach; the
# SCALING table compares two stores of a group (4 GiB against 1 GiB: time
# 4x within 25% and scan/verify RSS within 1.2x; 40,000 queues against
# 4,000: time at most 10x, within 25%); OUTPUT bounds the size of the
# -o jsonl reports.
#
# Environment: BENCH_STORES (names of STORES to run, default all; the
# groups they belong to are run whole; with BENCH_ONLY=1 only the named
# stores, for a quick look without the scaling pairs), BENCH_REPS, BENCH_DIR (where the
# stores go, default a temp dir; removed after), BENCH_DROP_CACHES,
# BENCH_RESULTS=FILE (keep the raw results) and BENCH_REPORT=FILE (print
# the report of kept results, run nothing).
# It exits non-zero only on a harness error (a build or generation
# failed, a storectl exit code >= 2), never on a missed target.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
REPS=${BENCH_REPS:-5}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench-cli: $TIME (GNU time) is required" >&2; exit 2; }

# STORES: name | group | kind | size | genstore flags (comma-separated) | cold rows (1/0)
# A group is timed in shared rounds and holds the pairs of SCALING.
STORES=(
	"rocketmq-1GiB|rocketmq|rocketmq|1GiB||1"
	"rocketmq-4GiB|rocketmq|rocketmq|4GiB||0"
	"rocketmq-small-1GiB|rocketmq-small|rocketmq|1GiB|-body-size,100-200|1"
	"rocketmq-small-4GiB|rocketmq-small|rocketmq|4GiB|-body-size,100-200|0"
	"rocketmq-q4k|rocketmq-queues|rocketmq|256MiB|-topics,100,-queues-per-topic,40|0"
	"rocketmq-q40k|rocketmq-queues|rocketmq|256MiB|-topics,1000,-queues-per-topic,40|0"
	"rabbitmq-1GiB|rabbitmq|rabbitmq|1GiB||1"
	"rabbitmq-4GiB|rabbitmq|rabbitmq|4GiB||0"
	"rabbitmq-clean-1GiB|rabbitmq-clean|rabbitmq|1GiB|-clean|0"
	"rabbitmq-clean-4GiB|rabbitmq-clean|rabbitmq|4GiB|-clean|0"
	"rabbitmq-small-1GiB|rabbitmq-small|rabbitmq|1GiB|-body-size,100-200|1"
	"rabbitmq-small-4GiB|rabbitmq-small|rabbitmq|4GiB|-body-size,100-200|0"
	"rabbitmq-q4k|rabbitmq-queues|rabbitmq|256MiB|-queues,4000|0"
	"rabbitmq-q40k|rabbitmq-queues|rabbitmq|256MiB|-queues,40000|0"
	"rocketmq-timer-1GiB|rocketmq-timer|rocketmq-timer|1GiB||0"
	"rocketmq-timer-4GiB|rocketmq-timer|rocketmq-timer|4GiB||0"
	"rocketmq-dledger-1GiB|rocketmq-dledger|rocketmq-dledger|1GiB||0"
	"rocketmq-dledger-4GiB|rocketmq-dledger|rocketmq-dledger|4GiB||0"
	"stream-1GiB|stream|rabbitmq-stream|1GiB||0"
	"stream-4GiB|stream|rabbitmq-stream|4GiB||0"
	"quorum-1GiB|quorum|rabbitmq-quorum|1GiB||0"
	"quorum-4GiB|quorum|rabbitmq-quorum|4GiB||0"
)

# TARGETS: store name pattern (a shell glob) | command | metric | bound.
# Metrics: xcat (the ratio cat-time / command-time, at least the bound),
# rss (peak RSS in MiB, below the bound), mbs (MB/s of store bytes, at
# least). Cold rows are the command name with "-cold".
TARGETS=(
	"rocketmq-[14]GiB|scan|xcat|0.8"
	"rocketmq-timer-*|scan|xcat|0.8"
	"rocketmq-dledger-*|scan|xcat|0.8"
	"rocketmq-[14]GiB|verify|xcat|0.5"
	"rocketmq-small-*|scan|xcat|0.5"
	"rocketmq-small-*|verify|xcat|0.3"
	"rocketmq-*|scan-cold|xcat|0.9"
	"rocketmq-*|verify-cold|xcat|0.9"
	"rocketmq-*|scan|rss|100"
	"rocketmq-*|scan-j1|rss|100"
	"rocketmq-*|verify|rss|100"
	"rocketmq-*|rebuild-index|rss|256"
	"rabbitmq-[14]GiB|scan|xcat|0.8"
	"rabbitmq-clean-*|scan|xcat|0.8"
	"rabbitmq-[14]GiB|verify|xcat|0.5"
	"rabbitmq-clean-*|verify|xcat|0.5"
	"rabbitmq-small-*|scan|xcat|0.5"
	"rabbitmq-small-*|verify|xcat|0.3"
	"rabbitmq-*|scan-cold|xcat|0.9"
	"rabbitmq-*|verify-cold|xcat|0.9"
	"rabbitmq-*|scan|rss|100"
	"rabbitmq-*|scan-j1|rss|100"
	"rabbitmq-*|verify|rss|100"
	"rabbitmq-*|rebuild-index|rss|256"
	"stream-*|scan|xcat|0.8"
	"stream-*|scan|rss|100"
	"stream-*|scan-j1|rss|100"
	"stream-*|verify|rss|100"
	"quorum-*|scan|xcat|0.8"
	"quorum-*|scan|rss|100"
	"quorum-*|scan-j1|rss|100"
	"quorum-*|verify|rss|100"
)

# OUTPUT: store name pattern | command | bound in MB: the bytes of the
# command's -o jsonl report (one run, after the timed rounds) must stay
# below it, whatever the store holds: a report's size is its findings',
# not the records' (issue 22). The many-queue stores are left out: verify
# writes a line per queue there (40,000 queues: 11 MB), which is the
# queues', not the records'.
OUTPUT=(
	"rabbitmq-small-*|scan|10"
	"rabbitmq-small-*|verify|10"
	"rabbitmq-[14]GiB|scan|10"
	"rabbitmq-[14]GiB|verify|10"
)

# SCALING: small store | large store | size ratio the time may grow by
# (within 25%) | commands whose peak RSS may grow by at most 1.2x.
SCALING=(
	"rocketmq-1GiB|rocketmq-4GiB|4|scan scan-j1 verify"
	"rocketmq-small-1GiB|rocketmq-small-4GiB|4|scan scan-j1 verify"
	"rocketmq-q4k|rocketmq-q40k|10|"
	"rabbitmq-1GiB|rabbitmq-4GiB|4|scan scan-j1 verify"
	"rabbitmq-clean-1GiB|rabbitmq-clean-4GiB|4|scan scan-j1 verify"
	"rabbitmq-small-1GiB|rabbitmq-small-4GiB|4|scan scan-j1 verify"
	"rabbitmq-q4k|rabbitmq-q40k|10|"
	"rocketmq-timer-1GiB|rocketmq-timer-4GiB|4|scan scan-j1 verify"
	"rocketmq-dledger-1GiB|rocketmq-dledger-4GiB|4|scan scan-j1 verify"
	"stream-1GiB|stream-4GiB|4|scan scan-j1 verify"
	"quorum-1GiB|quorum-4GiB|4|scan scan-j1 verify"
)

# report prints the table of $RESULTS (store, command, bytes, seconds,
# peak RSS KiB, CPU seconds per line) with every target's PASS or FAIL.
report() {
	local tdir
	tdir=$(mktemp -d "${TMPDIR:-/tmp}/storectl-bench-report.XXXXXX")
	printf '%s\n' "${TARGETS[@]}" >"$tdir/targets"
	printf '%s\n' "${SCALING[@]}" >"$tdir/scaling"
	awk -F'\t' -v targets="$tdir/targets" -v scaling="$tdir/scaling" -v outputs="${OUTPUTS:-}" '
function mbs(b, s) { return s > 0 ? b / s / 1e6 : 0 }
# glob matches s against a shell glob of * and [..] classes.
function glob(p, s,   r) {
	r = p; gsub(/\./, "\\.", r); gsub(/\*/, ".*", r)
	return s ~ ("^" r "$")
}
BEGIN {
	while ((getline l < targets) > 0) { split(l, f, "|"); nt++; tstore[nt] = f[1]; tcmd[nt] = f[2]; tmet[nt] = f[3]; tval[nt] = f[4] }
	while ((getline l < scaling) > 0) { split(l, f, "|"); ns++; sa[ns] = f[1]; sb[ns] = f[2]; sr[ns] = f[3]; srss[ns] = f[4] }
	order["cat"] = 1; order["scan"] = 2; order["scan-j1"] = 3; order["verify"] = 4; order["rebuild-index"] = 5
	order["cat-cold"] = 6; order["scan-cold"] = 7; order["verify-cold"] = 8
}
{
	key = $1 SUBSEP $2
	bytes[$1] = $3; secs[key] = $4; rss[key] = $5; cpu[key] = $6
	if (!($1 in seen)) { seen[$1] = 1; stores[++nst] = $1 }
	has[key] = 1
}
END {
	printf "%-20s %-14s %8s %7s %8s %6s %8s  %-30s %s\n", "store", "command", "seconds", "CPU s", "MB/s", "x cat", "RSS MiB", "target", "result"
	for (i = 1; i <= nst; i++) {
		st = stores[i]
		for (c in order) if (has[st, c]) rows[order[c]] = c
		for (o = 1; o <= 8; o++) {
			if (!(o in rows)) continue
			cm = rows[o]; delete rows[o]; key = st SUBSEP cm
			ref = st SUBSEP (cm ~ /-cold$/ ? "cat-cold" : "cat")
			x = (secs[key] > 0 && secs[key] != "nan") ? secs[ref] / secs[key] : 0
			tg = ""; res = ""
			for (t = 1; t <= nt; t++) {
				if (tcmd[t] != cm || !glob(tstore[t], st)) continue
				if (tmet[t] == "xcat") { ok = x >= tval[t]; d = ">= " tval[t] " x cat" }
				if (tmet[t] == "rss") { ok = rss[key] / 1024 < tval[t]; d = "RSS < " tval[t] }
				if (tmet[t] == "mbs") { ok = mbs(bytes[st], secs[key]) >= tval[t]; d = ">= " tval[t] " MB/s" }
				if (secs[key] == "nan") ok = 0
				tg = tg (tg == "" ? "" : ", ") d; res = res (res == "" ? "" : "/") (ok ? "PASS" : "FAIL")
				total++; if (ok) passed++
			}
			if (secs[key] == "nan") res = "ERROR"
			printf "%-20s %-14s %8.3f %7.2f %8.0f %6.2f %8.1f  %-30s %s\n", st, cm, secs[key], cpu[key], mbs(bytes[st], secs[key]), x, rss[key] / 1024, tg, res
		}
	}
	printf "\nscaling (time ratio: the store ratio within 25%%; RSS ratio at most 1.2 where listed)\n"
	printf "%-42s %-14s %8s %8s %8s  %s\n", "stores", "command", "time x", "want x", "RSS x", "result"
	for (s = 1; s <= ns; s++) {
		sa1 = sa[s]; sb1 = sb[s]
		if (!(sa1 in seen) || !(sb1 in seen)) continue
		for (o = 1; o <= 8; o++) for (c in order) if (order[c] == o && c != "cat" && has[sa1, c] && has[sb1, c]) {
			if (secs[sa1, c] == "nan" || secs[sb1, c] == "nan" || secs[sa1, c] <= 0) { printf "%-42s %-14s %8s\n", sa1 " -> " sb1, c, "ERROR"; continue }
			tx = secs[sb1, c] / secs[sa1, c]; rx = rss[sa1, c] > 0 ? rss[sb1, c] / rss[sa1, c] : 0
			# Time may grow by the ratio of the stores, within 25%; for the
			# queue-count pair (same bytes) it may grow by at most that.
			want = sr[s]
			if (bytes[sa1] == bytes[sb1]) ok = tx <= want * 1.25
			else ok = tx >= want * 0.75 && tx <= want * 1.25
			res = "time " (ok ? "PASS" : "FAIL"); total++; if (ok) passed++
			if (index(" " srss[s] " ", " " c " ")) { okr = rx <= 1.2; res = res ", RSS " (okr ? "PASS" : "FAIL"); total++; if (okr) passed++ }
			printf "%-42s %-14s %8.2f %8.2f %8.2f  %s\n", sa1 " -> " sb1, c, tx, want, rx, res
		}
	}
	if (outputs != "" && (getline l < outputs) > 0) {
		printf "\noutput size (-o jsonl report of one run)\n"
		printf "%-20s %-14s %12s %8s  %-30s %s\n", "store", "command", "bytes", "MB", "target", "result"
		do {
			split(l, f, "\t")
			ok = f[3] / 1e6 < f[4]; total++; if (ok) passed++
			printf "%-20s %-14s %12d %8.2f  %-30s %s\n", f[1], f[2], f[3], f[3] / 1e6, "output < " f[4] " MB", ok ? "PASS" : "FAIL"
		} while ((getline l < outputs) > 0)
	}
	printf "\n%d of %d targets met\n", passed, total
}' "$RESULTS"
	rm -rf "$tdir"
}

# BENCH_REPORT=FILE prints the report of a results file kept with
# BENCH_RESULTS=FILE by an earlier run, and nothing else.
if [ -n "${BENCH_REPORT:-}" ]; then
	RESULTS=$BENCH_REPORT
	[ -f "$BENCH_REPORT.output" ] && OUTPUTS=$BENCH_REPORT.output
	report
	exit 0
fi

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
"$GO" build -o "$WORK/pagecache" ./internal/cmd/pagecache
STORECTL=$PWD/bin/storectl
RESULTS=$WORK/results.tsv
OUTPUTS=$WORK/output.tsv
: >"$RESULTS"
: >"$OUTPUTS"
harness_error=0
cold_how="posix_fadvise(DONTNEED) of the store's files"
if [ "${BENCH_DROP_CACHES:-}" = 1 ]; then
	if sync && (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
		cold_how="echo 3 > /proc/sys/vm/drop_caches"
	else
		echo "bench-cli: /proc/sys/vm/drop_caches is not writable here: cold rows evict the store's files instead" >&2
		BENCH_DROP_CACHES=
	fi
fi

sum_bytes() { xargs -0 stat -c %s <"$1" | awk '{s+=$1} END {printf "%.0f\n", s}'; }
warm() { "$WORK/pagecache" -warm -0 <"$1"; }
chill() {
	if [ "${BENCH_DROP_CACHES:-}" = 1 ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches
	else
		"$WORK/pagecache" -evict -0 <"$1"
	fi
}

# one_run NAME COLD CMD...: runs CMD once under GNU time after warming
# (COLD=0) or evicting (COLD=1) the files of $ALLF, and keeps for NAME the
# fastest wall time (BEST), the CPU time of that run (CPU) and the largest
# peak RSS (PEAK).
declare -A BEST CPU PEAK
one_run() {
	local name=$1 cold=$2
	shift 2
	local t m u s rc t0 t1
	[ "${BEST[$name]:-}" = nan ] && return
	if [ "$cold" = 1 ]; then
		chill "$ALLF"
	else
		# The same page cache whatever ran before (see the top).
		chill "$ALLF"
		warm "$ALLF"
	fi
	rc=0
	# Wall time from the clock in ns (GNU time's %e has 10 ms steps).
	t0=$(date +%s%N)
	"$TIME" -f '%M %U %S' -o "$WORK/time.out" "$@" >/dev/null 2>"$WORK/run.err" || rc=$?
	t1=$(date +%s%N)
	if [ "$rc" -ge 2 ]; then
		echo "bench-cli: $name: exit code $rc: $*" >&2
		tail -5 "$WORK/run.err" >&2
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

# gen NAME KIND SIZE FLAGS: generates a store under $WORK/NAME, writes it
# back to disk (else the kernel writes back its gigabytes of dirty pages
# during the timings) and sets TARGET[NAME] (what storectl is given),
# FILES[NAME] (what cat reads), ALL[NAME] (every file: warmed or evicted
# before each run) and BYTES[NAME].
declare -A TARGET FILES ALL BYTES
gen() {
	local name=$1 kind=$2 size=$3 flags=$4 dir=$WORK/$1 out
	echo "== generating $name: $kind $size ${flags//,/ }" >&2
	# shellcheck disable=SC2086
	out=$("$WORK/genstore" -kind "$kind" ${flags//,/ } -size "$size" -out "$dir" -seed 1) || { echo "bench-cli: genstore failed" >&2; exit 2; }
	sync
	TARGET[$name]=$(printf '%s' "$out" | cut -f1)
	FILES[$name]=$WORK/$name.files ALL[$name]=$WORK/$name.all
	if [ "$kind" = rocketmq ]; then
		find "$dir/commitlog" -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rocketmq-timer ]; then # the 5.x timer store: cat reads commitlog + timerlog
		find "$dir/commitlog" "$dir/timerlog" -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rocketmq-dledger ]; then # a DLedger log: cat reads its data files
		find "$dir/dledger-n0/data" -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rabbitmq-stream ]; then # a RabbitMQ stream: cat reads its segments and indexes
		find "$dir" -path '*/stream/*' -type f -print0 | sort -z >"${FILES[$name]}"
	elif [ "$kind" = rabbitmq-quorum ]; then # quorum queues: cat reads the WAL, segments and configs
		find "$dir" -path '*/quorum/*' -type f -print0 | sort -z >"${FILES[$name]}"
	else
		find "$dir" -name '*.rdq' -type f -print0 | sort -z >"${FILES[$name]}"
	fi
	find "$dir" -type f -print0 >"${ALL[$name]}"
	BYTES[$name]=$(sum_bytes "${FILES[$name]}")
}

selected() {
	[ -z "${BENCH_STORES:-}" ] && return 0
	local s
	for s in $BENCH_STORES; do [ "$s" = "$1" ] && return 0; done
	return 1
}

# The groups to run, in STORES order: a group runs whole when any of its
# stores is selected.
groups=()
for def in "${STORES[@]}"; do
	IFS='|' read -r name group kind size flags cold <<<"$def"
	selected "$name" || continue
	[[ " ${groups[*]} " == *" $group "* ]] || groups+=("$group")
done

for group in "${groups[@]}"; do
	members=()
	for def in "${STORES[@]}"; do
		IFS='|' read -r name g kind size flags cold <<<"$def"
		[ "$g" = "$group" ] || continue
		[ "${BENCH_ONLY:-}" = 1 ] && ! selected "$name" && continue
		members+=("$def")
		gen "$name" "$kind" "$size" "$flags"
	done
	echo "== timing $group: $REPS rounds" >&2
	for ((round = 0; round < REPS; round++)); do
		for def in "${members[@]}"; do
			IFS='|' read -r name g kind size flags cold <<<"$def"
			t=${TARGET[$name]} ALLF=${ALL[$name]}
			for c in 0 $([ "$cold" = 1 ] && echo 1); do
				sfx=$([ "$c" = 1 ] && echo -cold || true)
				one_run "$name|cat$sfx" "$c" sh -c 'xargs -0 cat <"$1" >/dev/null' sh "${FILES[$name]}"
				one_run "$name|scan$sfx" "$c" "$STORECTL" scan --progress none -o jsonl "$t"
				one_run "$name|verify$sfx" "$c" "$STORECTL" verify --progress none -o jsonl "$t"
			done
			one_run "$name|scan-j1" 0 "$STORECTL" scan --progress none -o jsonl --jobs 1 "$t"
			if [ "$kind" = rocketmq ] || [ "$kind" = rabbitmq ]; then
				one_run "$name|rebuild-index" 0 "$STORECTL" rebuild-index --progress none -o jsonl "$t"
			fi
		done
	done
	for def in "${members[@]}"; do
		IFS='|' read -r name g kind size flags cold <<<"$def"
		# The report's size, for the stores OUTPUT bounds.
		for o in "${OUTPUT[@]}"; do
			IFS='|' read -r pat cmd bound <<<"$o"
			# shellcheck disable=SC2053
			[[ $name == $pat ]] || continue
			n=$("$STORECTL" "$cmd" --progress none -o jsonl "${TARGET[$name]}" 2>"$WORK/run.err" | wc -c) || true
			n=${n// /}
			printf '%s\t%s\t%s\t%s\n' "$name" "$cmd" "$n" "$bound" >>"$OUTPUTS"
		done
		for key in "${!BEST[@]}"; do
			[ "${key%%|*}" = "$name" ] || continue
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${key#*|}" "${BYTES[$name]}" "${BEST[$key]}" "${PEAK[$key]}" "${CPU[$key]}" >>"$RESULTS"
		done
		rm -rf "${WORK:?}/$name"
	done
done

echo
echo "storectl bench-cli: $(nproc) CPUs, load $(cut -d" " -f1-3 /proc/loadavg), $(uname -sr), $("$GO" env GOVERSION), best of $REPS; warm: evicted, then read back before each run; cold: $cold_how"
[ -n "${BENCH_RESULTS:-}" ] && cp "$RESULTS" "$BENCH_RESULTS" && cp "$OUTPUTS" "$BENCH_RESULTS.output"
report
if [ "$harness_error" -ne 0 ]; then
	echo "bench-cli: harness errors (see above)" >&2
	exit 2
fi
