#!/usr/bin/env bash
# compare-outputs.sh OLD_REV NEW_REV: proves a refactor changed no output.
#
# It builds storectl at both revisions (git archive into temp dirs; NEW_REV
# "." builds the working tree as it is, uncommitted edits included), then
# runs the same command list with each binary on every fixture in testdata/
# (both broker kinds), each unpacked afresh into the same temp path so that
# paths in the output agree, and on generated stores (COMPARE_GEN). It
# normalises the timing fields (duration_ms, now_ms) and diffs stdout, stderr and
# the exit code of every command, and salvage's messages.jsonl plus the
# names and SHA-256 of its body files.
#
# Commands per target (OLD and NEW run the same list):
#   scan -o jsonl, scan --records -o jsonl, verify -o jsonl (also with
#   --broker-version 3.13.7), truncate, rebuild-index, harden (also with
#   --broker-version 4.0.2) (dry runs, -o jsonl),
#   salvage --select all and --select lost,at-risk,unreferenced,after-corruption
#   (-o jsonl; messages.jsonl and the bodies are compared),
#   and for RabbitMQ nodes scan -o jsonl of each vhost dir and msg store dir.
# Add to COMMANDS below to compare more.
#
# Environment:
#   COMPARE_FIXTURES  "all" (default) or a space-separated list of tarball
#                     name globs (e.g. "crash* rmq533-*") to restrict fixtures
#   COMPARE_GEN       generated stores, space-separated kind:size[:flags...]
#                     items (genstore flags after the size, comma-separated),
#                     e.g. "rabbitmq:1GiB rabbitmq:1GiB:-clean rocketmq:1GiB";
#                     default none ("" keeps make-style quick runs quick)
#   COMPARE_DIR       parent of the work dir (default $TMPDIR or /tmp)
#   COMPARE_KEEP=1    keep the work dir (outputs in WORK/out/{old,new}/...)
#
# Exit status: 0 identical, 1 differences (a summary and the first lines of
# each diff are printed), 2 harness error (build, unpack, generation).
set -euo pipefail

