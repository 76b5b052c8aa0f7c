#!/bin/sh
# bench/asr/gen_eval.sh — the EVALUATION spoken set, a second generator that shares no voice,
# speed, pitch or channel with bench/asr/gen_tune.sh: espeak-ng en-us+f3 (185 wpm, pitch 65),
# en-gb-x-rp (160, pitch 40), en+klatt (150, pitch 55) under pink noise at 15 dB SNR, en-us+m1
# (195, pitch 30) through a telephone channel (300-3400 Hz, 8 kHz u-law, back to 16 kHz),
# en-029 (170) by telephone with white noise at 20 dB, en-gb-scotland+m2 (145, pitch 70) with
# white noise at 12 dB; texts from `frugal eval-speech --rows eval` (the intent model's
# validation rows: never trained on, never in the domain LM). Nothing is tuned on this set.
# Writes OUT/uNNN.wav (16 kHz mono) and OUT/manifest.tsv.
# Usage (repository root, after make): sh bench/asr/gen_eval.sh OUT [N utterances, default 120]
set -e
BIN=${FRUGAL_BIN:-build/frugal}
OUT=${1:?usage: gen_eval.sh OUT [N]}
N=${2:-120}
command -v espeak-ng >/dev/null && command -v sox >/dev/null ||
    { echo "gen_eval.sh: needs espeak-ng and sox (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$OUT"
: > "$OUT/manifest.tsv"
# rms FILE: the RMS amplitude sox measures
rms() { sox "$1" -n stat 2>&1 | awk '/RMS +amplitude/ {print $3}'; }
# add_noise IN TYPE SNR_DB OUTFILE: IN mixed with TYPE noise scaled to the given SNR
add_noise() {
    d=$(soxi -D "$1")
    sox -n -r 16000 -b 16 -c 1 "$OUT/noise.wav" synth "$d" "$2"
    g=$(awk -v s="$(rms "$1")" -v n="$(rms "$OUT/noise.wav")" -v snr="$3" \
        'BEGIN { printf "%.6f", (s / n) / exp(log(10) * snr / 20) }')
    sox -m -v 1 "$1" -v "$g" "$OUT/noise.wav" "$4"
}
# phone IN OUTFILE: telephone band, 8 kHz u-law, back to 16 kHz
phone() {
    sox "$1" -r 8000 -e u-law "$OUT/phone.wav" sinc 300-3400
    sox "$OUT/phone.wav" -r 16000 -e signed -b 16 "$2"
}
i=0
"$BIN" eval-speech --rows eval --n "$N" > "$OUT/rows.tsv"
while IFS="$(printf '\t')" read -r label text; do
    f=$(printf 'u%03d.wav' "$i")
    raw="$OUT/raw.wav"
    c="$OUT/clean.wav"
    case $((i % 6)) in
    0) prof=e-f3-s185-p65; espeak-ng -v en-us+f3 -s 185 -p 65 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" ;;
    1) prof=e-gb-rp-s160-p40; espeak-ng -v en-gb-x-rp -s 160 -p 40 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$OUT/$f" ;;
    2) prof=e-klatt-s150-pink15; espeak-ng -v en+klatt -s 150 -p 55 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$c"; add_noise "$c" pinknoise 15 "$OUT/$f" ;;
    3) prof=e-m1-s195-p30-phone; espeak-ng -v en-us+m1 -s 195 -p 30 -w "$raw" -- "$text"
       phone "$raw" "$OUT/$f" ;;
    4) prof=e-029-s170-phone-white20; espeak-ng -v en-029 -s 170 -w "$raw" -- "$text"
       phone "$raw" "$c"; add_noise "$c" whitenoise 20 "$OUT/$f" ;;
    5) prof=e-scot-m2-s145-p70-white12; espeak-ng -v en-gb-scotland+m2 -s 145 -p 70 -w "$raw" -- "$text"
       sox "$raw" -r 16000 -b 16 "$c"; add_noise "$c" whitenoise 12 "$OUT/$f" ;;
    esac
    printf '%s\t%s\t%s\t%s\n' "$f" "$prof" "$label" "$text" >> "$OUT/manifest.tsv"
    i=$((i + 1))
done < "$OUT/rows.tsv"
rm -f "$OUT/raw.wav" "$OUT/clean.wav" "$OUT/noise.wav" "$OUT/phone.wav"
echo "gen_eval.sh: $i utterances in $OUT/manifest.tsv"
