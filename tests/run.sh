#!/bin/sh
# Runs every test program in $BUILD/tests and every CLI test script tests/cli_*.sh, then prints
# the totals as "N passed, N failed". Exit status is non-zero when anything failed.
# TEST_JOBS (default: the number of CPUs) tests run at once; each one's output is kept and
# printed whole, in the listed order, with its wall time. Every test picks its own free port
# (port 0) and temporary folder, so they do not share state.
BUILD=${BUILD:-build}
export FRUGAL_BIN="$BUILD/frugal"
if [ "${1:-}" = "--one" ]; then # internal: run test $2, output to $3.out, "rc seconds" to $3.rc
    t0=$(date +%s)
    case "$2" in *.sh) sh "$2" >"$3.out" 2>&1 ;; *) "$2" >"$3.out" 2>&1 ;; esac
    rc=$?
    echo "$rc $(( $(date +%s) - t0 ))" >"$3.rc"
    exit 0
fi
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/frugal-tests.XXXXXX") || exit 1
trap 'rm -rf "$out_dir"' EXIT INT TERM
list=""
for t in "$BUILD"/tests/test_* tests/cli_*.sh; do
    case "$t" in *.o|*.d) continue;; esac
    case "$t" in *.sh) [ -f "$t" ] || continue ;; *) [ -x "$t" ] || continue ;; esac
    list="$list $t"
done
i=0
for t in $list; do i=$((i + 1)); printf '%s %s/%d\n' "$t" "$out_dir" "$i"; done |
    xargs -P "$jobs" -n 2 sh "$0" --one
pass=0; fail=0; i=0
for t in $list; do
    i=$((i + 1)); f="$out_dir/$i"
    rc=-1; secs=?
    [ -f "$f.rc" ] && read -r rc secs <"$f.rc"
    echo "== $t (${secs} s)"
    out=$(cat "$f.out" 2>/dev/null)
    printf '%s\n' "$out" | grep -v '^[0-9]* passed, [0-9]* failed$'
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $t (crashed or printed no summary, exit $rc)"; fail=$((fail + 1)); continue
    fi
    p=${line%% passed*}; n=${line#*passed, }; n=${n%% failed*}
    pass=$((pass + p)); fail=$((fail + n))
    case "$t" in *.sh) ;; *)
        if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then echo "FAIL $t (exit $rc)"; fail=$((fail + 1)); fi ;;
    esac
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
