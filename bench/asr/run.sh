#!/bin/sh
# bench/asr/run.sh — rebuild the domain LM and measure ASR WER (generic vs domain LM) and speed
# on espeak-ng speech synthesised from held-out BANKING77 rows. Run from the repository root
# after `make`. Usage: sh bench/asr/run.sh [N utterances, default 120] [workers, default 2]
set -e
BIN=${FRUGAL_BIN:-build/frugal}
N=${1:-120}
W=${2:-2}
"$BIN" build-lm --csv data/banking77/train.csv --nlupp data/nlupp/banking \
    --out "${TMPDIR:-/tmp}/banking.arpa" --bin models/asr/banking.lm.bin
"$BIN" eval-asr --csv data/banking77/train.csv --n "$N" --workers "$W"
