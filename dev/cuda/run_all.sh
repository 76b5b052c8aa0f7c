#!/bin/sh
# Every variant of every dev/cuda program, briefly: one line per variant (name, max error against
# the CPU reference as a multiple of its tolerance, PASS/FAIL, µs per launch, GB/s and % of the
# device copy rate). Run from the repository root after `make dev`:
#     make dev && sh dev/cuda/run_all.sh
# About 6 s on one H200 (the build: ~15 s with make -j16 dev). Exit status 1 when any variant failed its check or a program did not
# run to its end.
set -u
B=${DEV_BUILD:-build-dev}
for p in stream_gemv attn_decode; do
    if [ ! -x "$B/$p" ]; then
        echo "run_all: $B/$p missing (make dev)" >&2
        exit 1
    fi
done
fail=0
run() {
    echo "== $*"
    if ! timeout 60 "$@"; then
        echo "run_all: FAILED: $*" >&2
        fail=1
    fi
}
run "$B/stream_gemv" -r 10                    # gate/up 28672 x 4096, every format and variant
run "$B/stream_gemv" -f int4 -M 6144 -r 10    # the qkv shape (384 tiles: where the grid is uneven)
run "$B/stream_gemv" -f int8 -M 6144 -n 4 -r 10
run "$B/attn_decode" -r 50                    # batch 1, context 640
run "$B/attn_decode" -t 4 -c 2048 -r 20
# edges: partial row tiles and quantisation groups, contexts shorter than a cluster
run "$B/stream_gemv" -M 4100 -K 4000 -n 1 -r 3
run "$B/stream_gemv" -f int4 -M 4100 -K 4000 -n 3 -r 3 -t 1
run "$B/attn_decode" -t 3 -c 5 -r 3
if [ "$fail" = 0 ]; then echo "run_all: every variant passed"; else echo "run_all: some variant failed"; fi
exit "$fail"
