#!/bin/sh
# slowloris.sh — build bench/slowloris.c and run it against a `frugal serve` it starts itself
# (head deadline 120 s, so the slow connections stay pending for the whole run).
#
#   sh bench/slowloris.sh MODEL [SLOWLORIS OPTIONS...]
# Example: sh bench/slowloris.sh tests/fixtures/qwen2-tiny --slow 1000 --interval 2
set -u
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}
mkdir -p build
$CC -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread bench/slowloris.c -o build/slowloris || exit 1
[ $# -ge 1 ] || { echo "usage: sh bench/slowloris.sh MODEL [options]"; exit 2; }
MODEL=$1; shift
BIN=${FRUGAL_BIN:-build/frugal}
OUT=$(mktemp); ERR=$(mktemp); CONF=$(mktemp)
printf '{"limits": {"header_timeout_s": 120}}\n' >"$CONF"
"$BIN" serve --model "$MODEL" --port 0 --ledger "" --config "$CONF" >"$OUT" 2>"$ERR" &
PID=$!
i=0; PORT=
while [ $i -lt 600 ] && [ -z "$PORT" ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$OUT")
    kill -0 $PID 2>/dev/null || break
    [ -z "$PORT" ] && sleep 0.1; i=$((i + 1))
done
if [ -z "$PORT" ]; then cat "$ERR"; rm -f "$OUT" "$ERR" "$CONF"; exit 1; fi
grep 'connections:' "$ERR" | sed 's/^[0-9:.]* info  /# server: /'
build/slowloris --port "$PORT" "$@"
rc=$?
kill -TERM $PID; wait $PID
rm -f "$OUT" "$ERR" "$CONF"
exit $rc
