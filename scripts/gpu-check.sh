#!/bin/sh
# gpu-check.sh — the CUDA backend's complete check on one GPU host (Hopper, sm_90), in one go:
#   1. device and driver (nvidia-smi), clocks before and after;
#   2. build: `make -j cuda` (nvcc, sm_90 + compute_90 PTX), or a prebuilt bundle when
#      GPU_BUNDLE names a .tar.xz holding gpu-check, gpu-bench, gpu-e2e and lib/ (for hosts
#      without the CPU build's libraries);
#   3. every kernel and the decoder against the CPU references on fresh random inputs
#      (build-cuda/gpu-check; tolerances by dtype, NaN never passes, outputs poisoned);
#   4. the fixture models end to end against their HF references and the CPU decoder (gpu-e2e;
#      with the multimodal checks: image rows + M-RoPE vs the CPU decoder, qwen25vl-tiny on CUDA
#      vs HF); the CUDA vision tower (gpu-vision); the CUDA Whisper vs the CPU reference and
#      its benchmark (gpu-whisper, gpu-whisper --bench); `frugal-cuda generate --device cuda --image`
#      on the fixture vs HF (prompt ids, grid, last logits < 2e-2, the 12 greedy ids);
#      the CUDA ONNX executor on the PP-OCR models and every op fixture against onnxruntime and
#      the CPU executor, and its pages/s bench (gpu-onnx); with GPU_OCR_PAGES, the whole PP-OCR
#      page pipeline on CPU and CUDA over those pages, scored, and its pages/s (gpu-ppocr);
#   5. the Llama-3-8B-shape benchmarks (gpu-bench);
#   6. compute-sanitizer memcheck over `gpu-check --quick` and `gpu-whisper --quick`;
#   7. a summary: pass/fail counts, failures, the benchmark table (printed last).
#
# Usage: scripts/gpu-check.sh [OUTDIR]     (default: $GPU_CHECK_OUT, else ./gpu-check-out)
# Logs: OUTDIR/{gpu.txt,build.log,check.log,e2e.log,vision.log,whisper.log,sanitizer-whisper.log,cli_vl.json,onnx.log,sanitizer.log,bench.log,
#       summary.txt}.
# Exit status: 0 when every check passed (benchmarks never fail the script).
set -u
out=${1:-${GPU_CHECK_OUT:-gpu-check-out}}
mkdir -p "$out"
sum="$out/summary.txt"
: >"$sum"
note() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
status=0

# ---- 1. device
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
    nvcc --version 2>/dev/null | tail -n 2
    uname -a
} >"$out/gpu.txt" 2>&1
note "== device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"

# ---- 2. binaries
bin=build-cuda
libs=""
if [ -n "${GPU_BUNDLE:-}" ] && [ -f "$GPU_BUNDLE" ]; then
    bdir=${TMPDIR:-/tmp}/frugal-gpu-bundle
    rm -rf "$bdir" && mkdir -p "$bdir" && tar xJf "$GPU_BUNDLE" -C "$bdir"
    if LD_LIBRARY_PATH="$bdir/lib" "$bdir/gpu-check" --version >/dev/null 2>&1 &&
       LD_LIBRARY_PATH="$bdir/lib" "$bdir/gpu-bench" --version >/dev/null 2>&1; then
        bin=$bdir
        libs=$bdir/lib
        note "== binaries: prebuilt bundle $GPU_BUNDLE ($(el) s)"
    else
        note "== bundle does not run here ($(LD_LIBRARY_PATH="$bdir/lib" "$bdir/gpu-check" --version 2>&1 | head -n 1)); building"
    fi
fi
if [ "$bin" = build-cuda ]; then
    j=$(nproc 2>/dev/null || echo 8)
    if make -j"$j" cuda >"$out/build.log" 2>&1; then
        note "== build: make cuda ok ($(el) s)"
    elif make -j"$j" cuda-tools >>"$out/build.log" 2>&1; then
        note "== build: make cuda failed (CPU-build libraries missing?); cuda-tools ok ($(el) s)"
    else
        note "== build: FAILED (see build.log)"
        tail -n 30 "$out/build.log"
        exit 1
    fi
fi
export LD_LIBRARY_PATH="${libs:+$libs:}${LD_LIBRARY_PATH:-}"

# ---- 3. kernels and decoder vs CPU references
timeout 240 "$bin/gpu-check" >"$out/check.log" 2>&1
rc=$?
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/check.log" | tail -n 1)
note "== gpu-check (kernels + decoder vs CPU references): ${line:-no summary} (exit $rc, $(el) s)"
grep -E '^FAIL' "$out/check.log" | head -n 25 | tee -a "$sum"
[ "$rc" -eq 0 ] || status=1

