#!/bin/sh
# run.sh — the cost of the response's final `frugal` figure (bench/meter/final.c): request_end
# with and without the CPU settle, and the bounded wait for a GPU's counter knot (fake NVML).
# Usage: sh bench/meter/run.sh [N_CPU] [N_GPU]
cd "$(dirname "$0")/../.." || exit 1
[ -n "${BENCH_NO_MAKE:-}" ] || make -s build/libfrugal.a build/libfakenvml.so || exit 1
PKGS="libpcre2-8 libcjson libmicrohttpd sqlite3 libcurl zlib tesseract lept libpng libjpeg libwebp libtiff-4 cairo
      pocketsphinx sphinxbase sndfile samplerate"
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -O2 -pthread -Isrc bench/meter/final.c build/libfrugal.a -o build/bench_meter_final \
    $(pkg-config --libs $PKGS) -lutf8proc -lopenblas -ldl -lm || exit 1
DIR=$(mktemp -d "${TMPDIR:-/tmp}/frugal-bench-meter.XXXXXX")
build/bench_meter_final "${1:-20000}" "${2:-100}" "$PWD/build/libfakenvml.so" "$DIR"
rc=$?
rm -rf "$DIR"
exit $rc
