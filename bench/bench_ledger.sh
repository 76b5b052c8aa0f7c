#!/bin/sh
# bench_ledger.sh — what the ledger's durability costs (docs/METERING.md, "Ledger"). Builds
# bench/bench_ledger.c against build/libfrugal.a and runs, for synchronous=normal and =full:
#   - throughput: requests/s the writer sustains (each = a provisional row, then its final row
#     with 4 stage cells), producers never waiting;
#   - latency: queue-to-durable at 1,000 and 5,000 requests/s (open loop, 64 clients);
# then the real server on the tiny fixture, POST /v1/completions max_tokens 1 in a closed loop
# with 8 clients, with the ledger off (--ledger "") and on (normal, full): requests/s and p50/p99.
# The ledger files go to BENCH_DIR (default $TMPDIR/frugal-bench-ledger); prints the figures.
#
#   sh bench/bench_ledger.sh            # ~3 minutes
#   BENCH_SECONDS=3 BENCH_REPS=1 sh bench/bench_ledger.sh
#   BENCH_ONLY=server sh bench/bench_ledger.sh      # the server part only
set -e
cd "$(dirname "$0")/.."
[ -n "${BENCH_NO_MAKE:-}" ] || make -s build/libfrugal.a build/frugal
LIB=build/libfrugal.a
PKGS="libpcre2-8 libcjson libmicrohttpd sqlite3 libcurl zlib tesseract lept libpng libjpeg libwebp \
 libtiff-4 cairo pocketsphinx sphinxbase sndfile samplerate vorbisfile"
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter -O2 -g \
 -pthread -Iinclude -Isrc"
LIBS="$(pkg-config --libs $PKGS) -lutf8proc -lopenblas -lm -pthread"
# shellcheck disable=SC2086
cc $CFLAGS bench/bench_ledger.c "$LIB" -o build/bench_ledger $LIBS

S=${BENCH_SECONDS:-5}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/frugal-bench-ledger}
mkdir -p "$DIR"
echo "# $(uname -sr), $(nproc) cores, SQLite $(sqlite3 --version 2>/dev/null | cut -d' ' -f1), ledger files in $DIR ($(df -T "$DIR" | awk 'NR==2 {print $2}'))"
[ "${BENCH_ONLY:-}" = server ] || for sync in normal full; do
    build/bench_ledger throughput --db "$DIR/t.db" --sync $sync --seconds "$S" --threads 2
    for rate in 1000 5000; do
        build/bench_ledger latency --db "$DIR/l.db" --sync $sync --seconds "$S" --rate $rate
    done
done

# through the server: off / normal / full, interleaved, BENCH_REPS times each
serve() { # NAME LEDGER_ARGS...: starts build/frugal serve, sets PID and URL
    name=$1; shift
    rm -f "$DIR/$name.out"
    build/frugal serve --model tests/fixtures/qwen2-tiny --port 0 "$@" >"$DIR/$name.out" 2>"$DIR/$name.err" &
    PID=$!
    i=0; PORT=
    while [ $i -lt 300 ] && [ -z "$PORT" ]; do
        PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$DIR/$name.out" 2>/dev/null || true)
        [ -z "$PORT" ] && sleep 0.1; i=$((i + 1))
    done
    URL=http://127.0.0.1:$PORT
}
printf '{"ledger": {"synchronous": "full"}}\n' >"$DIR/full.json"
for rep in $(seq "${BENCH_REPS:-3}"); do
    for cfg in off normal full; do
        rm -f "$DIR/s.db" "$DIR/s.db-wal" "$DIR/s.db-shm"
        case $cfg in
            off) serve $cfg --ledger "" ;;
            normal) serve $cfg --ledger "$DIR/s.db" ;;
            full) serve $cfg --ledger "$DIR/s.db" --meter-config "$DIR/full.json" ;;
        esac
        build/bench_ledger server --url "$URL" --clients 8 --seconds 1 >/dev/null # warm-up
        printf 'ledger %-6s ' $cfg
        build/bench_ledger server --url "$URL" --clients 8 --seconds "$S"
        kill -TERM $PID; wait $PID || true
        [ $cfg = off ] || echo "              rows in the ledger: $(sqlite3 "$DIR/s.db" 'SELECT count(*) FROM requests')"
    done
done
