#!/bin/sh
# cli_serve_api.sh — `frugal serve` loads its model and chooses its device through the public API
# (frugal.h), so its refusals are the API's: the message frugal_context_params_check /
# frugal_model_load wrote, followed by the API's status name, and the exit status the API's
# status gives (1; 2 only for a setting the API calls invalid). A device this build cannot use is
# refused before the model is loaded. `frugal generate` (the CLI, also on frugal.h) must report
# the very same message for the same setting. Needs the CPU-only binary (build/frugal). Prints one
# line per check and ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-serve-api.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
trap 'rm -rf "$TMP"' EXIT INT TERM
[ -x "$BIN" ] || { bad "no $BIN (build first)"; echo "$pass passed, $fail failed"; exit 1; }
MODEL=tests/fixtures/qwen2-tiny
[ -f "$MODEL/config.json" ] || { bad "no $MODEL"; echo "$pass passed, $fail failed"; exit 1; }

# serve NAME STATUS LINE ARGS...: `frugal serve ARGS` exits STATUS with exactly LINE on stderr
serve() {
    name=$1 want=$2 line=$3
    shift 3
    timeout 20 "$BIN" serve --port 0 --ledger "" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    rc=$?
    got=$(cat "$TMP/err")
    if [ "$rc" != "$want" ]; then bad "$name (exit $rc, want $want: $(head -c 300 "$TMP/err"))"
    elif [ "$got" != "$line" ]; then bad "$name (stderr '$got', want '$line')"
    else ok "$name"; fi
}

# the CLI's message for the same setting: "frugal: MESSAGE" -> MESSAGE
cli_msg() {
    "$BIN" generate --model "$TMP/none" --prompt x "$@" </dev/null 2>&1 >/dev/null | sed -n 's/^frugal: //p'
}

msg=$(cli_msg --device cuda)
case $msg in
*"built without CUDA"*) ok "the CLI refuses cuda in this build" ;;
*) bad "the CLI's --device cuda message: '$msg' (is $BIN the CPU-only build?)" ;;
esac
serve "--device cuda: the API's message and status, before the load" 1 \
    "frugal serve: $msg (unsupported)" --model "$TMP/none" --device cuda
msg=$(cli_msg --device cuda:3)
serve "--device cuda:3: the same" 1 "frugal serve: $msg (unsupported)" --model "$TMP/none" --device cuda:3
msg=$(cli_msg --device cpu --kv-cache int8)
[ -n "$msg" ] && ok "the CLI refuses an int8 KV cache on the CPU" || bad "no CLI message for --kv-cache int8"
serve "--kv-cache int8 on the CPU: the API's, before the load" 1 \
    "frugal serve: $msg (unsupported)" --model "$TMP/none" --device cpu --kv-cache int8
# the load: the API's not_found and invalid_argument, exit 1 either way
serve "missing model: not_found" 1 "frugal serve: $TMP/none: no such file or folder (not_found)" \
    --model "$TMP/none"
printf 'GGUF but not really' >"$TMP/bad.gguf"
"$BIN" serve --port 0 --ledger "" --model "$TMP/bad.gguf" </dev/null >"$TMP/out" 2>"$TMP/err"; rc=$?
if [ "$rc" = 1 ] && grep -q '^frugal serve: .*bad\.gguf.* (invalid_argument)$' "$TMP/err" && [ "$(wc -l <"$TMP/err")" = 1 ]; then
    ok "unreadable model: one line, invalid_argument, exit 1"
else bad "unreadable model (exit $rc: $(head -c 300 "$TMP/err"))"; fi
# a well-formed setting the server checks itself stays a usage error
serve "--quant on CUDA is a usage error" 2 \
    "frugal serve: --quant is the CPU's; on cuda use --weights int8|int4" --model "$MODEL" --device cuda --quant q8

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
