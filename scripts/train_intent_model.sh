#!/bin/sh
# Rebuild the shipped intent model from data/banking77/train.csv with the default recipe and check
# it is byte-identical to models/intent-banking77.bin. Run from the repository root after `make`.
#   sh scripts/train_intent_model.sh            train into build/intent-banking77.bin and compare
#   sh scripts/train_intent_model.sh --install  also copy it over models/intent-banking77.bin
set -e
BIN=${FRUGAL_BIN:-build/frugal}
"$BIN" train-intent --data data/banking77/train.csv --out build/intent-banking77.bin --val-frac 0.1 --seed 1
if cmp -s build/intent-banking77.bin models/intent-banking77.bin; then
    echo "identical to models/intent-banking77.bin"
else
    echo "differs from models/intent-banking77.bin (another compiler or flags can change float rounding)"
fi
if [ "$1" = "--install" ]; then cp build/intent-banking77.bin models/intent-banking77.bin; fi
