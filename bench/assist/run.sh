#!/bin/sh
# run.sh — text-only /v1/assist throughput and latency: the server pinned to 2 cores, the load
# generator on other cores (when the machine has them). Usage: sh bench/assist/run.sh [BUILD]
# [CONNECTIONS] [SECONDS] [SERVER_CPUS] [CLIENT_CPUS]
cd "$(dirname "$0")/../.." || exit 1
B=${1:-build}; C=${2:-16}; D=${3:-10}; SCPU=${4:-0,1}; CCPU=${5:-2-5}
cc -O2 -pthread -o "$B/assist_load" bench/assist/assist_load.c -lm || exit 1
printf '%s' '{"text":"I was charged twice for my card payment of 25 EUR yesterday, can you refund it?"}' >"$B/assist_body.json"
taskset -c "$SCPU" "$B/frugal" serve --model tests/fixtures/qwen2-tiny --port 0 \
    >"$B/assist_serve.out" 2>"$B/assist_serve.err" &
PID=$!
i=0; PORT=
while [ $i -lt 100 ] && [ -z "$PORT" ]; do
    sleep 0.1; i=$((i + 1))
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$B/assist_serve.out")
done
taskset -c "$CCPU" "$B/assist_load" 127.0.0.1 "$PORT" 4 2 "$B/assist_body.json" >/dev/null # warm-up
taskset -c "$CCPU" "$B/assist_load" 127.0.0.1 "$PORT" "$C" "$D" "$B/assist_body.json"
kill -TERM $PID; wait $PID
