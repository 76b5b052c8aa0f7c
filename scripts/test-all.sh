#!/bin/sh
# The whole test suite, as CI runs it on a clean Debian 12 machine:
#   1. install what is missing (Debian packages), check that includes point one way
#      (scripts/check-layers.sh: an upward include fails CI),
#   2. build with warnings as errors (and, where nvcc is installed, the CUDA backend: it must
#      compile and link without a GPU) and run every test,
#   3. build with AddressSanitizer + UndefinedBehaviorSanitizer and run every test again,
#   4. build every libFuzzer harness (make fuzz) and run each for 5 s over its seed corpus
#      (tests/fuzz/run.sh; each harness counts as one test).
# Ends with one line "N passed, N failed" summing both runs; exit status 0 only if all passed.
set -u
cd "$(dirname "$0")/.." || exit 1
sh scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
total_p=0; total_f=0
t_start=$(date +%s)
since() { echo "$(( $(date +%s) - t_start )) s"; } # elapsed wall time, for the section lines
echo "=== layers (scripts/check-layers.sh)"
if sh scripts/check-layers.sh; then total_p=$((total_p + 1)); else total_f=$((total_f + 1)); fi
run_suite() { # $1 = label, rest = make variables
    label=$1; shift
    echo "=== $label (at $(since))"
    if ! make -j"$jobs" WERROR=1 "$@" tests >"/tmp/frugal-build-$$.log" 2>&1; then
        cat "/tmp/frugal-build-$$.log"; echo "FAIL build ($label)"; total_f=$((total_f + 1)); return
    fi
    # the CUDA backend compiles and links wherever nvcc is (no GPU needed); then gpu-check --quick
    # must start and either report that no GPU is present or pass (on a GPU host)
    if [ $# -eq 0 ] && { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
        if make -j"$jobs" WERROR=1 cuda >"/tmp/frugal-build-$$.log" 2>&1; then
            echo "ok   CUDA build (make cuda: gpu-check, gpu-bench, gpu-e2e, frugal-cuda)"
            total_p=$((total_p + 1))
            gc=$(build-cuda/gpu-check --quick 2>&1); rc=$?
            if [ "$rc" -eq 0 ] && printf '%s\n' "$gc" | grep -Eq 'no CUDA device: skipped|^[1-9][0-9]* passed, 0 failed$'; then
                echo "ok   build-cuda/gpu-check --quick: $(printf '%s\n' "$gc" | grep -E 'no CUDA device: skipped|^[1-9][0-9]* passed, 0 failed$' | head -n 1)"
                total_p=$((total_p + 1))
            else
                printf '%s\n' "$gc" | tail -n 20; echo "FAIL build-cuda/gpu-check --quick (exit $rc)"
                total_f=$((total_f + 1))
            fi
        else
            cat "/tmp/frugal-build-$$.log"; echo "FAIL build (make cuda)"; total_f=$((total_f + 1))
        fi
    elif [ $# -eq 0 ]; then
        echo "SKIP CUDA build and gpu-check: no nvcc on this machine (not counted as passed)"
    fi
    echo "--- tests ($label, at $(since))"
    out=$(make --no-print-directory WERROR=1 "$@" test 2>&1); printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then total_f=$((total_f + 1)); return; fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    total_p=$((total_p + p)); total_f=$((total_f + f))
}
run_suite "release build (-Werror)"
# The sanitizer run: the serving layer's OCR reader is tesseract (FRUGAL_OCR_ENGINE), because
# PP-OCR's fp32 networks run ~5x slower under ASan and a page passes the 10 s OCR time limit of
# the assist tests; PP-OCR's own tests (test_ppocr_run, test_onnx_exec, cli_ocr_engine.sh) name
# their engine and still run under the sanitizers. OpenBLAS on one thread: its threads only spin
# on the tests' small products here.
FRUGAL_OCR_ENGINE=tesseract OPENBLAS_NUM_THREADS=1 \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    run_suite "sanitizer build (address,undefined)" SANITIZE=address,undefined
echo "=== fuzzers (make fuzz; 5 s each over tests/fuzz/corpus; at $(since))"
if make -j"$jobs" fuzz >"/tmp/frugal-build-$$.log" 2>&1; then
    out=$(sh tests/fuzz/run.sh 5 2>&1); printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        total_f=$((total_f + 1))
    else
        p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
        total_p=$((total_p + p)); total_f=$((total_f + f))
    fi
else
    cat "/tmp/frugal-build-$$.log"; echo "FAIL build (make fuzz)"; total_f=$((total_f + 1))
fi
rm -f "/tmp/frugal-build-$$.log"
echo "=== done in $(since)"
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
