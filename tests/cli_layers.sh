#!/bin/sh
# cli_layers.sh — scripts/check-layers.sh passes on this tree and fails, with one line naming the
# file, the line and the two layers, on each kind of violation injected into a copy of src/ and
# include/: an upward include, an upward include inside the backend (the CPU decoder reaching for
# the backend table: the old engine <-> backend cycle), a sibling include (model -> meter), an
# include that names no file, a file no layer owns, and an exception that matches nothing.
# Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
CHECK="$ROOT/scripts/check-layers.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-layers.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
trap 'rm -rf "$TMP"' EXIT INT TERM

# fresh copy of the sources in $TMP/t
fresh() { rm -rf "$TMP/t"; mkdir -p "$TMP/t"; cp -R "$ROOT/src" "$ROOT/include" "$TMP/t/"; }
# append an include to a file of the copy; prints the line number it got
inject() { # $1 = file (relative), $2 = include path
    printf '#include "%s"\n' "$2" >>"$TMP/t/$1"; wc -l <"$TMP/t/$1" | tr -d ' '
}
# expect_fail NAME SCRIPT WANT: the check (SCRIPT) over the copy exits 1, prints WANT as one line,
# and counts exactly one violation
expect_fail() {
    out=$(sh "$2" "$TMP/t" 2>&1); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$1: exit $rc, want 1 ($out)"; return; fi
    if ! printf '%s\n' "$out" | grep -qxF -- "$3"; then bad "$1: no line '$3' in: $out"; return; fi
    if ! printf '%s\n' "$out" | grep -q ', 1 violations$'; then bad "$1: not exactly one violation: $out"; return; fi
    ok "$1"
}

# ---- this tree passes ----
out=$(sh "$CHECK" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q ', 0 violations$'; then
    ok "this tree: $(printf '%s\n' "$out" | tail -n 1)"
else
    bad "this tree has layer violations (exit $rc): $out"
fi
fresh
out=$(sh "$CHECK" "$TMP/t" 2>&1); rc=$?
[ "$rc" -eq 0 ] && ok "a copy of this tree passes" || bad "a copy of this tree fails: $out"

# ---- an upward include: the backend's KV pool reaching for the serving engine ----
fresh; n=$(inject src/backend/kv.c engine/engine.h)
expect_fail "upward include fails" "$CHECK" \
    "src/backend/kv.c:$n: includes \"engine/engine.h\": upward edge from layer backend (2) to layer engine (5)"

# ---- upward inside the backend: the CPU decoder including the backend table ----
fresh; n=$(inject src/backend/cpu/decoder.c backend/backend.h)
expect_fail "cpu -> backend table fails" "$CHECK" \
    "src/backend/cpu/decoder.c:$n: includes \"backend/backend.h\": upward edge from layer backend/cpu (3) to layer backend-table (4)"

# ---- a header of a low layer including the top: the error travels to every includer ----
fresh; n=$(inject src/base/base.h serve/serve.h)
expect_fail "base -> serve fails" "$CHECK" \
    "src/base/base.h:$n: includes \"serve/serve.h\": upward edge from layer base (0) to layer serve (9)"

# ---- siblings: model and meter do not know each other ----
fresh; n=$(inject src/model/model.c meter/meter.h)
expect_fail "sibling include fails" "$CHECK" \
    "src/model/model.c:$n: includes \"meter/meter.h\": edge between sibling layers model and meter (both 1)"

# ---- an include that names no file ----
fresh; n=$(inject src/engine/sched.c engine/no_such_header.h)
expect_fail "unresolved include fails" "$CHECK" \
    "src/engine/sched.c:$n: includes \"engine/no_such_header.h\", which is no file of the same folder, src/ or include/"

# ---- a file that no row of the table owns ----
fresh; mkdir -p "$TMP/t/src/newlayer"; printf 'int x;\n' >"$TMP/t/src/newlayer/x.c"
expect_fail "unowned file fails" "$CHECK" \
    "src/newlayer/x.c: no layer owns this file (add a row to the table in scripts/check-layers.sh)"

# ---- downward and same-component includes are fine ----
fresh; inject src/serve/serve.c base/base.h >/dev/null; inject src/engine/engine.c backend/kv.h >/dev/null
inject src/backend/backend.c backend/cpu/cpu.h >/dev/null; inject src/tools/cli.c frugal.h >/dev/null
out=$(sh "$CHECK" "$TMP/t" 2>&1); rc=$?
[ "$rc" -eq 0 ] && ok "downward includes pass" || bad "downward includes rejected: $out"

# ---- exceptions: one listed edge is accepted; a listed edge that is gone fails ----
sed 's|^EXCEPTIONS=.$|&\nsrc/backend/kv.c engine/engine.h  test edge|' "$CHECK" >"$TMP/check_exc.sh"
if grep -q '^src/backend/kv.c engine/engine.h' "$TMP/check_exc.sh"; then
    fresh; inject src/backend/kv.c engine/engine.h >/dev/null
    out=$(sh "$TMP/check_exc.sh" "$TMP/t" 2>&1); rc=$?
    [ "$rc" -eq 0 ] && ok "a listed exception passes" || bad "a listed exception fails: $out"
    fresh
    expect_fail "a stale exception fails" "$TMP/check_exc.sh" \
        "scripts/check-layers.sh: the exception src/backend/kv.c -> engine/engine.h matches no include any more: remove it from EXCEPTIONS"
else
    bad "could not add an exception to a copy of the script (EXCEPTIONS line not found)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
