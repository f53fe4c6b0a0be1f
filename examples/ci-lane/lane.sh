#!/bin/sh
# lane.sh — a CI runner for the build lane of examples/ci-lane.
#
#   HANDOFF_DEVICE=... lane.sh --app OWNER/NAME [--db builds] [--interval SECONDS] [-- COMMAND [ARG...]]
#
# Takes every `pending-build` document of the database, moves it to
# `building` with compare-and-set on its revision (--if-rev), runs
# COMMAND for it, and writes `built` (exit 0) or `build-failed` (any
# other exit) with compare-and-set on the revision it wrote. When another
# runner, or the owner, moved the build first, the write is a conflict
# (exit 3 of the CLI): this runner loses cleanly, says so, and goes on.
#
# It talks to handoff only through the `handoff` CLI, with the device
# credential in HANDOFF_DEVICE (from `handoff device add`), and the server
# in HANDOFF_SERVER. COMMAND runs with BUILD_ID (the document id) and
# BUILD_DOC (the document as taken, JSON) in its environment; without a
# COMMAND a stand-in that succeeds does the "work". Its output goes to
# stderr; stdout has one line per event:
#
#   took ID | built ID | build-failed ID exit N | lost ID ... | skipped ID ...
#
# Build documents are flat JSON objects (access.js insists), so the status
# field can be rewritten with sed: no JSON tool is needed.
#
# Exit status: 0 when every build it touched went as far as it could
# (losing a race is fine), 1 when a write failed for another reason,
# 2 on bad usage. Set HANDOFF to the CLI's path if `handoff` is not on PATH.

set -u

usage() {
	echo "usage: HANDOFF_DEVICE=... $0 --app OWNER/NAME [--db builds] [--interval SECONDS] [-- COMMAND [ARG...]]" >&2
	exit 2
}

app=""
db="builds"
interval=""
while [ $# -gt 0 ]; do
	case "$1" in
	--app) [ $# -ge 2 ] || usage; app="$2"; shift 2 ;;
	--db) [ $# -ge 2 ] || usage; db="$2"; shift 2 ;;
	--interval) [ $# -ge 2 ] || usage; interval="$2"; shift 2 ;;
	--) shift; break ;;
	*) echo "lane: unknown argument $1" >&2; usage ;;
	esac
done
[ -n "$app" ] || usage
if [ -z "${HANDOFF_DEVICE:-}" ]; then
	echo "lane: set HANDOFF_DEVICE to a device of the builder user (handoff device add NAME --app $app)" >&2
	exit 2
fi
# A token would take precedence over the device in the CLI: the lane acts
# only as the device.
unset HANDOFF_TOKEN
HANDOFF="${HANDOFF:-handoff}"

tmp=$(mktemp "${TMPDIR:-/tmp}/lane.XXXXXX") || exit 1
err=$(mktemp "${TMPDIR:-/tmp}/lane.XXXXXX") || exit 1
trap 'rm -f "$tmp" "$err"' EXIT
trap 'exit 130' INT TERM

# put ID REV BODY: write BODY over revision REV and print the new
# revision. Its status is the CLI's: 3 is a conflict (REV is stale).
put() {
	out=$(printf '%s' "$3" | "$HANDOFF" db put --app "$app" --db "$db" --id "$1" --if-rev "$2" - 2>"$err")
	rc=$?
	[ $rc -eq 0 ] || return $rc
	printf '%s\n' "$out" | sed -n 's/.*"rev":"\([^"]*\)".*/\1/p'
}

# build LINE [COMMAND...]: take, work and finish one build (LINE is its
# NDJSON).
build() {
	line="$1"
	shift
	id=$(printf '%s\n' "$line" | sed -n 's/^{"_id":"\([^"\\]*\)","_rev":"[^"\\]*".*/\1/p')
	rev=$(printf '%s\n' "$line" | sed -n 's/^{"_id":"[^"\\]*","_rev":"\([^"\\]*\)".*/\1/p')
	if [ -z "$id" ] || [ -z "$rev" ]; then
		echo "skipped $(printf '%.60s' "$line"): ids with quotes or backslashes are not handled"
		return 0
	fi
	building=$(printf '%s\n' "$line" | sed 's/"status":"pending-build"/"status":"building"/')

	brev=$(put "$id" "$rev" "$building")
	rc=$?
	if [ $rc -eq 3 ]; then
		echo "lost $id: another runner took it first"
		return 0
	elif [ $rc -ne 0 ] || [ -z "$brev" ]; then
		echo "lane: taking $id failed: $(cat "$err")" >&2
		return 1
	fi
	echo "took $id"

	if [ $# -gt 0 ]; then
		BUILD_ID="$id" BUILD_DOC="$building" "$@" </dev/null >&2
		code=$?
	else
		echo "lane: building $id (stand-in work: pass a command after --)" >&2
		code=0
	fi

	if [ "$code" -eq 0 ]; then status="built"; else status="build-failed"; fi
	final=$(printf '%s\n' "$building" | sed "s/\"status\":\"building\"/\"status\":\"$status\"/; s/}\$/,\"exitCode\":$code}/")
	put "$id" "$brev" "$final" >/dev/null
	rc=$?
	if [ $rc -eq 3 ]; then
		echo "lost $id: it was moved while building; the result ($status) is dropped"
		return 0
	elif [ $rc -ne 0 ]; then
		echo "lane: finishing $id failed: $(cat "$err")" >&2
		return 1
	fi
	if [ "$status" = "built" ]; then echo "built $id"; else echo "build-failed $id exit $code"; fi
	return 0
}

# pass [COMMAND...] takes every pending build once.
pass() {
	failed=0
	if ! "$HANDOFF" db query --app "$app" --db "$db" --field status --key pending-build --ndjson --all >"$tmp" 2>"$err"; then
		echo "lane: listing pending builds failed: $(cat "$err")" >&2
		return 1
	fi
	while IFS= read -r line <&3; do
		[ -n "$line" ] || continue
		build "$line" "$@" || failed=1
	done 3<"$tmp"
	return $failed
}

if [ -z "$interval" ]; then
	pass "$@"
	exit $?
fi
while :; do
	pass "$@" || echo "lane: this pass had failures; trying again in ${interval}s" >&2
	sleep "$interval"
done
