#!/bin/sh
# cli_serve.sh — `frugal serve` end to end on loopback with the tiny fp32 Qwen2 fixture: curl and
# the official `openai` npm package as clients, 32 concurrent streams vs alone, overload with
# tiers, disconnects, slow clients, limits, auth on/off, malformed input, promtool, SIGTERM drain.
# Servers listen on port 0 (a free port, read from their first stdout line), so parallel runs do
# not collide. Prints one line per check and ends with "N passed, N failed".
#
# Needs: curl, node (>= 18) and npm (the openai package is installed into tests/serve with
# `npm install --no-save`), promtool (Debian's prometheus package).
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen2-tiny
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-serve.XXXXXX")
pass=0; fail=0; PID=; PORT=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

. tests/serve/start.sh # serve_start
# start_server NAME [serve options...]: sets PID, PORT, URL
start_server() {
    name=$1; shift
    serve_start "$TMP/$name.out" "$TMP/$name.err" --model "$MODEL" --port 0 --ledger "" "$@"
    URL=http://127.0.0.1:$PORT
    if [ -z "$PORT" ]; then bad "$name: server started"; cat "$TMP/$name.err"; PID=; return 1; fi
    return 0
}
# stop_server NAME: SIGTERM, wait, check exit status 0
stop_server() {
    [ -n "$PID" ] || return
    kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
    check "$1: SIGTERM exits 0" "$rc" 0
    if [ "$rc" != 0 ]; then tail -n 30 "$TMP/$1.err"; fi
}
# code METHOD PATH [curl args...]: prints the HTTP status
code() { m=$1; p=$2; shift 2; curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$URL$p" "$@"; }
# run_node SCRIPT [args]: runs a node test, counts its ok/FAIL lines
run_node() {
    out=$(FRUGAL_URL=$URL FRUGAL_MODEL=qwen2-tiny node "tests/serve/$@" 2>&1); rc=$?
    printf '%s\n' "$out" | sed 's/^ok /ok   /'
    p=$(printf '%s\n' "$out" | grep -c '^ok '); f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then bad "node $1 exited $rc"; fi
}

[ -x "$BIN" ] || { bad "binary $BIN missing"; echo "$pass passed, $fail failed"; exit 1; }
have_node=1
if ! command -v node >/dev/null 2>&1; then bad "node is not installed"; have_node=0; fi
if [ $have_node = 1 ] && [ ! -d tests/serve/node_modules/openai ]; then
    (cd tests/serve && npm install --no-save --no-audit --no-fund --loglevel=error openai \
        >"$TMP/npm.log" 2>&1) || { bad "npm install openai"; cat "$TMP/npm.log"; }
fi

# ---------------------------------------------------------------- open server (auth off)
if start_server open; then
    check "health" "$(code GET /health)" 200
    check "ready" "$(code GET /ready)" 200
    check "models without auth" "$(code GET /v1/models)" 200
    grep -q '"id":"qwen2-tiny"' "$TMP/body" && ok "models lists the model" || bad "models lists the model"
    check "model by id" "$(code GET /v1/models/qwen2-tiny)" 200
    check "unknown model id 404" "$(code GET /v1/models/nope)" 404
    check "unknown path 404" "$(code GET /v2/nothing)" 404
    check "wrong method 405" "$(code GET /v1/chat/completions)" 405
    J='-H Content-Type:application/json'
    # curl as a client: non-streaming and streaming chat, completions
    check "curl chat" "$(code POST /v1/chat/completions $J -d '{"model":"qwen2-tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0}')" 200
    grep -q '"object":"chat.completion"' "$TMP/body" && grep -q '"completion_tokens":' "$TMP/body" \
        && ok "curl chat body shape" || bad "curl chat body shape: $(cat "$TMP/body")"
    curl -sN "$URL/v1/chat/completions" $J -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/sse"
    grep -q '^data: {.*"delta":{"role":"assistant"' "$TMP/sse" && grep -q '"finish_reason":"length"' "$TMP/sse" \
        && grep -q '"usage":{"prompt_tokens"' "$TMP/sse" && [ "$(tail -n 2 "$TMP/sse" | head -n 1)" = "data: [DONE]" ] \
        && ok "curl chat stream: role, finish, usage, [DONE]" || bad "curl chat stream: $(cat "$TMP/sse")"
    check "curl completions" "$(code POST /v1/completions $J -d '{"prompt":"Once upon a time","max_tokens":4}')" 200
    grep -q '"object":"text_completion"' "$TMP/body" && ok "completions body shape" || bad "completions body shape"
    # malformed and invalid requests: the right 4xx, OpenAI's error shape
    check "malformed JSON 400" "$(code POST /v1/chat/completions $J -d '{"messages": [')" 400
    grep -q '"error":{"message":".*","type":"invalid_request_error","param":null,"code":"invalid_json"}' "$TMP/body" \
        && ok "error shape" || bad "error shape: $(cat "$TMP/body")"
    check "body not an object 400" "$(code POST /v1/chat/completions $J -d '[1,2]')" 400
    check "messages wrong type 400" "$(code POST /v1/chat/completions $J -d '{"messages":"hi"}')" 400
    grep -q '"param":"messages"' "$TMP/body" && ok "wrong type names the param" || bad "wrong type param: $(cat "$TMP/body")"
    check "temperature wrong type 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}')" 400
    check "role unknown 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"wizard","content":"x"}]}')" 400
    check "image part 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}')" 400
    grep -q 'remote URLs are not fetched' "$TMP/body" && grep -q '"param":"messages\[0\].content\[1\]"' "$TMP/body" \
        && ok "image part error names the part" || bad "image part message: $(cat "$TMP/body")"
    check "audio part that is not audio 415" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}')" 415
    check "unknown fields ignored" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"some_future_field":{"a":1}}')" 200
    check "n=2 refused" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"n":2}')" 400
    check "negative max_tokens 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":-3}')" 400
    check "absurd max_tokens 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":1e300}')" 400
    check "fractional max_tokens 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2.5}')" 400
    check "context overflow 400" "$(code POST /v1/completions $J -d '{"prompt":"x","max_tokens":4000}')" 400
    grep -q 'context_length_exceeded' "$TMP/body" && ok "context overflow code" || bad "context overflow code: $(cat "$TMP/body")"
    printf '{"prompt":"caf\351"}' >"$TMP/latin1"
    check "invalid UTF-8 400" "$(code POST /v1/completions $J --data-binary @"$TMP/latin1")" 400
    grep -q invalid_utf8 "$TMP/body" && ok "invalid UTF-8 code" || bad "invalid UTF-8 code"
    check "lone surrogate escape 400" "$(code POST /v1/completions $J -d '{"prompt":"\ud800x"}')" 400
    head -c 2000000 /dev/zero | tr '\0' 'a' >"$TMP/huge"
    check "huge body 413 (Content-Length)" "$(code POST /v1/completions $J --data-binary @"$TMP/huge")" 413
    check "huge body 413 (chunked)" "$(code POST /v1/completions $J -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/huge")" 413
    check "empty body 400" "$(code POST /v1/completions $J)" 400
    check "bad X-Priority 400" "$(code POST /v1/completions $J -H 'X-Priority: urgent' -d '{"prompt":"x"}')" 400
    check "bad X-Deadline-Ms 400" "$(code POST /v1/completions $J -H 'X-Deadline-Ms: soon' -d '{"prompt":"x"}')" 400
    check "missed deadline 504" "$(code POST /v1/completions $J -H 'X-Deadline-Ms: 1' -d '{"prompt":"x","max_tokens":480,"ignore_eos":true}')" 504
    grep -q deadline_exceeded "$TMP/body" && ok "missed deadline says so" || bad "deadline message: $(cat "$TMP/body")"
    check "priority field P0" "$(code POST /v1/completions $J -d '{"prompt":"x","max_tokens":2,"priority":"P0"}')" 200
    check "still healthy after bad input" "$(code GET /health)" 200
    if [ $have_node = 1 ]; then
        run_node concurrency.mjs
        run_node robustness.mjs disconnect
    fi
    curl -s "$URL/metrics" >"$TMP/metrics"
    # the vllm:* names (docs/METRICS.md) contain ':', promtool's one finding allowed
    promtool check metrics <"$TMP/metrics" >"$TMP/promtool" 2>&1; prc=$?
    pother=$(grep -v "^vllm:[a-z0-9_:]* metric names should not contain ':'\$" "$TMP/promtool")
    if { [ $prc = 0 ] || [ $prc = 3 ]; } && [ -z "$pother" ]; then ok "promtool check metrics"
    else bad "promtool check metrics (exit $prc): $pother"; fi
    grep -q '^frugal_requests_total{endpoint="/v1/chat/completions",tier="P1",status="200"}' "$TMP/metrics" \
        && ok "metrics: requests_total by endpoint/tier/status" || bad "metrics requests_total"
    grep -q '^frugal_requests_total{endpoint="/v1/completions",tier="P0",status="200"} 1$' "$TMP/metrics" \
        && ok "metrics: priority field counted as P0" || bad "metrics P0"
    for m in frugal_time_to_first_token_seconds_bucket frugal_time_per_output_token_seconds_count \
             frugal_queue_time_seconds_sum frugal_request_duration_seconds_count \
             frugal_requests_running frugal_requests_waiting frugal_kv_blocks_used \
             frugal_prompt_tokens_total frugal_generation_tokens_total frugal_requests_rejected_total \
             frugal_requests_preempted_total frugal_requests_cancelled_total; do
        grep -q "^$m" "$TMP/metrics" && ok "metrics has $m" || bad "metrics has $m"
    done
    grep -q '^frugal_requests_cancelled_total{tier="P1",reason="deadline"} 1$' "$TMP/metrics" \
        && ok "metrics: deadline cancellation counted" || bad "metrics deadline"
    # SIGTERM while a stream runs: it finishes, new connections are refused, exit 0
    curl -sN "$URL/v1/completions" $J -d '{"prompt":"Once","max_tokens":300,"ignore_eos":true,"stream":true}' >"$TMP/drain" &
    CURL=$!
    i=0; while [ $i -lt 100 ] && ! grep -q '"text"' "$TMP/drain" 2>/dev/null; do sleep 0.02; i=$((i + 1)); done
    spid=$PID
    stop_server open
    wait $CURL
    [ "$(tail -n 2 "$TMP/drain" | head -n 1)" = "data: [DONE]" ] && ok "SIGTERM drains the in-flight stream to [DONE]" \
        || bad "drain: $(tail -c 300 "$TMP/drain")"
    curl -s -m 2 "$URL/health" >/dev/null 2>&1 && bad "listener closed after SIGTERM" || ok "listener closed after SIGTERM"
    kill -0 "$spid" 2>/dev/null && bad "server process gone" || ok "server process gone"
