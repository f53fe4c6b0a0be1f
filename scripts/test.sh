#!/usr/bin/env bash
# Runs every check that guards main: formatting, vet, the tests with the
# race detector, and short fuzz runs over document decoding and the HTTP
# API.
set -euo pipefail
cd "$(dirname "$0")/.."
# -trimpath keeps the checkout's path out of what is compiled, so a new
# clone (CI's) reuses the build cache of another: its first run compiled
# this module's packages again, ~30 CPU-seconds of a 2-core machine's
# run. Every go command below shares it, so they share the cache too.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change these files; run gofmt -w on them:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# -parallel 4: the slowest end-to-end tests mostly wait on their own
# servers (leases of real seconds), so more of them run side by side than
# there are cores. Packages run one per core, as go test's default: four
# at once measured no faster here, as the packages that use PostgreSQL
# still take turns for its connections (internal/pgtest/share.go).
# The race detector watches handoff's code and the libraries it shares
# memory with across goroutines (the standard library, pgx, the SQLite
# driver's own package). It is off (-race=false) inside three engines
# that handoff drives from the outside, and that were most of the suite's
# CPU under it: goja (JavaScript), esbuild (bundling) and SQLite's C
# translated to Go with its libc (modernc.org/sqlite/lib,
# modernc.org/libc); handoff's side of every call into them is still
# watched. Not in modernc.org/sqlite itself: its mutexes are
# atomics, and without them the detector loses the order they give and
# reports races that are not there. checkptr, which -race turns on,
# is off for the rest of modernc.org: its checks of the pointer
# arithmetic of C translated to Go cost more than the tests.
# -ldflags=-w: no DWARF in the test binaries, which are run once and
# thrown away; a quarter of each link of the large ones. Stack traces and
# race reports read the symbol table, which stays.
#
# Memory bombs do not run under the race detector (its shadow memory does
# not survive them): the JS budget tests run once more without it, beside
# the race run, whose end-to-end tests leave cores idle while they wait.
# Only the tests whose behaviour depends on it run again: those that
# mention raceDetector or skipBombsUnderRace, found in the source so the
# list keeps itself.
plain=$(mktemp)
trap 'rm -f "$plain"' EXIT
norace=$(awk 'FNR == 1 || /^func / { name = "" }
  /^func Test/ { name = $2; sub(/\(.*/, "", name) }
  /raceDetector|skipBombsUnderRace\(t\)/ && name { print name }' \
  internal/access/*_test.go internal/jsvm/*_test.go | sort -u | paste -sd'|')
if [ -z "$norace" ]; then
  echo "found no test that depends on the race detector in internal/access or internal/jsvm; check scripts/test.sh" >&2
  exit 1
fi
go test -count=1 -timeout 10m -run "^($norace)\$" ./internal/access ./internal/jsvm >"$plain" 2>&1 &
plainpid=$!
# The slowest packages are named first so that they start first, and the
# short ones fill the cores at the end.
slowest="./cmd/handoff ./internal/placement ./store/postgres ./internal/server ./internal/engine ./internal/jsvm ./internal/access ./examples/ci-lane ./store/sqlite"
racerc=0
# shellcheck disable=SC2086
go test -race \
  -gcflags='modernc.org/...=-d=checkptr=0' \
  -gcflags='modernc.org/sqlite/lib=-race=false' -gcflags='modernc.org/libc/...=-race=false' \
  -gcflags='github.com/dop251/goja/...=-race=false' -gcflags='github.com/evanw/esbuild/...=-race=false' \
  -ldflags=-w -count=1 -parallel 4 -timeout 20m $slowest ./... || racerc=$?
plainrc=0
wait "$plainpid" || plainrc=$?
cat "$plain"
if [ "$racerc" -ne 0 ] || [ "$plainrc" -ne 0 ]; then
  exit 1
fi
# Counts of inputs (about ten seconds each on a quiet 2-core machine), not
# durations: Go 1.26's fuzz coordinator can fail a target that found
# nothing when a duration runs out while a worker is mid-input
# (golang/go#75804). FUZZTIME overrides both, e.g. FUZZTIME=60s. They run
# after the race run, not beside it: the end-to-end tests give handlers
# run limits of real seconds, and two fuzz workers beside them on a busy
# machine would only add to the load those limits are measured under.
go test ./internal/engine -run '^$' -fuzz '^FuzzDocument$' -fuzztime "${FUZZTIME:-8000x}"
go test ./internal/server -run '^$' -fuzz '^FuzzHTTP$' -fuzztime "${FUZZTIME:-800x}"
go test ./internal/server -run '^$' -fuzz '^FuzzSiteRedirect$' -fuzztime "${FUZZTIME:-5000x}"
go test ./internal/jsvm -run '^$' -fuzz '^FuzzCompileAndLoad$' -fuzztime "${FUZZTIME:-3000x}"
echo "all checks passed"
