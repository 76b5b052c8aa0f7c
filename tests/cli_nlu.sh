#!/bin/sh
# cli_nlu.sh — `frugal train-intent` and `frugal eval-nlu` end to end: training a small model on a
# CSV prints per-epoch progress and writes a model that loads; two runs give identical bytes;
# eval-nlu prints accuracy, the latency and throughput tables and the per-slot table; bad input
# gets a clear message and a non-zero exit. Prints one line per check and ends with
# "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-nlu.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in $2)"; sed 's/^/    /' "$2" | head -20; fi; }
rc_is() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (exit $2, want $3)"; fi; }
trap 'rm -rf "$TMP"' EXIT INT TERM

# a small labelled CSV: every 10th row of BANKING77 (quotes and commas included)
# (lines that hold a quote are skipped: a few texts span several lines)
awk 'NR == 1 || (NR % 10 == 2 && index($0, "\"") == 0)' data/banking77/train.csv > "$TMP/small.csv"
SMALL="--bits 14 --min-df 1 --member hidden=0,epochs=3,lr=0.01 --member hidden=16,epochs=3,lr=0.003"
"$BIN" train-intent --data "$TMP/small.csv" --out "$TMP/a.bin" $SMALL >"$TMP/train.out" 2>"$TMP/train.err"
rc_is "train-intent exits 0" $? 0
has "train-intent: epoch progress" "$TMP/train.err" "member 1 (mlp16) epoch  3/3"
has "train-intent: val acc per epoch" "$TMP/train.err" "val acc"
has "train-intent: summary" "$TMP/train.out" "validation accuracy"
"$BIN" train-intent --data "$TMP/small.csv" --out "$TMP/b.bin" $SMALL --threads 1 --quiet >/dev/null 2>&1
if cmp -s "$TMP/a.bin" "$TMP/b.bin"; then ok "train-intent is deterministic"; else bad "train-intent is deterministic"; fi

"$BIN" eval-nlu --model "$TMP/a.bin" --data "$TMP/small.csv" --repeat 1 --nlupp data/nlupp/banking --folds 0-0 >"$TMP/eval.out" 2>&1
rc_is "eval-nlu exits 0" $? 0
has "eval-nlu: accuracy" "$TMP/eval.out" "validation rows of"
has "eval-nlu: latency table" "$TMP/eval.out" "| intent (top-5) |"
has "eval-nlu: throughput on 2 threads" "$TMP/eval.out" "| 2 |"
has "eval-nlu: slot table" "$TMP/eval.out" "| amount_of_money | amount |"

# a fold whose gold values are malformed (a period without days, a date that is a string, a
# span of strings): scored as slots without a comparable value, no crash
mkdir -p "$TMP/bad"
cat > "$TMP/bad/fold0.json" <<'JSON'
[{"text": "between 3 March and next week please", "intents": ["request_info"],
  "slots": {"date_period": {"text": "next week", "span": [24, 33],
                            "values": {"type": "absolute", "from": {"month": 3}, "to": 7}},
            "date": {"text": "3 March", "span": [8, 15], "value": "March"},
            "time": {"text": "x", "span": ["a", "b"], "value": {"hour": "9"}}}}]
JSON
"$BIN" eval-nlu --model "$TMP/a.bin" --data "$TMP/small.csv" --repeat 1 --nlupp "$TMP/bad" --folds 0-0 >"$TMP/bad.out" 2>&1
rc_is "eval-nlu: malformed NLU++ gold values do not crash" $? 0
has "eval-nlu: malformed fold still scored" "$TMP/bad.out" "| date_period |"

"$BIN" eval-nlu --model models/intent-banking77.bin --data data/banking77/train.csv --repeat 1 --threads 1 \
    --oos-eval data/oos/eval >"$TMP/ship.out" 2>&1
has "eval-nlu: shipped model accuracy" "$TMP/ship.out" "accuracy 91.34% on 1005 validation rows"
has "eval-nlu: calibration error before / after" "$TMP/ship.out" "ECE 0.0528 at temperature 1, 0.0095 at the model's 0.748"
has "eval-nlu: in-scope rows flagged" "$TMP/ship.out" "| in scope | validation rows of the data | 1005 | 1.59 % |"
has "eval-nlu: held-out negatives flagged" "$TMP/ship.out" "| data/oos/eval | **all** | 360 | **97.2 %** |"
# negatives as training data: --oos adds the out_of_scope label, --calib-frac fits the rule
"$BIN" train-intent --data "$TMP/small.csv" --oos data/oos/tune --calib-frac 0.1 --out "$TMP/o.bin" $SMALL --quiet >"$TMP/o.out" 2>&1
rc_is "train-intent --oos --calib-frac exits 0" $? 0
has "train-intent: calibration rows" "$TMP/o.out" "calibration rows (temperature"
"$BIN" eval-nlu --model "$TMP/o.bin" --data "$TMP/small.csv" --repeat 1 --threads 1 --oos-eval data/oos/eval >"$TMP/o.eval" 2>&1
has "eval-nlu: the small model has the label" "$TMP/o.eval" "(label present)"

