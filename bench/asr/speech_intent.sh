#!/bin/sh
# bench/asr/speech_intent.sh — the speech -> intent figures of bench/RESULTS.md ("ASR: speech ->
# intent on voices the tuning never heard"): generates the tuning and evaluation spoken sets and
# reports both with the shipped defaults (n-best rescoring on; tuning set with the weight sweep)
# and, with BASELINE=1, the decoder before the utterance CMN (running mean, pocketsphinx's dither).
# Run from the repository root after `make`: sh bench/asr/speech_intent.sh OUTDIR [workers, default 2]
set -e
BIN=${FRUGAL_BIN:-build/frugal}
OUT=${1:?usage: speech_intent.sh OUTDIR [workers]}
W=${2:-2}
sh bench/asr/gen_tune.sh "$OUT/tune" 100
sh bench/asr/gen_eval.sh "$OUT/eval" 120
for set in tune eval; do
    if [ "${BASELINE:-0}" = 1 ]; then
        "$BIN" eval-speech --manifest "$OUT/$set/manifest.tsv" --workers "$W" --nbest 10 \
            --no-utt-cmn --ps-args "-dither yes" > "$OUT/$set-baseline.txt"
    fi
    "$BIN" eval-speech --manifest "$OUT/$set/manifest.tsv" --workers "$W" \
        --sweep 0,0.003,0.01,0.02,0.03,0.05,0.1,0.3,1 -v > "$OUT/$set-final.txt"
    grep -E '^\| ' "$OUT/$set-final.txt" | head -10
done
