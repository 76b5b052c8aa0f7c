#!/bin/sh
# run.sh - the OCR evaluation harness: generates the evaluation set with gen_invoices.py (evaluation
# only, never tuned on), runs `frugal ocr` on every page with NO --lang, scores the fields and the
# text against the generator's ground truth (score.py), one block per engine, side by side.
#
#   sh bench/ocr_eval/run.sh [--frugal BIN] [--set DIR] [--n-en N] [--n-zh N] [--seed S]
#                            [--engine NAME]...
#
# --engine NAME (repeatable; default: tesseract) is passed to `frugal ocr --engine NAME` when the
# CLI offers that flag; when it does not, only the built-in engine (tesseract) can run, and any
# other name is reported as unavailable. Pages run one after the other on one core
# (OMP_THREAD_LIMIT=1); the time is the whole `frugal ocr` process per page (decode, OCR, fields,
# and the engine's start-up), so pages/s per core is a lower bound of the server's.
# Needs python3 with Pillow (Debian python3-pil) and the fonts listed in gen_invoices.py.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
frugal=${FRUGAL_BIN:-build/frugal}
py=${PYTHON:-python3}
set_dir=""
n_en=20 n_zh=20 seed=2024 engines=""
while [ $# -gt 0 ]; do
    case "$1" in
    --frugal) frugal=$2; shift 2 ;;
    --set) set_dir=$2; shift 2 ;;
    --n-en) n_en=$2; shift 2 ;;
    --n-zh) n_zh=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --engine) engines="$engines $2"; shift 2 ;;
    --misses) misses=--misses; shift ;;
    *) echo "usage: run.sh [--frugal BIN] [--set DIR] [--n-en N] [--n-zh N] [--seed S] [--engine NAME]..." >&2
       exit 2 ;;
    esac
done
[ -n "$engines" ] || engines=tesseract
[ -x "$frugal" ] || { echo "run.sh: $frugal is not an executable (build it: make)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$set_dir" ]; then
    set_dir=$work/set
    "$py" "$here/gen_invoices.py" --out "$set_dir" --n-en "$n_en" --n-zh "$n_zh" --seed "$seed"
fi
has_engine_flag=0
"$frugal" ocr --help 2>&1 | grep -q -- "--engine" && has_engine_flag=1
export OMP_THREAD_LIMIT=1
for eng in $engines; do
    if [ "$has_engine_flag" = 0 ] && [ "$eng" != tesseract ]; then
        echo "engine $eng: not available (frugal ocr has no --engine flag; only tesseract runs)"
        continue
    fi
    out=$work/out-$eng
    mkdir -p "$out"
    flag=""
    [ "$has_engine_flag" = 1 ] && flag="--engine $eng"
    t0=$(date +%s.%N)
    for img in "$set_dir"/*.png "$set_dir"/*.jpg "$set_dir"/*.webp; do
        [ -f "$img" ] || continue
        name=$(basename "$img"); name=${name%.*}
        # shellcheck disable=SC2086
        "$frugal" ocr "$img" --force-ocr $flag > "$out/$name.out.json" 2> "$out/$name.err" ||
            echo "  $name: frugal ocr failed: $(head -c 200 "$out/$name.err")"
    done
    t1=$(date +%s.%N)
    secs=$(awk "BEGIN { print $t1 - $t0 }")
    "$py" "$here/score.py" --truth "$set_dir" --out "$out" --engine "$eng" --seconds "$secs" \
        --cores 1 ${misses:-}
done
