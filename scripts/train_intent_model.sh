#!/bin/sh
# Rebuild the shipped intent model from data/banking77/train.csv and the tuning negatives
# data/oos/tune with the shipped recipe, and check it is byte-identical to
# models/intent-banking77.bin. Run from the repository root after `make`.
#   sh scripts/train_intent_model.sh            train into build/intent-banking77.bin and compare
#   sh scripts/train_intent_model.sh --install  also copy it over models/intent-banking77.bin
# Splits (stratified, seed 1): 10 % validation (held out of everything), 10 % calibration
# (temperature and out-of-scope thresholds, the rule may flag 1.5 % of its in-scope rows), 80 %
# training.
set -e
BIN=${FRUGAL_BIN:-build/frugal}
"$BIN" train-intent --data data/banking77/train.csv --oos data/oos/tune --val-frac 0.1 \
    --calib-frac 0.1 --oos-target 0.015 --seed 1 --out build/intent-banking77.bin
if cmp -s build/intent-banking77.bin models/intent-banking77.bin; then
    echo "identical to models/intent-banking77.bin"
else
    echo "differs from models/intent-banking77.bin (another compiler or flags can change float rounding)"
fi
if [ "$1" = "--install" ]; then cp build/intent-banking77.bin models/intent-banking77.bin; fi
