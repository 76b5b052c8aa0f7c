#!/bin/sh
# cli_serve_lora.sh — LoRA adapters through `frugal serve` on the tiny fp32 Qwen2 fixture:
# `--lora NAME=PATH` serves a PEFT adapter as model NAME (/v1/models lists it with its parent);
# a greedy completion with "model": NAME returns the ids HF + peft generate with that adapter
# (tests/fixtures/ref/lora.json), the base model's answer differs, and the base answer after the
# adapter's is the same as before (the prefix cache keys blocks by adapter); a second adapter is
# loaded and unloaded at run time (POST /v1/load_lora_adapter, /v1/unload_lora_adapter, vLLM's
# bodies) with the right 4xx for a missing folder, a taken name, an unknown one and a bad body;
# /metrics says vllm:lora_requests_info max_lora="64"; a server without --lora-runtime-updates
# answers the admin endpoints 403. Servers listen on port 0. Prints one line per check and ends
# with "N passed, N failed". Needs curl and python3.
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen2-tiny
REF=tests/fixtures/ref/lora.json
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-serve-lora.XXXXXX")
pass=0; fail=0; PID=; PORT=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

. tests/serve/start.sh # serve_start
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
post() { curl -s -o "$3" -w '%{http_code}' -H Content-Type:application/json "$URL$1" -d "$2"; }
js() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }

for f in "$BIN" "$MODEL/config.json" "$REF" tests/fixtures/lora/qwen2-tiny-all/adapter_model.safetensors; do
    [ -e "$f" ] || { bad "$f missing"; echo "$pass passed, $fail failed"; exit 1; }
done
TEXT=$(python3 -c 'import json; print(json.load(open("tests/fixtures/ref/qwen2-tiny.json"))["prompts"][0]["text"])')
WANT=$(js "$REF" '",".join(map(str, j["adapters"]["qwen2-tiny-all"]["greedy"]))')
WANT_QV=$(js "$REF" '",".join(map(str, j["adapters"]["qwen2-tiny-qv"]["greedy"]))')
N=$(js "$REF" 'len(j["adapters"]["qwen2-tiny-all"]["greedy"])')
comp() { # comp MODEL: a greedy completion of the reference prompt
    printf '{"model":"%s","prompt":"%s","max_tokens":%s,"temperature":0,"ignore_eos":true,"return_token_ids":true}' "$1" "$TEXT" "$N"
}
ids() { js "$1" '",".join(map(str, j["choices"][0]["token_ids"]))'; }