fi

# ---------------------------------------------------------------- auth on
printf '# test keys\nsk-test-alpha P0\nsk-test-batch P2 P2\n' >"$TMP/keys"
if FRUGAL_API_KEYS="sk-env-key:P1" start_server auth --api-keys "$TMP/keys"; then
    check "auth: health without key" "$(code GET /health)" 200
    check "auth: models without key 401" "$(code GET /v1/models)" 401
    grep -q missing_api_key "$TMP/body" && ok "auth: 401 says the key is missing" || bad "auth 401 body"
    check "auth: wrong key 401" "$(code GET /v1/models -H 'Authorization: Bearer sk-test-alphx')" 401
    check "auth: prefix of a key 401" "$(code GET /v1/models -H 'Authorization: Bearer sk-test-alph')" 401
    check "auth: right key 200" "$(code GET /v1/models -H 'Authorization: Bearer sk-test-alpha')" 200
    check "auth: env key 200" "$(code GET /v1/models -H 'Authorization: Bearer sk-env-key')" 200
    check "auth: ready needs key" "$(code GET /ready)" 401
    check "auth: metrics needs key" "$(code GET /metrics)" 401
    check "auth: chat without key 401" "$(code POST /v1/chat/completions -d '{"messages":[{"role":"user","content":"x"}]}')" 401
    check "auth: batch key asking P0 is served" "$(code POST /v1/completions -H 'Authorization: Bearer sk-test-batch' -H 'X-Priority: P0' -d '{"prompt":"x","max_tokens":2}')" 200
    curl -s -H 'Authorization: Bearer sk-test-alpha' "$URL/metrics" >"$TMP/metrics"
    grep -q '^frugal_requests_total{endpoint="/v1/completions",tier="P2",status="200"} 1$' "$TMP/metrics" \
        && ok "auth: key's highest tier caps the request (P2)" || bad "auth tier cap"
    if [ $have_node = 1 ]; then FRUGAL_KEY=sk-test-alpha run_node openai_client.mjs; fi
    stop_server auth
    grep -q 'sk-test\|sk-env' "$TMP/auth.err" "$TMP/auth.out" && bad "auth: keys never logged" || ok "auth: keys never logged"
