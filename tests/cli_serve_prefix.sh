#!/bin/sh
# cli_serve_prefix.sh — the prefix cache and the vLLM-compatible metric names through
# `frugal serve` on the tiny fp32 Qwen2 fixture. Two chat requests with the same system prompt:
# the second reports usage.prompt_tokens_details.cached_tokens > 0 (a multiple of the 16-token
# block, below prompt_tokens), also in a stream's final usage chunk, and its text equals what a
# server started with --no-prefix-cache answers (greedy); "cache_prompt": false and a server
# without the cache report 0. /metrics carries every vllm:* family docs/METRICS.md lists, with
# vLLM's type and the model_name label, and the prefix counters agree with the responses;
# `promtool check metrics` finds nothing but the ':' in the vllm:* names. The config key
# "prefix_cache": false turns the cache off too. Servers listen on port 0. Prints one line per
# check and ends with "N passed, N failed". Needs curl, python3, promtool (Debian's prometheus).
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen2-tiny
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-serve-prefix.XXXXXX")
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
stop_server() {
    [ -n "$PID" ] || return
    kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
    check "$1: SIGTERM exits 0" "$rc" 0
}
# post PATH BODY OUT: the HTTP status; the body into OUT
post() { curl -s -o "$3" -w '%{http_code}' -H Content-Type:application/json "$URL$1" -d "$2"; }
# js FILE EXPR: a python expression over the JSON body j
js() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# metric FILE NAME: the value of the first sample line of NAME (with any labels)
metric() { sed -n "s/^$2\(\({[^}]*}\)\{0,1\}\) \([^ ]*\)\$/\3/p" "$1" | head -n 1; }

[ -x "$BIN" ] || { bad "binary $BIN missing"; echo "$pass passed, $fail failed"; exit 1; }
[ -f "$MODEL/config.json" ] || { bad "fixture $MODEL missing"; echo "$pass passed, $fail failed"; exit 1; }

SYS="You are the support assistant of a bank. Answer briefly and politely. Never ask for a full card number or a PIN. If the customer reports fraud, tell them the card is blocked and a new one is on its way. Offer a callback when the question needs an adviser."
chat() { # chat USER_TEXT [extra JSON fields]
    printf '{"model":"qwen2-tiny","messages":[{"role":"system","content":"%s"},{"role":"user","content":"%s"}],"max_tokens":6,"temperature":0%s}' "$SYS" "$1" "${2:-}"
}
Q1="My card was declined at the supermarket this morning."
Q2="How do I change the address on my account?"