if start_server lora --lora all=tests/fixtures/lora/qwen2-tiny-all --lora-runtime-updates; then
    check "models list" "$(curl -s -o "$TMP/m" -w '%{http_code}' "$URL/v1/models")" 200
    check "models: base then the adapter with its parent" \
        "$(js "$TMP/m" '[(d["id"], d.get("parent")) for d in j["data"]]')" "[('qwen2-tiny', None), ('all', 'qwen2-tiny')]"
    check "model object of the adapter" "$(curl -s -o "$TMP/mo" -w '%{http_code}' "$URL/v1/models/all")" 200
    check "base first" "$(post /v1/completions "$(comp qwen2-tiny)" "$TMP/b1")" 200
    check "with the adapter" "$(post /v1/completions "$(comp all)" "$TMP/a1")" 200
    check "adapter: the ids HF + peft generate" "$(ids "$TMP/a1")" "$WANT"
    check "adapter: response model is the adapter" "$(js "$TMP/a1" 'j["model"]')" all
    [ "$(ids "$TMP/b1")" != "$(ids "$TMP/a1")" ] && ok "the base model answers otherwise" \
        || bad "base and adapter gave the same ids"
    check "base again" "$(post /v1/completions "$(comp qwen2-tiny)" "$TMP/b2")" 200
    check "base again: the same ids (no adapter blocks from the cache)" "$(ids "$TMP/b2")" "$(ids "$TMP/b1")"
    check "adapter again (cached prompt): the same ids" "$(post /v1/completions "$(comp all)" "$TMP/a2") $(ids "$TMP/a2")" "200 $WANT"
    check "unknown model 404" "$(post /v1/completions "$(comp nope)" "$TMP/x")" 404
    check "unknown model: code" "$(js "$TMP/x" 'j["error"]["code"]')" model_not_found
    # run-time loading
    check "load qv" "$(post /v1/load_lora_adapter '{"lora_name":"qv","lora_path":"tests/fixtures/lora/qwen2-tiny-qv"}' "$TMP/l1")" 200
    grep -q "Success: LoRA adapter 'qv' added" "$TMP/l1" && ok "load: vLLM's answer" || bad "load answer: $(cat "$TMP/l1")"
    check "qv serves" "$(post /v1/completions "$(comp qv)" "$TMP/q1")" 200
    check "qv: the ids HF + peft generate" "$(ids "$TMP/q1")" "$WANT_QV"
    check "load a taken name 400" "$(post /v1/load_lora_adapter '{"lora_name":"qv","lora_path":"tests/fixtures/lora/qwen2-tiny-qv"}' "$TMP/l2")" 400
    check "load a missing folder 404" "$(post /v1/load_lora_adapter '{"lora_name":"gone","lora_path":"tests/fixtures/lora/none"}' "$TMP/l3")" 404
    check "load the llama adapter onto qwen2: 400" "$(post /v1/load_lora_adapter '{"lora_name":"ll","lora_path":"tests/fixtures/lora/llama-tiny-all"}' "$TMP/l4")" 400
    check "load without a path 400" "$(post /v1/load_lora_adapter '{"lora_name":"z"}' "$TMP/l5")" 400
    check "load: not JSON 400" "$(post /v1/load_lora_adapter 'lora' "$TMP/l6")" 400
    check "load: a bad name 400" "$(post /v1/load_lora_adapter '{"lora_name":"a b","lora_path":"tests/fixtures/lora/qwen2-tiny-qv"}' "$TMP/l7")" 400
    check "load: GET is 405" "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/load_lora_adapter")" 405
    check "models: three now" "$(curl -s "$URL/v1/models" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')" 3
    check "unload qv" "$(post /v1/unload_lora_adapter '{"lora_name":"qv"}' "$TMP/u1")" 200
    check "qv gone: 404" "$(post /v1/completions "$(comp qv)" "$TMP/q2")" 404
    check "unload again 404" "$(post /v1/unload_lora_adapter '{"lora_name":"qv"}' "$TMP/u2")" 404
    curl -s "$URL/metrics" >"$TMP/metrics"
    grep -q '^vllm:lora_requests_info{max_lora="64",running_lora_adapters="",waiting_lora_adapters=""} ' "$TMP/metrics" \
        && ok "metrics: lora_requests_info, idle" || bad "metrics: $(grep lora_requests "$TMP/metrics")"
    check "still serving the base" "$(post /v1/completions "$(comp qwen2-tiny)" "$TMP/b3")" 200
    stop_server lora
fi

if start_server locked --lora all=tests/fixtures/lora/qwen2-tiny-all; then
    check "without --lora-runtime-updates: load is 403" \
        "$(post /v1/load_lora_adapter '{"lora_name":"qv","lora_path":"tests/fixtures/lora/qwen2-tiny-qv"}' "$TMP/k1")" 403
    check "without --lora-runtime-updates: unload is 403" "$(post /v1/unload_lora_adapter '{"lora_name":"all"}' "$TMP/k2")" 403
    check "the adapter still serves" "$(post /v1/completions "$(comp all)" "$TMP/k3") $(ids "$TMP/k3")" "200 $WANT"
    stop_server locked
fi

serve_start "$TMP/bad.out" "$TMP/bad.err" --model "$MODEL" --port 0 --ledger "" --lora x=tests/fixtures/lora/none
if [ -z "$PORT" ]; then
    wait "$PID" 2>/dev/null; PID=
    grep -q "adapter_config.json" "$TMP/bad.err" && ok "a missing adapter at start: the server refuses to start, naming the file" \
        || bad "missing adapter at start: $(cat "$TMP/bad.err")"
else
    bad "a server started with a missing adapter"; kill "$PID"; PID=
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
