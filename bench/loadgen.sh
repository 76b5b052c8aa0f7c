#!/bin/sh
# loadgen.sh — build bench/loadgen.c and run it against a `frugal serve` it starts itself.
#
#   sh bench/loadgen.sh MODEL [--serve "SERVER OPTIONS"] [LOADGEN OPTIONS...]
#
# Starts build/frugal serve --model MODEL --port 0 (plus the --serve options), waits until it
# listens, runs build/loadgen --url ... --model NAME with the remaining options, prints the
# report, then stops the server with SIGTERM. With MODEL "-" no server is started and the
# loadgen options must include --url (to measure a server you run yourself).
# Example: sh bench/loadgen.sh tests/fixtures/qwen2-tiny --rate 20 --duration 20
set -u
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}
mkdir -p build
$CC -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread bench/loadgen.c -o build/loadgen -lm || exit 1
[ $# -ge 1 ] || { echo "usage: sh bench/loadgen.sh MODEL|- [--serve \"OPTS\"] [loadgen options]"; exit 2; }
MODEL=$1; shift
SERVE_OPTS=
if [ "${1:-}" = "--serve" ]; then SERVE_OPTS=$2; shift 2; fi
if [ "$MODEL" = "-" ]; then exec build/loadgen "$@"; fi
BIN=${FRUGAL_BIN:-build/frugal}
OUT=$(mktemp); ERR=$(mktemp)
# shellcheck disable=SC2086
"$BIN" serve --model "$MODEL" --port 0 $SERVE_OPTS >"$OUT" 2>"$ERR" &
PID=$!
i=0; PORT=
while [ $i -lt 600 ] && [ -z "$PORT" ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$OUT")
    kill -0 $PID 2>/dev/null || break
    [ -z "$PORT" ] && sleep 0.1; i=$((i + 1))
done
if [ -z "$PORT" ]; then cat "$ERR"; rm -f "$OUT" "$ERR"; exit 1; fi
NAME=$(sed -n 's/.*serving \([^ ]*\) on .*/\1/p' "$ERR" | head -n 1)
grep 'serving' "$ERR" | sed 's/^[0-9:.]* info  /# server: /'
build/loadgen --url "http://127.0.0.1:$PORT" --model "${NAME:-model}" "$@"
rc=$?
kill -TERM $PID; wait $PID
rm -f "$OUT" "$ERR"
exit $rc
