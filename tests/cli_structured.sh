#!/bin/sh
# cli_structured.sh — structured outputs and tools end to end: `frugal serve` on the tiny random
# Qwen2 fixture (its chat template has Qwen2.5's tool calling) and the official `openai` npm
# client (tests/serve/structured.mjs). Prints one line per check, ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen2-tiny
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-structured.XXXXXX")
pass=0; fail=0; PID=; PORT=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
. tests/serve/start.sh # serve_start

[ -x "$BIN" ] || { bad "binary $BIN missing"; echo "$pass passed, $fail failed"; exit 1; }
command -v node >/dev/null 2>&1 || { bad "node is not installed"; echo "$pass passed, $fail failed"; exit 1; }
[ -d tests/serve/node_modules/openai ] || { bad "tests/serve/node_modules/openai missing (scripts/install-deps.sh)"; echo "$pass passed, $fail failed"; exit 1; }
serve_start "$TMP/out" "$TMP/err" --model "$MODEL" --port 0 --ledger ""
[ -n "$PORT" ] || { bad "server started"; cat "$TMP/err"; echo "$pass passed, $fail failed"; exit 1; }
out=$(FRUGAL_URL=http://127.0.0.1:$PORT FRUGAL_MODEL=qwen2-tiny node tests/serve/structured.mjs 2>&1); rc=$?
printf '%s\n' "$out" | sed 's/^ok /ok   /'
p=$(printf '%s\n' "$out" | grep -c '^ok '); f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
pass=$((pass + p)); fail=$((fail + f))
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && bad "node exited $rc"
kill -0 "$PID" 2>/dev/null && ok "server alive at the end" || bad "server alive at the end"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