if start_server cached; then
    grep -q 'prefix cache on' "$TMP/cached.err" && ok "start line says prefix cache on" \
        || bad "start line: $(grep serving "$TMP/cached.err")"
    check "first chat" "$(post /v1/chat/completions "$(chat "$Q1")" "$TMP/c1")" 200
    check "first request: cached_tokens 0" "$(js "$TMP/c1" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')" 0
    check "second chat" "$(post /v1/chat/completions "$(chat "$Q2")" "$TMP/c2")" 200
    n2=$(js "$TMP/c2" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')
    p2=$(js "$TMP/c2" 'j["usage"]["prompt_tokens"]')
    if [ -n "$n2" ] && [ "$n2" -gt 0 ] && [ $((n2 % 16)) -eq 0 ] && [ "$n2" -lt "$p2" ]; then
        ok "second request shares the system prompt: cached_tokens $n2 of $p2"
    else bad "second request cached_tokens '$n2' of '$p2': $(cat "$TMP/c2")"; fi
    # the same request again: every full block before its last token
    post /v1/chat/completions "$(chat "$Q2")" "$TMP/c3" >/dev/null
    check "repeated request: cached_tokens = full blocks before the last token" \
        "$(js "$TMP/c3" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')" "$(( (p2 - 1) / 16 * 16 ))"
    check "repeated request: same text" "$(js "$TMP/c3" 'j["choices"][0]["message"]["content"]')" \
        "$(js "$TMP/c2" 'j["choices"][0]["message"]["content"]')"
    check "cache_prompt false" "$(post /v1/chat/completions "$(chat "$Q2" ',"cache_prompt":false')" "$TMP/c4")" 200
    check "cache_prompt false: cached_tokens 0" "$(js "$TMP/c4" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')" 0
    check "cache_prompt not a bool 400" "$(post /v1/chat/completions "$(chat "$Q2" ',"cache_prompt":1')" "$TMP/c5")" 400
    check "cache_salt empty 400" "$(post /v1/chat/completions "$(chat "$Q2" ',"cache_salt":""')" "$TMP/c5")" 400
    check "new cache_salt: cached_tokens 0" "$(post /v1/chat/completions "$(chat "$Q2" ',"cache_salt":"tenant-a"')" "$TMP/c6" >/dev/null; js "$TMP/c6" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')" 0
    # a stream's final usage chunk
    curl -sN -H Content-Type:application/json "$URL/v1/chat/completions" \
        -d "$(chat "$Q1" ',"stream":true,"stream_options":{"include_usage":true}')" >"$TMP/sse"
    sed -n 's/^data: \({.*"usage":{"prompt_tokens".*\)$/\1/p' "$TMP/sse" | tail -n 1 >"$TMP/sse_usage"
    ns=$(js "$TMP/sse_usage" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')
    if [ -n "$ns" ] && [ "$ns" -gt 0 ]; then ok "stream: final usage has cached_tokens $ns"
    else bad "stream usage: $(cat "$TMP/sse")"; fi
    # completions: the same prompt twice
    P='{"prompt":"Transfer 1234567.89 USD on 2024-03-15 at 10:30 to the account ending 4321, reference invoice 2024-117, and confirm by e-mail.","max_tokens":3,"temperature":0}'
    post /v1/completions "$P" "$TMP/p1" >/dev/null
    post /v1/completions "$P" "$TMP/p2" >/dev/null
    np=$(js "$TMP/p2" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')
    if [ -n "$np" ] && [ "$np" -gt 0 ]; then ok "completions: cached_tokens $np the second time"
    else bad "completions usage: $(cat "$TMP/p2")"; fi
    curl -s "$URL/metrics" >"$TMP/metrics"
    for f in "vllm:num_requests_running gauge" "vllm:num_requests_waiting gauge" \
             "vllm:kv_cache_usage_perc gauge" "vllm:gpu_cache_usage_perc gauge" \
             "vllm:prefix_cache_queries_total counter" "vllm:prefix_cache_hits_total counter" \
             "vllm:num_preemptions_total counter" "vllm:prompt_tokens_total counter" \
             "vllm:generation_tokens_total counter" "vllm:request_success_total counter" \
             "vllm:time_to_first_token_seconds histogram" "vllm:time_per_output_token_seconds histogram" \
             "vllm:e2e_request_latency_seconds histogram" "vllm:request_queue_time_seconds histogram" \
             "vllm:lora_requests_info gauge"; do
        set -- $f
        if grep -qx "# TYPE $1 $2" "$TMP/metrics" && grep -q "^$1[{_ ]" "$TMP/metrics"; then ok "metrics: $1 ($2)"
        else bad "metrics: $1 ($2) missing"; fi
    done
    grep -q '^vllm:num_requests_waiting{model_name="qwen2-tiny",engine="0"} 0$' "$TMP/metrics" \
        && ok "metrics: model_name and engine labels" || bad "metrics labels: $(grep '^vllm:num_requests_waiting' "$TMP/metrics")"
    grep -q '^vllm:lora_requests_info{max_lora="64",running_lora_adapters="",waiting_lora_adapters=""} ' "$TMP/metrics" \
        && ok "metrics: lora_requests_info with empty adapter lists" || bad "metrics lora_requests_info"
    grep -q '^vllm:time_to_first_token_seconds_bucket{model_name="qwen2-tiny",engine="0",le="0.001"} ' "$TMP/metrics" \
        && ok "metrics: TTFT buckets as vLLM's" || bad "metrics TTFT buckets"
    hits=$(metric "$TMP/metrics" 'vllm:prefix_cache_hits_total')
    queries=$(metric "$TMP/metrics" 'vllm:prefix_cache_queries_total')
    fh=$(metric "$TMP/metrics" frugal_prefix_cache_hit_tokens_total)
    # hits: c2 + c3 + the stream + p2 (c1, c4, c6 and p1 took nothing)
    check "metrics: prefix hits = the responses' cached_tokens" "$hits" "$((n2 + (p2 - 1) / 16 * 16 + ns + np))"
    check "metrics: frugal and vllm hit counters agree" "$fh" "$hits"
    if [ -n "$queries" ] && [ "$queries" -gt "$hits" ]; then ok "metrics: queries $queries > hits $hits"
    else bad "metrics: queries '$queries' hits '$hits'"; fi
    check "metrics: prefix cache enabled" "$(metric "$TMP/metrics" frugal_prefix_cache_enabled)" 1
    promtool check metrics <"$TMP/metrics" >"$TMP/promtool" 2>&1
    rc=$?
    other=$(grep -v "^vllm:[a-z0-9_:]* metric names should not contain ':'\$" "$TMP/promtool")
    if { [ $rc = 0 ] || [ $rc = 3 ]; } && [ -z "$other" ]; then
        ok "promtool: nothing but the ':' of the vllm:* names ($(grep -c . "$TMP/promtool") of those)"
    else bad "promtool (exit $rc): $other"; fi
    stop_server cached
fi

if start_server uncached --no-prefix-cache; then
    grep -q 'prefix cache off' "$TMP/uncached.err" && ok "--no-prefix-cache: start line says off" \
        || bad "start line: $(grep serving "$TMP/uncached.err")"
    post /v1/chat/completions "$(chat "$Q1")" "$TMP/u1" >/dev/null
    check "uncached second chat" "$(post /v1/chat/completions "$(chat "$Q2")" "$TMP/u2")" 200
    check "uncached: cached_tokens 0" "$(js "$TMP/u2" 'j["usage"]["prompt_tokens_details"]["cached_tokens"]')" 0
    check "same text with and without the cache" "$(js "$TMP/u2" 'j["choices"][0]["message"]["content"]')" \
        "$(js "$TMP/c2" 'j["choices"][0]["message"]["content"]')"
    check "same usage.prompt_tokens" "$(js "$TMP/u2" 'j["usage"]["prompt_tokens"]')" "$p2"
    curl -s "$URL/metrics" >"$TMP/metrics2"
    check "uncached: frugal_prefix_cache_enabled 0" "$(metric "$TMP/metrics2" frugal_prefix_cache_enabled)" 0
    check "uncached: no prefix queries" "$(metric "$TMP/metrics2" 'vllm:prefix_cache_queries_total')" 0
    stop_server uncached
fi

printf '{"prefix_cache": false}\n' >"$TMP/off.json"
if start_server config_off --config "$TMP/off.json"; then
    curl -s "$URL/metrics" >"$TMP/metrics3"
    check "config prefix_cache false" "$(metric "$TMP/metrics3" frugal_prefix_cache_enabled)" 0
    stop_server config_off
fi
printf '{"prefix_cache": 1}\n' >"$TMP/bad.json"
"$BIN" serve --model "$MODEL" --port 0 --ledger "" --config "$TMP/bad.json" >/dev/null 2>"$TMP/bad.err"
rc=$?
if [ $rc != 0 ] && grep -q prefix_cache "$TMP/bad.err"; then ok "config prefix_cache not a bool refused"
else bad "config prefix_cache 1: exit $rc, $(cat "$TMP/bad.err")"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