fi

# ---------------------------------------------------------------- limits and slow clients
if start_server limits --config tests/serve/limits.json; then
    J='-H Content-Type:application/json'
    check "limit: too many messages 400" "$(code POST /v1/chat/completions $J -d '{"messages":[{"role":"user","content":"1"},{"role":"assistant","content":"2"},{"role":"user","content":"3"},{"role":"assistant","content":"4"},{"role":"user","content":"5"}]}')" 400
    grep -q too_many_messages "$TMP/body" && ok "limit: messages message" || bad "limit messages: $(cat "$TMP/body")"
    check "limit: prompt tokens 400" "$(code POST /v1/completions $J -d "{\"prompt\":\"$(printf 'word %.0s' $(seq 1 80))\"}")" 400
    grep -q 'context_length_exceeded' "$TMP/body" && ok "limit: prompt tokens message" || bad "limit prompt: $(cat "$TMP/body")"
    check "limit: max_tokens over the cap 400" "$(code POST /v1/completions $J -d '{"prompt":"x","max_tokens":101}')" 400
    check "limit: body over 4 KiB 413" "$(code POST /v1/completions $J -d "{\"prompt\":\"$(head -c 5000 /dev/zero | tr '\0' x)\"}")" 413
    if [ $have_node = 1 ]; then
        run_node robustness.mjs slow
        run_node robustness.mjs connlimit
    fi
    stop_server limits
