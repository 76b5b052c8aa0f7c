#!/bin/sh
# vl_bench.sh — the Qwen2.5-VL benchmark of frugal against HF transformers on one H200, in one go:
#   1. build-cuda/gpu-vl-bench (built with make when missing);
#   2. three test images, 448 / 896 / 1344 pixels a side (vl_hf.py --make-images, PIL);
#   3. HF (vl_hf.py): random weights of the Qwen2.5-VL-7B shape made on the GPU in bf16 and saved
#      once with save_pretrained (VL_BENCH_DIR, default $TMPDIR/frugal-vl-7b: ~17 GB), then HF's
#      ViT ms, TTFT (processor + vision + prefill + first token), decode tok/s, joules;
#   4. frugal (gpu-vl-bench) on the SAME saved weights: ViT ms and token counts, TTFT at 100 / 50
#      / 25 / 10 % kept (query-guided pruning) and plain downsampling to the same counts, an
#      encoder-cache hit (and one that also keeps the KV of the prompt up to the image's end),
#      decode tok/s, joules;
#   5. one table (printed last) with the issue's three targets as PASS / FAIL lines, and a CSV.
#
# Usage: bench/gpu/vl_bench.sh [OUTDIR]        (default ./vl-bench-out)
#        VL_BENCH_BIN=DIR/gpu-vl-bench (e.g. from a gpu-bundle.sh bundle; its lib/ beside it is put
#        on LD_LIBRARY_PATH), VL_BENCH_DIR=where the weights go, PYTHON=python3.
# Output: OUTDIR/vl_bench.csv (rows: source,metric,res,keep,tokens,value,unit), hf.log,
#         frugal.log, table.txt. Exit status 0 when both sides ran (the targets never fail it).
set -u
out=${1:-vl-bench-out}
mkdir -p "$out"
work=${VL_BENCH_DIR:-${TMPDIR:-/tmp}/frugal-vl-7b}
mkdir -p "$work"
csv="$out/vl_bench.csv"
echo "source,metric,res,keep,tokens,value,unit" >"$csv"
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
py=${PYTHON:-python3}
fix=tests/fixtures/qwen25vl-tiny
status=0

# ---- 1. binary
bin=${VL_BENCH_BIN:-build-cuda/gpu-vl-bench}
if [ ! -x "$bin" ]; then
    make -j"$(nproc 2>/dev/null || echo 8)" "$bin" >"$out/build.log" 2>&1 ||
        { echo "vl_bench: build failed (see $out/build.log)"; tail -n 20 "$out/build.log"; exit 1; }
    echo "== build: $(el) s"
fi
bdir=$(dirname "$bin")
[ -d "$bdir/lib" ] && export LD_LIBRARY_PATH="$bdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
t0=$(date +%s) # the benchmark's own time starts here

# ---- 2. images
imgs=$("$py" bench/gpu/vl_hf.py --make-images "$work/img") || { echo "vl_bench: images failed"; exit 1; }
echo "== images: $imgs ($(el) s)"

# ---- 3. HF: build + save the weights, measure
timeout 300 "$py" bench/gpu/vl_hf.py --model-dir "$work/model" --fixture "$fix" --images "$imgs" \
    --csv "$out/hf.csv" >"$out/hf.log" 2>&1
rc=$?
echo "== HF side: exit $rc ($(el) s)"
[ "$rc" -eq 0 ] || { status=1; tail -n 15 "$out/hf.log"; }
grep -h '^csv,' "$out/hf.csv" 2>/dev/null | sed 's/^csv,//' >>"$csv"

# ---- 4. frugal on the same weights
if [ -f "$work/model/config.json" ]; then
    i1=$(echo "$imgs" | cut -d, -f1) i2=$(echo "$imgs" | cut -d, -f2) i3=$(echo "$imgs" | cut -d, -f3)
    timeout 300 "$bin" "$work/model" "$i1" "$i2" "$i3" "$out/frugal.csv" \
        >"$out/frugal.log" 2>&1
    rc=$?
    echo "== frugal side: exit $rc ($(el) s)"
    [ "$rc" -eq 0 ] || { status=1; tail -n 15 "$out/frugal.log"; }
    grep -h '^csv,' "$out/frugal.csv" 2>/dev/null | sed 's/^csv,//' >>"$csv"
else
    echo "== frugal side: no saved model (HF side failed)"
    status=1
fi