# ---- 4. fixtures end to end
if [ -x "$bin/gpu-e2e" ] && "$bin/gpu-e2e" --version >/dev/null 2>&1; then
    timeout 120 "$bin/gpu-e2e" tests/fixtures >"$out/e2e.log" 2>&1
    rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/e2e.log" | tail -n 1)
    note "== gpu-e2e (fixtures vs HF and CPU decoder): ${line:-no summary} (exit $rc, $(el) s)"
    grep -E '^(ok|FAIL|note) ' "$out/e2e.log" | tee -a "$sum"
    [ "$rc" -eq 0 ] || status=1
else
    note "== gpu-e2e: not built"
fi

# ---- 4b. the CUDA vision tower vs the CPU tower and HF
if [ -x "$bin/gpu-vision" ]; then
    timeout 120 "$bin/gpu-vision" tests/fixtures >"$out/vision.log" 2>&1
    rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/vision.log" | tail -n 1)
    note "== gpu-vision (CUDA vision tower vs CPU tower and HF): ${line:-no summary} (exit $rc, $(el) s)"
    grep -E '^(ok|FAIL) ' "$out/vision.log" | tee -a "$sum"
    [ "$rc" -eq 0 ] || status=1
    timeout 180 "$bin/gpu-vision" --bench >>"$out/vision.log" 2>&1
    note "== gpu-vision --bench (random Qwen2.5-VL-7B-shape tower, exit $?):"
    grep -E '^vit ' "$out/vision.log" | tee -a "$sum"
else
    note "== gpu-vision: not built"
fi

# ---- 4b'. the CUDA Whisper vs the CPU reference (fixtures + random d128), and its benchmark
if [ -x "$bin/gpu-whisper" ]; then
    timeout 300 "$bin/gpu-whisper" tests/fixtures >"$out/whisper.log" 2>&1
    rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/whisper.log" | tail -n 1)
    note "== gpu-whisper (CUDA Whisper vs the CPU reference): ${line:-no summary} (exit $rc, $(el) s)"
    grep -E '^(FAIL|note) ' "$out/whisper.log" | tee -a "$sum"
    [ "$rc" -eq 0 ] || status=1
    timeout 400 "$bin/gpu-whisper" --bench >>"$out/whisper.log" 2>&1
    note "== gpu-whisper --bench (random large-v3-turbo and small shapes, exit $?):"
    grep -E '^whisper-bench ' "$out/whisper.log" | tee -a "$sum"
else
    note "== gpu-whisper: not built"
fi