fi

# ---------------------------------------------------------------- overload: P2 flood vs P0
if [ $have_node = 1 ] && start_server overload --config tests/serve/overload.json; then
    run_node overload.mjs
    curl -s "$URL/metrics" >"$TMP/metrics"
    n1=$(sed -n 's/^frugal_requests_rejected_total{tier="P2",reason="queue_full"} //p' "$TMP/metrics")
    n2=$(sed -n 's/^frugal_requests_rejected_total{tier="P2",reason="overload"} //p' "$TMP/metrics")
    [ $((${n1:-0} + ${n2:-0})) -gt 0 ] && ok "overload: rejections counted in metrics" \
        || bad "overload metrics: queue_full ${n1:-?}, overload ${n2:-?}"
    stop_server overload
fi

# ---------------------------------------------------------------- shutdown with no grace left
printf '{"shutdown_grace_s": 0}\n' >"$TMP/nograce.json"
if start_server nograce --config "$TMP/nograce.json"; then
    for k in 1 2 3 4 5 6; do
        curl -sN "$URL/v1/completions" -d "{\"prompt\":\"Story $k\",\"max_tokens\":480,\"ignore_eos\":true,\"stream\":true}" >"$TMP/ng$k" &
    done
    # wait (up to 20 s on a loaded machine) until every stream has been accepted and started
    i=0
    while [ $i -lt 2000 ]; do
        started=0
        for k in 1 2 3 4 5 6; do grep -q '^data: ' "$TMP/ng$k" 2>/dev/null && started=$((started + 1)); done
        [ $started -eq 6 ] && break
        sleep 0.01; i=$((i + 1))
    done
    stop_server nograce
    wait
    proper=0; cancelled=0
    for k in 1 2 3 4 5 6; do
        last=$(grep '^data: ' "$TMP/ng$k" | tail -n 1)
        case "$last" in
        "data: [DONE]") proper=$((proper + 1)) ;;
        *shutting_down*) proper=$((proper + 1)); cancelled=$((cancelled + 1)) ;;
        esac
    done
    check "no grace: every stream ends with [DONE] or a shutting_down error" "$proper" 6
    echo "# no grace: $cancelled of 6 streams were cancelled by the shutdown"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
