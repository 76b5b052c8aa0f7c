#!/bin/sh
# Per-utterance CPU time of the NLU stage (bench/RESULTS.md, "NLU: latency"): the BANKING77
# intent with its out-of-scope verdict and the slots over the 1,005 BANKING77 validation texts,
# then the NLU++ multi-label intents and the slots over NLU++ banking folds 0-14 (the shipped
# multi-label model trained on them: a speed figure, not an accuracy one). Run from the
# repository root after `make`; pin to cores with e.g. `taskset -c 0,1 sh bench/nlu_latency.sh`.
set -e
BIN=${FRUGAL_BIN:-build/frugal}
"$BIN" eval-nlu --model models/intent-banking77.bin --data data/banking77/train.csv --repeat 10 --threads 2
"$BIN" eval-nlu --model models/intent-nlupp.bin --nlupp data/nlupp/banking --intent-folds 0-14