# ---- 4c. the CLI with an image on CUDA: frugal-cuda generate --device cuda vs HF's ref.json
if [ -x "$bin/frugal-cuda" ]; then
    fx=tests/fixtures
    timeout 60 "$bin/frugal-cuda" generate --device cuda --model "$fx/qwen25vl-tiny" \
        --image "$fx/vl-images/odd-123x77.jpg" --prompt "Describe this image." --max-tokens 12 \
        --temperature 0 --ignore-eos --last-logits --json >"$out/cli_vl.json" 2>"$out/cli_vl.err"
    rc=$?
    r=$(python3 - "$out/cli_vl.json" "$fx/ref/qwen25vl-tiny" <<'PY' 2>&1
import json, struct, sys, math
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL no JSON (%s)" % e); sys.exit(1)
ref = json.load(open(sys.argv[2] + "/ref.json"))
c = [x for x in ref["cases"] if x["name"] == "one_image"][0]
def npy(p):
    b = open(p, "rb").read(); n = struct.unpack("<H", b[8:10])[0]
    return struct.unpack("<%df" % ((len(b) - 10 - n) // 4), b[10 + n:])
ll = npy(sys.argv[2] + "/" + c["last_logits"]); g = j.get("last_logits", [])
d = math.sqrt(sum((a - b) ** 2 for a, b in zip(g, ll)) / sum(b * b for b in ll)) if len(g) == len(ll) else float("inf")
errs = []
if j.get("prompt_ids") != c["input_ids"]: errs.append("prompt ids differ")
if j.get("image_grid_thw") != c["image_grid_thw"]: errs.append("grid differs")
if not d <= 2e-2: errs.append("last logits rel L2 %.2e" % d)
agree = sum(a == b for a, b in zip(j.get("ids", []), c["greedy_ids"]))
if agree != len(c["greedy_ids"]): errs.append("greedy %d/%d" % (agree, len(c["greedy_ids"])))
print(("FAIL " + "; ".join(errs)) if errs else "ok   last logits vs HF %.2e, greedy %d/%d" % (d, agree, agree))
sys.exit(1 if errs else 0)
PY
)
    prc=$?
    note "== frugal-cuda generate --device cuda --image (qwen25vl-tiny one_image vs HF): exit $rc"
    note "$r"
    [ "$rc" -eq 0 ] && [ "$prc" -eq 0 ] || { status=1; head -c 400 "$out/cli_vl.err" | tee -a "$sum"; }
else
    note "== frugal-cuda: not built"
fi

# ---- 4d. the CUDA ONNX executor (PP-OCR det / rec / cls, every op) vs onnxruntime and the CPU
#          executor, then its bench (models/ppocr must be in the checkout: scripts/install-deps.sh)
if [ -x "$bin/gpu-onnx" ]; then
    timeout 400 "$bin/gpu-onnx" . >"$out/onnx.log" 2>&1
    rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/onnx.log" | tail -n 1)
    note "== gpu-onnx (CUDA ONNX executor vs onnxruntime and the CPU executor): ${line:-no summary} (exit $rc, $(el) s)"
    grep -E '^FAIL' "$out/onnx.log" | head -n 40 | tee -a "$sum"
    grep -E '^PASS (model|batch|graph)' "$out/onnx.log" | tee -a "$sum"
    grep -E '^onnx-bench' "$out/onnx.log" | tee -a "$sum"
    [ "$rc" -eq 0 ] || status=1
else
    note "FAIL gpu-onnx: not built (make cuda builds it; it needs the CPU build's libfrugal.a)"
    status=1
fi

# ---- 4e. the PP-OCR page pipeline on real pages, CPU and CUDA (gpu-ppocr), when GPU_OCR_PAGES
#          names a folder of pages with their truth (bench/ocr_eval/gen_invoices.py --out DIR):
#          both readers scored by bench/ocr_eval/score.py, then pages/s with many pages in flight
if [ -n "${GPU_OCR_PAGES:-}" ] && [ -d "$GPU_OCR_PAGES" ]; then
    if [ -x "$bin/gpu-ppocr" ]; then
        timeout 500 "$bin/gpu-ppocr" --models models/ppocr --threads "${GPU_OCR_THREADS:-8}" --seconds 20 \
            "$GPU_OCR_PAGES" "$out/ppocr" >"$out/ppocr.log" 2>&1
        rc=$?
        note "== gpu-ppocr (PP-OCR pages on CPU and CUDA): exit $rc ($(el) s)"
        grep -E '^gpu-ppocr' "$out/ppocr.log" | tee -a "$sum"
        for d in cpu cuda; do
            python3 bench/ocr_eval/score.py --truth "$GPU_OCR_PAGES" --out "$out/ppocr/$d" \
                --engine "ppocr-$d" --seconds 1 2>&1 | tail -n 3 | tee -a "$sum"
        done
        [ "$rc" -eq 0 ] || status=1
    else
        note "FAIL gpu-ppocr: not built (make cuda builds it)"
        status=1
    fi
fi

# ---- 5. benchmarks
bstd=${TMPDIR:-/tmp}/gpu-bench.stdout
timeout 300 "$bin/gpu-bench" --out "$out/bench.log" >"$bstd" 2>&1
rc=$?
[ -s "$out/bench.log" ] || cp "$bstd" "$out/bench.log"
tail -n 5 "$bstd" | grep -iE 'error|abort|fail' | tee -a "$sum"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >>"$out/gpu.txt" 2>&1
note "== gpu-bench: exit $rc ($(el) s)"

# ---- 6. compute-sanitizer (after the benchmarks: it is the slowest step)
cs=$(command -v compute-sanitizer 2>/dev/null || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$cs" ]; then
    timeout 300 "$cs" --tool memcheck --leak-check no --error-exitcode 9 "$bin/gpu-check" --quick \
        >"$out/sanitizer.log" 2>&1
    rc=$?
    es=$(grep -E 'ERROR SUMMARY' "$out/sanitizer.log" | tail -n 1)
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/sanitizer.log" | tail -n 1)
    note "== compute-sanitizer memcheck (gpu-check --quick): ${es:-no summary}; ${line:-} (exit $rc, $(el) s)"
    [ "$rc" -eq 0 ] || status=1
    if [ -x "$bin/gpu-whisper" ]; then
        timeout 400 "$cs" --tool memcheck --leak-check no --error-exitcode 9 "$bin/gpu-whisper" \
            --quick tests/fixtures >"$out/sanitizer-whisper.log" 2>&1
        rc=$?
        es=$(grep -E 'ERROR SUMMARY' "$out/sanitizer-whisper.log" | tail -n 1)
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/sanitizer-whisper.log" | tail -n 1)
        note "== compute-sanitizer memcheck (gpu-whisper --quick): ${es:-no summary}; ${line:-} (exit $rc, $(el) s)"
        [ "$rc" -eq 9 ] && status=1 # memory errors (a timeout is noted, not failed)
    fi
else
    note "== compute-sanitizer: not found"
fi

# ---- 6b. hardware counters of the decode kernels (GPU_PROFILE=1)
if [ "${GPU_PROFILE:-0}" = 1 ]; then
    ncu=$(command -v ncu 2>/dev/null || echo /usr/local/cuda/bin/ncu)
    timeout 90 "$ncu" --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy --section LaunchStats \
        -k regex:'k_gemv|k_attn|k_stream' "$bin/gpu-bench" --profile >"$out/ncu.txt" 2>&1
    note "== ncu profile: exit $? ($(el) s)"
fi

# ---- 7. summary (last)
echo
echo "==================== gpu-check summary ===================="
cat "$sum"
sed -n '/==== summary/,$p' "$out/bench.log" | tee -a "$sum"
echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL) ($(el) s)"
exit $status
