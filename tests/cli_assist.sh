#!/bin/sh
# cli_assist.sh — both doors of the assist handler: `frugal assist` on stdin/stdout JSON lines and
# POST /v1/assist on a real server (tiny fixture model, port 0). The bad-input list gets 4xx with
# clear messages over HTTP and error lines on stdin, and the server keeps serving. Prints one
# line per check and ends with "N passed, N failed". Needs curl.
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-assist.XXXXXX")
pass=0; fail=0; PID=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -q -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in: $(head -c 300 "$2"))"; fi; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

# ---- stdin door ----
printf '%s\n' '{"text":"I am still waiting on my card"}' '' 'not json' \
    '{"image":"@@@"}' '{"text":"how do I change my PIN?"}' | "$BIN" assist >"$TMP/out" 2>"$TMP/err"
[ "$(wc -l <"$TMP/out")" -eq 4 ] && ok "stdin: one line per non-empty request" || bad "stdin: line count $(wc -l <"$TMP/out")"
sed -n 1p "$TMP/out" >"$TMP/l1"; has "stdin: intent" "$TMP/l1" '"name":"card_arrival"'
has "stdin: stages" "$TMP/l1" '"stages_run":\["nlu","template"\]'
sed -n 2p "$TMP/out" >"$TMP/l2"; has "stdin: bad json is an error line" "$TMP/l2" '"status":400'
sed -n 3p "$TMP/out" >"$TMP/l3"; has "stdin: invalid base64" "$TMP/l3" 'not valid base64'
sed -n 4p "$TMP/out" >"$TMP/l4"; has "stdin: keeps answering" "$TMP/l4" '"change_pin"'

# ---- the reply cascade: template when confident, else the LLM when configured, else hand-off ----
printf '%s\n' '{"text":"hello"}' '{"text":"I am still waiting on my card"}' | "$BIN" assist >"$TMP/c.out" 2>"$TMP/c.err"
sed -n 1p "$TMP/c.out" >"$TMP/c1"; sed -n 2p "$TMP/c.out" >"$TMP/c2"
has "cascade: hello is out of scope" "$TMP/c1" '"intent":{"name":"out_of_scope"'
has "cascade: no LLM → hand-off" "$TMP/c1" '"response_source":"handoff"'
has "cascade: in scope → template" "$TMP/c2" '"response_source":"template"'
printf '%s\n' '{"text":"hello"}' '{"text":"I am still waiting on my card"}' | \
    "$BIN" assist --model tests/fixtures/qwen2-tiny >"$TMP/l.out" 2>"$TMP/l.err"
