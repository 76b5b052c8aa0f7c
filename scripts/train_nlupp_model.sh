#!/bin/sh
# Rebuild the shipped multi-label NLU++ intent model from data/nlupp (banking folds 0-11 train the
# network, folds 12-14 tune the per-label thresholds; folds 15-19 are not in the repository) with
# the shipped recipe (fr_intent_multi_defaults), and check it is byte-identical to
# models/intent-nlupp.bin. Run from the repository root after `make`.
#   sh scripts/train_nlupp_model.sh            train into build/intent-nlupp.bin and compare
#   sh scripts/train_nlupp_model.sh --install  also copy it over models/intent-nlupp.bin
set -e
BIN=${FRUGAL_BIN:-build/frugal}
"$BIN" train-intent --nlupp data/nlupp/banking --folds 0-11 --tune-folds 12-14 --seed 1 \
    --out build/intent-nlupp.bin
if cmp -s build/intent-nlupp.bin models/intent-nlupp.bin; then
    echo "identical to models/intent-nlupp.bin"
else
    echo "differs from models/intent-nlupp.bin (another compiler or flags can change float rounding)"
fi
if [ "$1" = "--install" ]; then cp build/intent-nlupp.bin models/intent-nlupp.bin; fi
