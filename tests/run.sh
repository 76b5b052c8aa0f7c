#!/bin/sh
# Runs every test program in $BUILD/tests and every CLI test script tests/cli_*.sh, then prints
# the totals as "N passed, N failed". Exit status is non-zero when anything failed.
BUILD=${BUILD:-build}
export FRUGAL_BIN="$BUILD/frugal"
pass=0; fail=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.o|*.d) continue;; esac
    echo "== $t"
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -v '^[0-9]* passed, [0-9]* failed$'
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $t (crashed or printed no summary, exit $rc)"; fail=$((fail + 1)); continue
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "FAIL $t (exit $rc)"; fail=$((fail + 1)); fi
done
for s in tests/cli_*.sh; do
    [ -f "$s" ] || continue
    echo "== $s"
    out=$(sh "$s" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -v '^[0-9]* passed, [0-9]* failed$'
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then echo "FAIL $s (no summary, exit $rc)"; fail=$((fail + 1)); continue; fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    pass=$((pass + p)); fail=$((fail + f))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