# multi-label NLU++ intents: train on folds, thresholds tuned on other folds; cross-validation
NSMALL="--bits 14 --member hidden=32,epochs=10,batch=16,lr=0.01,init=0.05"
"$BIN" train-intent --nlupp data/nlupp/banking --folds 0-3 --tune-folds 4 $NSMALL --out "$TMP/n.bin" >"$TMP/n.out" 2>"$TMP/n.err"
rc_is "train-intent --nlupp exits 0" $? 0
has "train-intent --nlupp: micro-F1 progress" "$TMP/n.err" "train micro-F1"
has "train-intent --nlupp: tuning rows" "$TMP/n.out" "threshold-tuning rows"
"$BIN" eval-nlu --nlupp data/nlupp/banking --model "$TMP/n.bin" --intent-folds 5-6 --per-label >"$TMP/n.eval" 2>&1
rc_is "eval-nlu multi-label model exits 0" $? 0
has "eval-nlu: multi-label scores" "$TMP/n.eval" "micro-F1"
has "eval-nlu: per-intent table" "$TMP/n.eval" "| how_long |"
"$BIN" eval-nlu --nlupp data/nlupp/banking --intent-cv 3 --intent-folds 0-5 $NSMALL --min-df 2 >"$TMP/cv.out" 2>&1
rc_is "eval-nlu --intent-cv exits 0" $? 0
has "eval-nlu --intent-cv: per-label rule row" "$TMP/cv.out" "| per-label tuned thresholds |"
"$BIN" train-intent --nlupp data/nlupp/banking --folds 0-3 --tune-folds 3-4 --out "$TMP/x.bin" >"$TMP/ov.out" 2>&1
rc_is "overlapping --folds and --tune-folds: exit 2" $? 2
"$BIN" train-intent --nlupp data/nlupp/banking --folds 40-41 --out "$TMP/x.bin" >"$TMP/bf.out" 2>&1
rc_is "bad --folds: exit 2" $? 2

# assist returns both label sets: the BANKING77 intent and the NLU++ intents + slots
echo '{"text":"I was charged twice by netflix on 3 March, how long does a refund take?"}' | "$BIN" assist >"$TMP/as.out" 2>"$TMP/as.err"
rc_is "assist with the NLU++ model exits 0" $? 0
has "assist: BANKING77 intent" "$TMP/as.out" '"intent":{"name":"transaction_charged_twice"'
has "assist: NLU++ intents" "$TMP/as.out" '"nlupp":{"intents":["refund","how_long"]'
has "assist: NLU++ slot with span" "$TMP/as.out" '{"name":"company_name","text":"netflix","value":"netflix","start":23,"end":30}'
has "assist: past-tense date resolves back" "$TMP/as.out" '"name":"date","text":"3 March","value":"'
printf '{"nlupp_model": ""}' > "$TMP/off.json"
echo '{"text":"how long does a refund take?"}' | "$BIN" assist --config "$TMP/off.json" >"$TMP/off.out" 2>&1
has "assist without the NLU++ model still answers" "$TMP/off.out" '"stages_run":["nlu"'
if grep -q '"nlupp"' "$TMP/off.out"; then bad "nlupp_model \"\" turns the block off"; else ok "nlupp_model \"\" turns the block off"; fi
printf '{"nlupp_model": "models/intent-banking77.bin"}' > "$TMP/single.json"
echo '{"text":"hi"}' | "$BIN" assist --config "$TMP/single.json" >"$TMP/single.out" 2>&1
has "a single-label model as nlupp_model is refused" "$TMP/single.out" "not a multi-label (NLU++) intent model"

# bad input
head -c 1000 models/intent-banking77.bin > "$TMP/trunc.bin"
"$BIN" eval-nlu --model "$TMP/trunc.bin" --data "$TMP/small.csv" >"$TMP/trunc.out" 2>&1
rc_is "truncated model: exit 1" $? 1
has "truncated model: message" "$TMP/trunc.out" "checksum mismatch (file truncated or corrupt)"
printf 'text,category\n"unterminated,x\n' > "$TMP/bad.csv"
"$BIN" train-intent --data "$TMP/bad.csv" --out "$TMP/c.bin" >"$TMP/bad.out" 2>&1
rc_is "bad CSV: exit 1" $? 1
has "bad CSV: message" "$TMP/bad.out" "bad quoting"
"$BIN" train-intent --data "$TMP/small.csv" >"$TMP/usage.out" 2>&1
rc_is "missing --out: usage exit 2" $? 2
"$BIN" train-intent --data "$TMP/small.csv" --out "$TMP/d.bin" --val-frac 1.5 >"$TMP/frac.out" 2>&1
rc_is "bad --val-frac: exit 2" $? 2

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
