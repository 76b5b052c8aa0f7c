#!/bin/sh
# check-layers.sh — dependencies point one way: every `#include "..."` in src/ and include/ must
# name a file of the same component or of a lower layer.
#
#   sh scripts/check-layers.sh [ROOT]      ROOT: the tree to check (default: this repository)
#
# Prints one line per violation,
#   src/backend/kv.c:12: includes "engine/engine.h": upward edge from layer backend (2) to layer engine (5)
# then "layers: N files, N includes, N violations"; exits 1 when there is any violation, 0 otherwise.
# Also a violation: an include that resolves to no file in ROOT (same folder, src/, include/: the
# compiler's -Isrc -Iinclude), a file that no row of the table below claims, and an exception
# below that no longer matches an include (so the list only shrinks). tests/cli_layers.sh proves
# that each kind fails. CI runs it (scripts/test-all.sh, and tests/run.sh through cli_layers.sh).
#
# The layer table: rank, component, and the paths it owns (awk regular expressions over the path
# from ROOT; the first matching row wins, so specific rows come before their folder's row). A file
# may include files of its own component and of components of a strictly lower rank. Two
# components of the same rank are siblings and may not include each other. Lower = more basic:
#
#   0  base          errors, logging, files, UTF-8, paths, the masker
#   1  model         model files (safetensors, GGUF, config.json), tokenizer, chat templates
#   1  meter         energy, attribution, cost, ledger, traces (calls nothing above base)
#   2  backend       what every backend shares: the paged KV pool (kv.h), the batch (batch.h),
#                    the sampler (sampler.h)
#   3  backend/cpu   the CPU decoder, reference ops, kernels, q8/q4 quantisation
#   3  backend/cuda  the CUDA decoder and its kernels
#   4  backend-table backend.h (one table of operations over cpu and cuda) and the CUDA row of
#                    that table (backend/cuda/backend_cuda.cu); the CUDA ONNX executor's host
#                    side (backend/cuda/onnx_cuda.c: runs the CPU executor's prepared schedule)
#   5  engine        the serving engine, generation state, single-sequence generate
#   6  stages        image, OCR, audio, ASR, NLU, token budget
#   6  stages/vision visual-token pruning, background patch dropping, the encoder cache
#                    (base and model only; a sibling of the other stages)
#   7  route         modality detection and the plan of stages
#   8  api           the public C API (include/frugal.h and its implementation)
#   9  serve         HTTP server, OpenAI API, assist door, metrics, config
#  10  tools         the frugal commands
#  11  main          src/main.c
LAYERS='
0  base           ^src/base/
1  model          ^src/model/
1  meter          ^src/meter/
4  backend-table  ^src/backend/backend\.(c|h)$
4  backend-table  ^src/backend/cuda/backend_cuda\.cu$
4  backend-table  ^src/backend/cuda/onnx_cuda\.c$
3  backend/cpu    ^src/backend/cpu/
3  backend/cuda   ^src/backend/cuda/
2  backend        ^src/backend/[^/]+$
5  engine         ^src/engine/
6  stages/vision  ^src/stages/vision/
6  stages         ^src/stages/
7  route          ^src/route/
8  api            ^include/frugal\.h$
8  api            ^src/(frugal\.c|frugal_internal\.h|api\.c)$
9  serve          ^src/serve/
10 tools          ^src/tools/
11 main           ^src/main\.c$
'
# Known violations, one per line: including file, the include as written, and why it is still
# there. Each is an edge some change is about to remove; the check fails once it is gone, so the
# line goes with it.
EXCEPTIONS='
'
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || { echo "check-layers: cannot enter $ROOT"; exit 2; }
[ -d src ] || { echo "check-layers: $ROOT has no src/"; exit 2; }
list=$(mktemp) || exit 2
trap 'rm -f "$list"' EXIT
find src include -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
    2>/dev/null | LC_ALL=C sort >"$list"
# shellcheck disable=SC2046
LC_ALL=C awk -v layers="$LAYERS" -v exceptions="$EXCEPTIONS" '
function norm(p,    n, i, parts, out, k) {        # drop "./" and "dir/.." segments
    n = split(p, parts, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "") continue
        if (parts[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
        out[++k] = parts[i]
    }
    p = ""
    for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
    return p
}
function comp(path,    i) {
    for (i = 1; i <= nrow; i++) if (path ~ rx[i]) return i
    return 0
}
BEGIN {
    nrow = 0
    n = split(layers, ln, "\n")
    for (i = 1; i <= n; i++) {
        if (split(ln[i], f, " ") < 3) continue
        nrow++; rank[nrow] = f[1] + 0; name[nrow] = f[2]; rx[nrow] = f[3]
    }
    n = split(exceptions, ln, "\n")
    for (i = 1; i <= n; i++) {
        if (split(ln[i], f, " ") < 2) continue
        exc[f[1] SUBSEP f[2]] = 1; used[f[1] SUBSEP f[2]] = 0
    }
    nfiles = 0; nincl = 0; nbad = 0
}
NR == FNR { have[$0] = 1; files[++nfiles] = $0; next }
FNR == 1 {
    file = FILENAME; sub(/^\.\//, "", file)
    dir = file; sub(/\/[^\/]*$/, "", dir)
    c = comp(file)
    if (!c) { print file ": no layer owns this file (add a row to the table in scripts/check-layers.sh)"; nbad++ }
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
    s = $0; sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", s)
    q = index(s, "\""); if (!q) next
    inc = substr(s, 1, q - 1); nincl++
    t = norm(dir "/" inc)
    if (!(t in have)) t = norm("src/" inc)
    if (!(t in have)) t = norm("include/" inc)
    if (!(t in have)) {
        print file ":" FNR ": includes \"" inc "\", which is no file of the same folder, src/ or include/"
        nbad++; next
    }
    if (!c) next
    d = comp(t)
    if (!d) next                               # reported once for that file
    if (d == c || name[d] == name[c] || rank[d] < rank[c]) next
    key = file SUBSEP inc
    if (key in exc) { used[key]++; next }
    if (rank[d] > rank[c])
        print file ":" FNR ": includes \"" inc "\": upward edge from layer " name[c] " (" rank[c] ") to layer " name[d] " (" rank[d] ")"
    else
        print file ":" FNR ": includes \"" inc "\": edge between sibling layers " name[c] " and " name[d] " (both " rank[c] ")"
    nbad++
}
END {
    for (k in used) if (!used[k]) {
        split(k, p, SUBSEP)
        print "scripts/check-layers.sh: the exception " p[1] " -> " p[2] " matches no include any more: remove it from EXCEPTIONS"
        nbad++
    }
    print "layers: " nfiles " files, " nincl " includes, " nbad " violations"
    exit nbad > 0 ? 1 : 0
}
' "$list" $(cat "$list")
