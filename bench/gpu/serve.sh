#!/bin/sh
# serve.sh — the serving path on a GPU host with a Llama-3-8B-shaped model (hidden 4096, 32 layers,
# 32/8 heads, FFN 14336, vocab 128256; random weights written by `frugal mkmodel`):
#   1. `frugal serve --device cuda` with the meter sampling NVML's energy counter every 20 ms;
#   2. J per generated token from the ledger at batch 1 (3 sequential requests) and batch 32
#      (32 at once), each a ~500-token prompt (PROMPT_REPEAT phrases) and 128 generated tokens
#      (ignore_eos, greedy);
#   3. bench/loadgen.c at two arrival rates around saturation, tiers P0/P1/P2 = 20/30/50 %.
# Usage: BIN=DIR sh bench/gpu/serve.sh OUTDIR
#   DIR holds frugal-cuda and loadgen (default: build-cuda and build); python3 drives step 2.
set -u
out=${1:-serve-out}
mkdir -p "$out"
bin=${BIN:-build-cuda}
lg=${LOADGEN:-$bin/loadgen}
[ -x "$lg" ] || lg=build/loadgen
m=${MODEL8B:-${TMPDIR:-/tmp}/llama8b-shape.gguf}
port=${PORT:-8093}
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
if [ ! -e "$m" ]; then
    "$bin/frugal-cuda" mkmodel --out "$m" --arch llama --hidden 4096 --layers 32 --heads 32 \
        --kv-heads 8 --ffn 14336 --vocab 128256 --ctx 8192 --gguf-type f16 >"$out/mkmodel.log" 2>&1 ||
        { echo "mkmodel failed"; tail -5 "$out/mkmodel.log"; exit 1; }
fi
echo "== model $(du -h "$m" | cut -f1) ready at $(el) s"
printf '{"meter": {"sample_ms": 20}}\n' >"$out/meter.json"
rm -f "$out"/ledger.db*
# shellcheck disable=SC2086
"$bin/frugal-cuda" serve --model "$m" --device "${DEVICE:-cuda}" --port "$port" --meter-config "$out/meter.json" \
    --ledger "$out/ledger.db" --served-model-name m8b ${SERVE_OPTS:-} >"$out/serve.log" 2>&1 &
pid=$!
i=0
until python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { echo "server exited"; tail -20 "$out/serve.log"; exit 1; }
    i=$((i + 1))
    [ $i -gt 900 ] && { echo "server not ready"; kill $pid; exit 1; }
    sleep 0.5
done
echo "== server ready at $(el) s"
python3 - "$port" "$out/ledger.db" "${PROMPT_REPEAT:-26}" <<'PY' | tee "$out/meter.txt"
import json, sqlite3, sys, threading, time, urllib.error, urllib.request
port, ledger = sys.argv[1], sys.argv[2]
prompt = " ".join("account %d balance" % i for i in range(int(sys.argv[3])))
def req():
    body = json.dumps({"model": "m8b", "prompt": prompt, "max_tokens": 128, "temperature": 0,
                       "ignore_eos": True}).encode()
    r = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, body,
                               {"Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(r, timeout=600))
    except urllib.error.HTTPError as e:
        print("request failed: %d %s" % (e.code, e.read()[:300]))
        raise
def rows(since):
    time.sleep(1.0)  # the ledger row is written one meter sample after the response
    db = sqlite3.connect(ledger)
    r = db.execute("SELECT tokens_in, tokens_out, joules, latency_s FROM requests WHERE t_end >= ?",
                   (since,)).fetchall()
    db.close()
    return r
req()  # warm-up: graphs, cuBLAS heuristics
for n in (1, 32):
    runs = 3 if n == 1 else 1
    for k in range(runs):
        t = time.time()
        th = [threading.Thread(target=req) for _ in range(n)]
        [x.start() for x in th]
        [x.join() for x in th]
        wall = time.time() - t
        rs = rows(t)
        tin = sum(r[0] for r in rs); tout = sum(r[1] for r in rs); j = sum(r[2] or 0 for r in rs)
        print("batch %2d run %d: %d requests, %d prompt + %d generated tokens in %.2f s -> %.0f tok/s "
              "generated; ledger %.1f J -> %.3f J per generated token" %
              (n, k + 1, len(rs), tin, tout, wall, tout / wall, j, j / max(tout, 1)))
PY
for rate in ${RATES:-16 24}; do
    echo "== loadgen --rate $rate"
    "$lg" --url "http://127.0.0.1:$port" --model m8b --rate "$rate" --duration "${DURATION:-40}" \
        --mix 0.2,0.3,0.5 --prompt 64:256 --output 32:128 2>&1 | tee "$out/loadgen-$rate.txt" | tail -8
done
kill -TERM $pid
wait $pid 2>/dev/null
echo "== done at $(el) s"
