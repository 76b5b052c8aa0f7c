#!/bin/sh
# front_ab.sh — what the customer-service front's guarantees cost on the GPU serving path, on one
# machine: the same Llama-3-8B-shaped random GGUF (as serve.sh) served three ways, one after the
# other, each measured with batch-1 requests (~483 prompt + 128 generated tokens, greedy,
# ignore_eos) and one batch of 32:
#   full    --meter on, defaults: durable ledger row before the response, and the response's
#           frugal figure waits for the NVML counter sample after the request (meter.final_wait_ms)
#   nowait  --meter on, meter.final_wait_ms = 0 (the durable ledger row only)
#   off     --meter off (no meter, no ledger: the floor)
# Prints client wall time per request, generated tok/s, and the server's own latency.
# Usage: BIN=DIR sh bench/gpu/front_ab.sh OUTDIR   (DIR holds frugal-cuda; scripts/gpu-bundle.sh)
set -u
out=${1:-front-ab}
mkdir -p "$out"
bin=${BIN:-build-cuda}
m=${MODEL8B:-${TMPDIR:-/tmp}/llama8b-shape.gguf}
port=${PORT:-8094}
if [ ! -e "$m" ]; then
    "$bin/frugal-cuda" mkmodel --out "$m" --arch llama --hidden 4096 --layers 32 --heads 32 \
        --kv-heads 8 --ffn 14336 --vocab 128256 --ctx 8192 --gguf-type f16 >"$out/mkmodel.log" 2>&1 ||
        { echo "mkmodel failed"; tail -5 "$out/mkmodel.log"; exit 1; }
fi
for mode in full nowait off; do
    wait_ms=-1 # the default: wait for the final figure
    [ "$mode" = nowait ] && wait_ms=0
    printf '{"meter": {"sample_ms": 20, "final_wait_ms": %s}}\n' "$wait_ms" >"$out/meter-$mode.json"
    opts="--meter on --meter-config $out/meter-$mode.json --ledger $out/ledger-$mode.db"
    [ "$mode" = off ] && opts="--meter off"
    rm -f "$out"/ledger-"$mode".db*
    # shellcheck disable=SC2086
    "$bin/frugal-cuda" serve --model "$m" --device cuda --port "$port" --served-model-name m8b $opts \
        >"$out/serve-$mode.log" 2>&1 &
    pid=$!
    until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
        kill -0 $pid 2>/dev/null || { echo "server exited ($mode)"; tail -20 "$out/serve-$mode.log"; exit 1; }
        sleep 0.5
    done
    python3 - "$port" "$mode" <<'PY'
import json, sys, threading, time, urllib.request
port, mode = sys.argv[1], sys.argv[2]
prompt = " ".join("account %d balance" % i for i in range(26))
def req(res):
    body = json.dumps({"model": "m8b", "prompt": prompt, "max_tokens": 128, "temperature": 0,
                       "ignore_eos": True}).encode()
    r = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, body,
                               {"Content-Type": "application/json"})
    t = time.time()
    j = json.load(urllib.request.urlopen(r, timeout=600))
    res.append((time.time() - t, j["usage"]["completion_tokens"], j.get("frugal", {})))
req([])
walls = []
for k in range(5):
    res = []
    req(res)
    w, n, f = res[0]
    walls.append(w)
    print("%-6s batch  1 run %d: %.3f s, %d generated -> %.1f tok/s; frugal %s" %
          (mode, k + 1, w, n, n / w, json.dumps(f)))
walls.sort()
print("%-6s batch  1 median wall %.3f s" % (mode, walls[2]))
res = []
t = time.time()
th = [threading.Thread(target=req, args=(res,)) for _ in range(32)]
[x.start() for x in th]
[x.join() for x in th]
w = time.time() - t
n = sum(r[1] for r in res)
print("%-6s batch 32: %.3f s, %d generated -> %.0f tok/s; per-request wall p50 %.3f s" %
      (mode, w, n, n / w, sorted(r[0] for r in res)[16]))
PY
    kill -TERM $pid
    wait $pid 2>/dev/null
done
