#!/bin/sh
# bench/asr/gen_tune.sh — the TUNING spoken set: espeak-ng voices en-us, en-us+m3, en-us+f2,
# en-us+m7, en-us+f4 at 140-175 words/min, two of them with brown noise or a soft band limit,
# over the tuning texts (`frugal eval-speech --rows tune`: the intent model's calibration rows,
# never in the domain LM). Every choice of the ASR settings and the rescoring weight is made on
# this set only; bench/asr/gen_eval.sh makes the evaluation set with other voices, speeds,
# pitches and channels. Writes OUT/uNNN.wav (16 kHz mono) and OUT/manifest.tsv.
# Usage (repository root, after make): sh bench/asr/gen_tune.sh OUT [N utterances, default 100]
set -e
BIN=${FRUGAL_BIN:-build/frugal}
OUT=${1:?usage: gen_tune.sh OUT [N]}
N=${2:-100}
command -v espeak-ng >/dev/null && command -v sox >/dev/null ||
    { echo "gen_tune.sh: needs espeak-ng and sox (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/manifest.tsv"
i=0
"$BIN" eval-speech --rows tune --n "$N" > "$OUT/rows.tsv"
while IFS="$(printf '\t')" read -r label text; do
    f=$(printf 'u%03d.wav' "$i")
    raw="$OUT/raw.wav"
    case $((i % 5)) in
    0) prof=t-en-us-s150; espeak-ng -v en-us -s 150 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" ;;
    1) prof=t-m3-s165; espeak-ng -v en-us+m3 -s 165 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" ;;
    2) prof=t-f2-s140-p60; espeak-ng -v en-us+f2 -s 140 -p 60 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" ;;
    3) prof=t-m7-s175-brown; espeak-ng -v en-us+m7 -s 175 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/clean.wav"
       d=$(soxi -D "$OUT/clean.wav")
       sox -n -r 16000 -b 16 -c 1 "$OUT/noise.wav" synth "$d" brownnoise vol 0.05
       sox -m "$OUT/clean.wav" "$OUT/noise.wav" "$OUT/$f" ;;
    4) prof=t-f4-s155-band; espeak-ng -v en-us+f4 -s 155 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" sinc 200-5000 ;;
    esac
    printf '%s\t%s\t%s\t%s\n' "$f" "$prof" "$label" "$text" >> "$OUT/manifest.tsv"
    i=$((i + 1))
done < "$OUT/rows.tsv"
rm -f "$OUT/raw.wav" "$OUT/clean.wav" "$OUT/noise.wav"
echo "gen_tune.sh: $i utterances in $OUT/manifest.tsv"