usage() { echo "usage: $0 OLD_REV NEW_REV   (NEW_REV . = working tree)" >&2; exit 2; }
[ $# -eq 2 ] || usage
OLD_REV=$1
NEW_REV=$2
cd "$(dirname "$0")/.."
REPO=$PWD
GO=${GO:-go}

WORK=$(mktemp -d "${COMPARE_DIR:-${TMPDIR:-/tmp}}/storectl-compare.XXXXXX")
cleanup() { [ "${COMPARE_KEEP:-}" = 1 ] && echo "kept $WORK" >&2 || rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "compare-outputs: $*" >&2; exit 2; }

# build REV NAME: builds storectl (and genstore) of REV into $WORK/bin/NAME.
build() {
	local rev=$1 name=$2 src
	mkdir -p "$WORK/bin/$name"
	if [ "$rev" = . ]; then
		src=$REPO
	else
		src=$WORK/src/$name
		mkdir -p "$src"
		git -C "$REPO" archive --format=tar "$rev" | tar -C "$src" -xf - || die "git archive $rev failed"
	fi
	(cd "$src" && "$GO" build -o "$WORK/bin/$name/storectl" ./cmd/storectl) || die "build of $rev failed"
	if [ "$name" = new ]; then
		(cd "$src" && "$GO" build -o "$WORK/bin/genstore" ./internal/cmd/genstore) || die "genstore build of $rev failed"
	fi
}
echo "building $OLD_REV and $NEW_REV" >&2
build "$OLD_REV" old
build "$NEW_REV" new

# Fixtures: every tarball of both broker kinds, and the loose .rdq files.
fixtures=()
want() {
	local base=$1 g
	[ "${COMPARE_FIXTURES:-all}" = all ] && return 0
	for g in $COMPARE_FIXTURES; do
		# shellcheck disable=SC2053
		[[ $base == $g ]] && return 0
	done
	return 1
}
while IFS= read -r f; do
	want "$(basename "$f")" && fixtures+=("$f")
done < <(cd "$REPO" && find testdata -name '*.tar.gz' -not -path '*/fuzz/*' | sort)
while IFS= read -r f; do
	want "$(basename "$f")" && fixtures+=("$f")
done < <(cd "$REPO" && find testdata/rabbitmq-mc -name '*.rdq' | sort)

# Generated stores are made once (by NEW's genstore) and read by both.
gens=()
for g in ${COMPARE_GEN:-}; do
	IFS=: read -r kind size flags <<<"$g"
	gdir=$WORK/gen/$(echo "$g" | tr ':,' '__')
	mkdir -p "$(dirname "$gdir")"
	echo "generating $kind $size ${flags//,/ }" >&2
	# shellcheck disable=SC2086
	"$WORK/bin/genstore" -kind "$kind" -size "$size" -out "$gdir" ${flags//,/ } >/dev/null || die "genstore $g failed"
	gens+=("$gdir")
done

# targets DIR: the paths the commands are given for an unpacked fixture or
# generated store, one per line: "node PATH" (a whole data dir, every
# command), "sub PATH" (a RabbitMQ vhost or msg store dir: scan only),
# "file PATH" (a loose .rdq: scan only).
targets() {
	local d=$1 n v
	if [ -d "$d/commitlog" ]; then echo "node $d"; return; fi
	if [ -d "$d/store/commitlog" ]; then echo "node $d/store"; return; fi
	# a RocketMQ 5.x DLedger store root (dledger-<id>/ instead of commitlog/)
	if compgen -G "$d/dledger-*/data" >/dev/null; then echo "node $d"; return; fi
	if compgen -G "$d/store/dledger-*/data" >/dev/null; then echo "node $d/store"; return; fi
	if [ -d "$d/msg_stores" ] || [ -d "$d/msg_store_persistent" ]; then
		n=$d
	else
		n=$(find "$d" -maxdepth 2 -type d -name msg_stores -printf '%h\n' | sort | head -1)
		[ -n "$n" ] || n=$(find "$d" -maxdepth 3 -type d -name msg_store_persistent -printf '%h\n' | sort | head -1)
	fi
	if [ -n "$n" ]; then
		echo "node $n"
		for v in $(find "$n" -mindepth 1 -maxdepth 3 -type d -path '*/vhosts/*' -prune | sort); do
			echo "sub $v"
			[ -d "$v/msg_store_persistent" ] && echo "sub $v/msg_store_persistent"
		done
		return
	fi
	find "$d" -name '*.rdq' | sort | sed 's/^/file /'
}

# COMMANDS: label|args (TARGET and OUT are replaced). "node" targets run all
# of them, "sub" and "file" targets only those marked scan.
COMMANDS=(
	"scan|scan -o jsonl TARGET"
	"scan-records|scan --records -o jsonl TARGET"
	"node:verify|verify -o jsonl TARGET"
	"node:verify-3.13.7|verify -o jsonl --broker-version 3.13.7 TARGET"
	"node:truncate|truncate -o jsonl TARGET"
	"node:rebuild-index|rebuild-index -o jsonl TARGET"
	"node:harden|harden -o jsonl TARGET"
	"node:harden-4.0.2|harden -o jsonl --broker-version 4.0.2 TARGET"
	"node:salvage-all|salvage -o jsonl --select all --out OUT TARGET"
	"node:salvage-lost|salvage -o jsonl --select lost,at-risk,unreferenced,after-corruption --out OUT TARGET"
)

# normalise: the timing fields of the JSONL (the run's duration, the
# clock a RocketMQ timer-store verdict is taken at) become 0.
TIMING_FIELDS=${COMPARE_TIMING_FIELDS:-"duration_ms now_ms"}
normalise() {
	local f expr=()
	for f in $TIMING_FIELDS; do expr+=(-e "s/\"$f\":[0-9]+/\"$f\":0/g"); done
	sed -E "${expr[@]}"
}

# run_all SIDE ROOT SRC: unpacks SRC (tarball, .rdq or generated dir) under
# ROOT and runs every command with SIDE's binary; outputs go to
# $WORK/out/SIDE/<fixture>/<target#>.<label>.{out,err,rc}.
run_all() {
	local side=$1 root=$2 src=$3 name data t kind path i=0 spec label args out odir
	name=$(basename "$src")
	name=${name%.tar.gz}
	data=$root/$name
	case $src in
	*.tar.gz)
		rm -rf "$data"; mkdir -p "$data"
		tar -C "$data" -xzf "$REPO/$src" || die "unpack $src failed" ;;
	*.rdq)
		rm -rf "$data"; mkdir -p "$data"
		cp "$REPO/$src" "$data/" ;;
	*) data=$src ;;
	esac
	odir=$WORK/out/$side/$name
	mkdir -p "$odir"
	while read -r kind path; do
		i=$((i + 1))
		for spec in "${COMMANDS[@]}"; do
			label=${spec%%|*}
			args=${spec#*|}
			case $label in
			node:*) [ "$kind" = node ] || continue; label=${label#node:} ;;
			esac
			out=$WORK/salvage-out
			rm -rf "$out"
			args=${args//TARGET/$path}
			args=${args//OUT/$out}
			local base=$odir/$i.$label rc=0
			echo "$kind $path" >"$base.target"
			# shellcheck disable=SC2086
			(cd "$root" && "$WORK/bin/$side/storectl" --progress none $args) >"$base.raw" 2>"$base.err" || rc=$?
			normalise <"$base.raw" >"$base.out"
			rm -f "$base.raw"
			echo "$rc" >"$base.rc"
			if [ -f "$out/messages.jsonl" ]; then
				normalise <"$out/messages.jsonl" >"$base.messages.jsonl"
				(cd "$out" && find . -type f -not -name messages.jsonl -print0 | sort -z | xargs -0r sha256sum) >"$base.files"
			fi
		done
	done < <(targets "$data")
	# A generated store is shared by both sides; fixtures are unpacked per side.
	case $src in *.tar.gz|*.rdq) rm -rf "$data" ;; esac
}

for side in old new; do
	echo "running $side on ${#fixtures[@]} fixtures and ${#gens[@]} generated stores" >&2
	for f in "${fixtures[@]}"; do run_all "$side" "$WORK/data" "$f"; done
	for g in "${gens[@]}"; do run_all "$side" "$WORK/gen" "$g"; done
done

# Compare.
ndiff=0
nfiles=0
while IFS= read -r rel; do
	nfiles=$((nfiles + 1))
	if [ ! -f "$WORK/out/old/$rel" ]; then
		echo "ONLY IN NEW: $rel"; ndiff=$((ndiff + 1)); continue
	fi
	if ! cmp -s "$WORK/out/old/$rel" "$WORK/out/new/$rel"; then
		ndiff=$((ndiff + 1))
		echo "DIFF: $rel ($(cat "$WORK/out/new/${rel%.*}.target" 2>/dev/null || true))"
		diff "$WORK/out/old/$rel" "$WORK/out/new/$rel" | cut -c1-300 | head -20 || true
	fi
done < <(cd "$WORK/out/new" && find . -type f | sed 's|^\./||' | sort)
while IFS= read -r rel; do
	[ -f "$WORK/out/new/$rel" ] || { echo "ONLY IN OLD: $rel"; ndiff=$((ndiff + 1)); }
done < <(cd "$WORK/out/old" && find . -type f | sed 's|^\./||' | sort)

nrc=$(find "$WORK/out/new" -name '*.rc' | wc -l)
echo "compared $nfiles output files ($nrc command runs) of $OLD_REV and $NEW_REV: $ndiff differ"
[ "$ndiff" -eq 0 ]
