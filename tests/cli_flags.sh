#!/bin/sh
# cli_flags.sh — every subcommand reads its flags through one reader (src/base/flags.c): a bad
# number is a usage error (exit 2) before any work, whatever the command (it used to be read
# with atoi / strtoull and the command ran with 0 or a wrapped value); "--name=value" works like
# "--name value"; a missing value and an unknown option are exit 2. Prints one line per check and
# ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-flags.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
trap 'rm -rf "$TMP"' EXIT INT TERM
[ -x "$BIN" ] || { bad "no $BIN (build first)"; echo "$pass passed, $fail failed"; exit 1; }

# expect NAME STATUS NEEDLE ARGS...: exit STATUS and NEEDLE on stderr
expect() {
    name=$1 want=$2 needle=$3
    shift 3
    "$BIN" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" != "$want" ]; then bad "$name (exit $rc, want $want: $(head -c 200 "$TMP/err"))"
    elif ! grep -qF -- "$needle" "$TMP/err"; then bad "$name (no '$needle' in: $(head -c 200 "$TMP/err"))"
    else ok "$name"; fi
}

echo "x" > "$TMP/words.txt"
# numbers out of range or with junk: refused before any work
expect "build-lm --order 4" 2 "--order must be an integer in 2..3" build-lm --text "$TMP/words.txt" --order 4 --out "$TMP/lm.arpa"
[ -e "$TMP/lm.arpa" ] && bad "build-lm wrote a model after a bad --order" || ok "build-lm wrote nothing"
expect "gen-docs --n 1x" 2 "--n must be an integer" gen-docs --out "$TMP/docs" --n 1x
[ -e "$TMP/docs" ] && bad "gen-docs wrote after a bad --n" || ok "gen-docs wrote nothing"
expect "ocr --binarize 7" 2 "--binarize must be an integer in 0..2" ocr --binarize 7 "$TMP/none.png"
expect "ocr --threshold abc" 2 "--threshold must be a number" ocr --threshold abc "$TMP/none.png"
expect "train-intent --threads abc" 2 "--threads must be an integer" train-intent --data "$TMP/none.csv" --out "$TMP/m.bin" --threads abc
expect "eval-nlu --seed -1" 2 "--seed must be a non-negative integer" eval-nlu --model "$TMP/none.bin" --data "$TMP/none.csv" --seed -1
expect "eval-asr --workers 0" 2 "--workers must be an integer in 1..64" eval-asr --workers 0
expect "eval-speech --rows test" 2 "--rows tune|eval" eval-speech --rows test
expect "eval-speech --sweep 1,x" 2 "--sweep: weights >= 0" eval-speech --manifest "$TMP/none.tsv" --sweep 1,x
expect "eval-speech --nbest 99" 2 "--nbest must be an integer in 1..64" eval-speech --manifest "$TMP/none.tsv" --nbest 99
expect "assist --max-line 8" 2 "--max-line must be a number >= 16" assist --max-line 8
expect "audit --since soon" 2 "bad --since" audit --ledger "$TMP/none.db" --since soon
expect "generate --top-k 1.5" 2 "--top-k must be an integer" generate --model "$TMP/none" --top-k 1.5
# --name=value is the same flag; the work then fails on the missing input (exit 1, not 2)
expect "ocr --binarize=1 reads the value" 1 "none.png" ocr --binarize=1 "$TMP/none.png"
expect "ocr --binarize=9 is checked" 2 "--binarize must be an integer in 0..2" ocr --binarize=9 "$TMP/none.png"
# a missing value, an unknown option, an extra argument
expect "roi --a without a value" 2 "--a needs a value" roi --a
expect "asr --lm without a value" 2 "--lm needs a value" asr --lm
expect "unknown option" 2 "unknown option '--nope'" gen-docs --out "$TMP/d" --nope
expect "extra argument" 2 "unexpected argument 'b'" ocr a b
# mkmodel and serve read their flags through the same reader
MK="--arch llama --hidden 64 --layers 1 --heads 2 --kv-heads 1 --ffn 128 --vocab 300"
expect "mkmodel --hidden 0" 2 "--hidden must be an integer in 1..1048576 (got '0')" mkmodel --out "$TMP/m.gguf" $MK --hidden 0
expect "mkmodel --ctx 1e3" 2 "--ctx must be an integer" mkmodel --out "$TMP/m.gguf" $MK --ctx 1e3
expect "mkmodel --seed -1" 2 "--seed must be a non-negative integer" mkmodel --out "$TMP/m.gguf" $MK --seed -1
[ -e "$TMP/m.gguf" ] && bad "mkmodel wrote a model after a bad number" || ok "mkmodel wrote nothing"
expect "mkmodel --vocab without a value" 2 "--vocab needs a value" mkmodel --out "$TMP/m.gguf" $MK --vocab
expect "mkmodel unknown option" 2 "unknown option '--nope' (see \`frugal mkmodel --help\`)" mkmodel --out "$TMP/m.gguf" $MK --nope
expect "mkmodel extra argument" 2 "unexpected argument 'extra'" mkmodel --out "$TMP/m.gguf" $MK extra
if "$BIN" mkmodel --out="$TMP/eq.gguf" --arch=llama --hidden=64 --layers=1 --heads=2 --kv-heads=1 \
    --ffn=128 --vocab=300 --seed=7 --tied >"$TMP/out" 2>"$TMP/err" && [ -s "$TMP/eq.gguf" ]; then
    ok "mkmodel --name=value"
else bad "mkmodel --name=value ($(head -c 200 "$TMP/err"))"; fi
expect "serve --port 8o" 2 "--port must be an integer in 0..65535 (got '8o')" serve --model "$TMP/none" --port 8o
expect "serve --kv-fraction 0" 2 "--kv-fraction must be a number in 0.01..1" serve --model "$TMP/none" --kv-fraction 0
expect "serve --ledger without a value" 2 "--ledger needs a value" serve --model "$TMP/none" --ledger
expect "serve unknown option" 2 "unknown option '--nope' (see \`frugal serve --help\`)" serve --model "$TMP/none" --nope
expect "serve --port=1 reads the value" 1 "no such file or folder" serve --model "$TMP/none" --port=1

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
