#!/bin/sh
# run.sh — run every libFuzzer harness built by `make fuzz` for a bounded time over its committed
# seed corpus (tests/fuzz/corpus/<name>/), from the repository root:
#   make fuzz && sh tests/fuzz/run.sh [SECONDS_EACH]     (default 10)
# New inputs go to a temporary directory, so the committed corpus is never modified. A crash, a
# sanitizer report (LeakSanitizer on), a timeout or an out-of-memory fails the harness; its input
# is kept in build-fuzz/crashes/. One line per harness, then "N passed, N failed". The random
# seed is fixed (FUZZ_SEED, default 1) so a CI run can be repeated; set FUZZ_SEED=0 for a fresh one.
# FUZZ_ONLY="tests/fuzz/fuzz_mask.c ..." runs only those harnesses. A harness without a corpus
# directory yet starts from an empty one (and says so).
secs=${1:-10}
seed=${FUZZ_SEED:-1}
B=${FUZZ_BUILD:-build-fuzz}
pass=0
fail=0
for src in ${FUZZ_ONLY:-tests/fuzz/fuzz_*.c}; do
    name=${src#tests/fuzz/fuzz_}
    name=${name%.c}
    bin=$B/fuzz_$name
    seeds=tests/fuzz/corpus/$name
    if [ ! -x "$bin" ]; then
        echo "FAIL fuzz_$name (not built: run make fuzz)"; fail=$((fail + 1)); continue
    fi
    note=""
    if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
        note=", no seed corpus yet: started empty (add tests/fuzz/corpus/$name)"
        seeds=$(mktemp -d)
    fi
    case $name in
        traceparent) max=256 ;;
        assist | http_head | mask | meter_config | request | tokenizer) max=4096 ;;
        chat | nlu) max=8192 ;;
        safetensors) max=16384 ;;
        *) max=65536 ;;
    esac
    work=$(mktemp -d)
    mkdir -p "$work/new" "$B/crashes"
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
        "$bin" "$work/new" "$seeds" -max_total_time="$secs" -max_len="$max" -timeout=10 -seed="$seed" \
        -rss_limit_mb=2048 -artifact_prefix="$B/crashes/$name-" -print_final_stats=1 \
        >"$work/log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
        echo "ok   fuzz_$name (${runs:-?} inputs in $secs s$note)"
        pass=$((pass + 1))
    else
        grep -v '^#[0-9]' "$work/log" | tail -n 40
        echo "FAIL fuzz_$name (input kept in $B/crashes/$name-*)"
        fail=$((fail + 1))
    fi
    rm -rf "$work"
    [ -n "$note" ] && rm -rf "$seeds"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
