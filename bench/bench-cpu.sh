#!/bin/sh
# bench-cpu.sh — CPU decode benchmark on a Qwen2.5-0.5B-shaped random model (hidden 896, 24 layers,
# 14 heads, 2 KV heads, FFN 4864, vocab 151936, tied embeddings), in fp32 and with the CPU's own
# q8 and q4 weight formats. Builds bench/bench_decode.c against build/libfrugal.a with the
# library's flags, makes the model once with `frugal mkmodel` in a folder outside git, runs the
# three configurations and writes the table into the CPU section of bench/RESULTS.md.
#
#   sh bench/bench-cpu.sh                 # BENCH_DIR (default $TMPDIR/frugal-bench) holds the model
#   BENCH_ARGS="--prompt 128 --gen 32" sh bench/bench-cpu.sh   # a quicker run
#   BENCH_NO_RESULTS=1 sh bench/bench-cpu.sh                   # print only, leave RESULTS.md alone
#   BENCH_LIB=path/libfrugal.a BENCH_NO_MAKE=1 ...   # link a given library, do not run make
set -e
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ -n "${BENCH_NO_MAKE:-}" ] || make -s build/libfrugal.a build/frugal
LIB=${BENCH_LIB:-build/libfrugal.a}

PKGS="libpcre2-8 libcjson"
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter -O3 \
 -fno-omit-frame-pointer -g -mavx2 -mfma -mf16c -pthread -Iinclude -Isrc $(pkg-config --cflags $PKGS 2>/dev/null)"
LIBS="$(pkg-config --libs $PKGS 2>/dev/null || echo -lpcre2-8 -lcjson) -lutf8proc -lopenblas -lm -pthread"
# the library may reference the serving stack's libraries too
LIBS="$LIBS $(pkg-config --libs libmicrohttpd sqlite3 libcurl zlib 2>/dev/null || true)"
# shellcheck disable=SC2086
cc $CFLAGS bench/bench_decode.c "$LIB" -o build/bench_decode $LIBS

DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/frugal-bench}
MODEL="$DIR/qwen2-0.5b-shape"
mkdir -p "$DIR"
if [ ! -f "$MODEL/config.json" ]; then
    echo "making $MODEL ..." >&2
    build/frugal mkmodel --out "$MODEL" --arch qwen2 --hidden 896 --layers 24 --heads 14 \
        --kv-heads 2 --ffn 4864 --vocab 151936 --tied --format hf --seed 1
fi

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
OUT="$DIR/results"
mkdir -p "$OUT"
for q in none q8 q4; do
    echo "== $q" >&2
    qa=""
    [ "$q" = none ] || qa="--quant $q"
    # shellcheck disable=SC2086
    build/bench_decode "$MODEL" $qa ${BENCH_ARGS:-} > "$OUT/$q.txt"
    cat "$OUT/$q.txt" >&2
done

val() { sed -n "s/^$2: //p" "$OUT/$1.txt"; }
CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
CORES=$(nproc)
MEM=$(free -g | awk '/^Mem:/ {print $2}')
TABLE="$OUT/section.md"
{
    echo "<!-- cpu-bench:begin -->"
    echo "## CPU decoder (bench/bench-cpu.sh)"
    echo
    echo "Machine: $CPU, $CORES cores, ${MEM} GiB; $(date -u +%Y-%m-%d)."
    echo "Model: random weights in the Qwen2.5-0.5B shape (\`frugal mkmodel --arch qwen2 --hidden 896"
    echo "--layers 24 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --tied\`), HF safetensors f32."
    echo "Command: \`sh bench/bench-cpu.sh\` (bench_decode: 512-token prompt in one forward, then 128"
    echo "greedy tokens at batch 1, three times from the same prompt state: median reported, best in"
    echo "brackets; threads = cores)."
    echo
    echo "| weights | load s | quantise s | prompt tok/s | decode tok/s | weights MiB/token | peak RSS MiB | copy GB/s | kernel in cache GB/s | decode limit tok/s | decode / limit |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for q in none q8 q4; do
        name=$q
        [ "$q" = none ] && name=f32
        echo "| $name | $(val $q load_s) | $(val $q quantize_s) | $(val $q prompt_tok_s) | $(val $q gen_tok_s) ($(val $q gen_tok_s_best)) | $(val $q weight_mib_per_token) | $(val $q peak_rss_mib) | $(val $q bw_copy_gb_s) | $(val $q kernel_in_cache_gb_s) | $(val $q gen_limit_tok_s) | $(val $q gen_share_of_limit) |"
    done
    echo
    echo "Decode / limit uses the median decode speed."
    echo "Decode limit = copy bandwidth (bytes read + written per second, 1 GiB arrays, threads = cores)"
    echo "/ (weight bytes streamed per token + KV cache bytes read at the mean context). Read-only"
    echo "bandwidth and the share against it: $(for q in none q8 q4; do printf '%s %s GB/s %s; ' "$q" "$(val $q bw_read_gb_s)" "$(val $q gen_share_of_read_limit)"; done)"
    echo "Kernel in cache = the decode matmul (one token) over 1024 rows of a layer's gate matrix that"
    echo "stay in cache, GB/s of weights: the compute ceiling; where it is near or below the memory"
    echo "bandwidth, decode is compute-bound on this machine (load average at the start: $LOAD)."
    echo "<!-- cpu-bench:end -->"
} > "$TABLE"
cat "$TABLE"

if [ -z "${BENCH_NO_RESULTS:-}" ]; then
    RES="$ROOT/bench/RESULTS.md"
    [ -f "$RES" ] || printf '# Benchmark results\n\n' > "$RES"
    # drop the old section (wherever it is, with the blank lines around it) and trailing blank
    # lines, then append the new one after one blank line
    awk '/<!-- cpu-bench:begin -->/ { skip = 1; blank = 0; next }
         skip { if (/<!-- cpu-bench:end -->/) { skip = 0; after = 1 } next }
         NF == 0 { blank++; next }
         { if (after && printed && blank == 0) blank = 1
           for (; blank > 0; blank--) print ""
           print; printed = 1; after = 0 }' "$RES" > "$RES.tmp"
    echo >> "$RES.tmp"
    cat "$TABLE" >> "$RES.tmp"
    mv "$RES.tmp" "$RES"
    echo "updated $RES" >&2
fi