sed -n 1p "$TMP/l.out" >"$TMP/ll1"; sed -n 2p "$TMP/l.out" >"$TMP/ll2"
has "cascade: with an LLM, out of scope → llm" "$TMP/ll1" '"response_source":"llm"'
has "cascade: with an LLM, out of scope → budget and llm ran" "$TMP/ll1" '"stages_run":\["nlu","budget","llm"\]'
has "cascade: with an LLM, confident → still a template" "$TMP/ll2" '"response_source":"template"'
# a missing templates file is an error at start, not a silent fallback
echo '{"text":"hi"}' | "$BIN" assist --templates "$TMP/none.json" >"$TMP/t.out" 2>"$TMP/t.err"; rc=$?
[ "$rc" = 1 ] && ok "missing templates: frugal assist exits 1" || bad "missing templates: exit $rc"
has "missing templates: clear message" "$TMP/t.err" "reply templates file $TMP/none.json not found"
echo "{\"templates\":\"$TMP/none.json\"}" >"$TMP/acfg.json"
FRUGAL_ASSIST_CONFIG="$TMP/acfg.json" "$BIN" serve --model tests/fixtures/qwen2-tiny --port 0 >"$TMP/s2.out" 2>"$TMP/s2.err" &
PID=$!
i=0; PORT=
while [ $i -lt 300 ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$TMP/s2.out" 2>/dev/null)
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
has "missing templates: server says so at start" "$TMP/s2.err" "reply templates file $TMP/none.json not found"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' --data-binary '{"text":"hi"}' "http://127.0.0.1:$PORT/v1/assist")
[ "$st" = 503 ] && grep -q "reply templates file" "$TMP/body" && ok "missing templates: /v1/assist 503 with the reason" || bad "missing templates: /v1/assist $st"
kill -TERM "$PID"; wait "$PID"; PID=

# ---- HTTP door ----
"$BIN" serve --model tests/fixtures/qwen2-tiny --port 0 >"$TMP/s.out" 2>"$TMP/s.err" &
PID=$!
i=0; PORT=
while [ $i -lt 300 ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$TMP/s.out" 2>/dev/null)
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
[ -n "$PORT" ] || { bad "server started"; cat "$TMP/s.err"; echo "$pass passed, $fail failed"; exit 1; }
URL=http://127.0.0.1:$PORT/v1/assist
post() { curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$1" "$URL"; }
st=$(post '{"text":"I am still waiting on my card"}')
[ "$st" = 200 ] && ok "http: 200" || bad "http: status $st"
has "http: same intent as stdin" "$TMP/body" '"name":"card_arrival"'
has "http: timings" "$TMP/body" '"timings_ms":{"nlu"'
# same code path: the two doors agree once id, timings and the metered figures are removed (the
# HTTP door meters its requests and says what they cost in "frugal"; stdin has no meter)
has "http: frugal figure" "$TMP/body" '"frugal":{"joules":'
norm() { sed -e 's/"id":"[^"]*"//' -e 's/"timings_ms":{[^}]*}//' -e 's/,"frugal":{[^}]*}//' "$1" | tr -d '\n'; }
norm "$TMP/body" >"$TMP/a"; norm "$TMP/l1" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" && ok "http and stdin give the same response" || { bad "doors differ"; diff "$TMP/a" "$TMP/b"; }
# the bad-input list
python3 - "$TMP" <<'PY'
import sys
d = sys.argv[1]
open(d + "/deep.json", "w").write('{"ticket":' + '[' * 10000 + ']' * 10000 + '}')
PY
check_bad() { # name body-or-@file status needle
    st=$(curl -s -o "$TMP/body" -w '%{http_code}' --data-binary "$2" "$URL")
    if [ "$st" = "$3" ] && grep -q -- "$4" "$TMP/body"; then ok "http bad: $1 → $3"
    else bad "http bad: $1 (got $st: $(head -c 200 "$TMP/body"))"; fi
}
check_bad "invalid base64" '{"image":"!!!"}' 400 'not valid base64'
check_bad "PNG header on JPEG data" '{"image":"data:image/png;base64,/9j/4AAQSkZJRgABAQ=="}' 415 'declared image/png but the data is JPEG'
check_bad "truncated PNG" '{"image":"iVBORw0KGgoAAAANSUhEUgAA"}' 400 'PNG'
check_bad "zero-length media" '{"audio":""}' 400 'empty'
check_bad "wrong media type" '{"image":"data:application/pdf;base64,JVBERi0="}' 415 'not accepted'
check_bad "ticket nested 10000 deep" "@$TMP/deep.json" 400 'nested deeper'
check_bad "wrong type" '{"text":["a"]}' 400 'text must be a string'
check_bad "not json" 'hello' 400 'not valid JSON'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL"); [ "$st" = 405 ] && ok "http: GET is 405" || bad "http: GET $st"
st=$(post '{"text":"I forgot my passcode"}')
[ "$st" = 200 ] && grep -q passcode_forgotten "$TMP/body" && ok "http: keeps serving after bad input" || bad "http: after bad input $st"
kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
[ "$rc" = 0 ] && ok "server exit 0" || bad "server exit $rc"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