# ---- 5. the table
"$py" - "$csv" <<'EOF' | tee "$out/table.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def get(src, metric, res, keep=1.0):
    for r in rows:
        if r["source"] == src and r["metric"] == metric and int(r["res"]) == res and \
           abs(float(r["keep"]) - keep) < 1e-6:
            return float(r["value"]), int(r["tokens"])
    return None, None
def f(v, unit=""):
    return "-" if v is None else ("%.1f%s" % (v, unit))
print("Qwen2.5-VL-7B shape, random bf16 weights, one H200 (ms unless noted)")
print("%-40s %10s %10s %8s" % ("", "HF", "frugal", "tokens"))
for res in (448, 896, 1344):
    for m in ("vit_ms", "vit_plus_prefill_ms", "ttft_ms"):
        h, n = get("hf", m, res)
        g, n2 = get("frugal", m, res)
        print("%-40s %10s %10s %8s" % ("%s %d" % (m, res), f(h), f(g), n2 if n2 is not None else (n or "-")))
for res in (448, 896, 1344):
    g, n2 = get("frugal", "vit_rgb_ms", res)
    print("%-40s %10s %10s %8s" % ("vit_ms %d from 8-bit (device patchify)" % res, "", f(g), n2 or "-"))
    for m in ("ttft_pre_ms", "ttft_vit_ms", "ttft_prefill_ms"):
        g, n2 = get("frugal", m, res)
        print("%-40s %10s %10s %8s" % ("  %s %d" % (m, res), "", f(g), n2 or "-"))
for keep in (0.5, 0.25, 0.10):
    p, n = get("frugal", "ttft_prune_ms", 896, keep)
    d, _ = get("frugal", "ttft_downsample_ms", 896, keep)
    print("%-40s %10s %10s %8s" % ("ttft 896 pruned to %d%%" % round(keep * 100), "", f(p), n or "-"))
    print("%-40s %10s %10s %8s" % ("ttft 896 downsampled to %d%%" % round(keep * 100), "", f(d), n or "-"))
miss, _ = get("frugal", "ttft_cache_miss_ms", 896)
hit, _ = get("frugal", "ttft_cache_hit_ms", 896)
print("%-40s %10s %10s" % ("ttft 896 encoder-cache miss", "", f(miss)))
print("%-40s %10s %10s" % ("ttft 896 encoder-cache hit", "", f(hit)))
pfx, _ = get("frugal", "ttft_prefix_hit_ms", 896)
print("%-40s %10s %10s" % ("ttft 896 encoder + KV-prefix hit", "", f(pfx)))
for m, u in (("decode_tok_s", " tok/s"), ("request_joules", " J"), ("request_s", " s")):
    h, _ = get("hf", m, 896)
    g, _ = get("frugal", m, 896)
    print("%-40s %10s %10s" % (m + " 896 (64 tokens)", f(h, u), f(g, u)))
print()
def target(name, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else ("FAIL" if ok is not None else "MISSING"), name, detail))
h, _ = get("hf", "vit_plus_prefill_ms", 896)
g, _ = get("frugal", "vit_plus_prefill_ms", 896)
target("ViT + prefill 896 >= 3x faster than HF", None if not (h and g) else h / g >= 3,
       "HF %s ms / frugal %s ms = %s" % (f(h), f(g), "-" if not (h and g) else "%.2fx" % (h / g)))
a, _ = get("frugal", "ttft_ms", 896)
b, _ = get("frugal", "ttft_prune_ms", 896, 0.25)
target("TTFT at 25 % kept >= 2x faster than 100 %", None if not (a and b) else a / b >= 2,
       "%s ms / %s ms = %s" % (f(a), f(b), "-" if not (a and b) else "%.2fx" % (a / b)))
target("TTFT on a cache hit <= 30 % of a miss", None if not (miss and hit) else hit / miss <= 0.30,
       "%s ms / %s ms = %s" % (f(hit), f(miss), "-" if not (miss and hit) else "%.0f %%" % (100 * hit / miss)))
target("  (with the KV prefix of the image kept too) <= 30 % of a miss",
       None if not (miss and pfx) else pfx / miss <= 0.30,
       "%s ms / %s ms = %s" % (f(pfx), f(miss), "-" if not (miss and pfx) else "%.0f %%" % (100 * pfx / miss)))
EOF
echo "== total: $(el) s (csv: $csv)"
exit $status
