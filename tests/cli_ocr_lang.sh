#!/bin/sh
# cli_ocr_lang.sh — `frugal ocr --engine tesseract` with no --lang reads a Chinese page and an
# English page (the tesseract path picks eng+chi_sim when the chi_sim model is installed; the
# PP-OCR engine, the default when its models are installed, is tests/cli_ocr_engine.sh's). The two pages in
# tests/fixtures/ocr_lang are TEST INPUTS, not the evaluation set: bench/ocr_eval/gen_invoices.py
# with --seed 7 (the evaluation uses 2024), one page per language, converted to 8-level gray PNG
# at 3/4 scale; the .json next to each is the generator's ground truth. A missing fixture or
# model is a FAIL. Prints one line per check and ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FX=tests/fixtures/ocr_lang
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-ocrlang.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in $2)"; head -c 600 "$2" | sed 's/^/    /'; echo; fi; }
trap 'rm -rf "$TMP"' EXIT INT TERM
export OMP_THREAD_LIMIT=1

for f in zh.png en.png; do [ -f "$FX/$f" ] || bad "fixture $FX/$f present"; done
"$BIN" ocr "$FX/zh.png" --engine tesseract --force-ocr >"$TMP/zh.json" 2>"$TMP/zh.err"
if [ $? = 0 ]; then ok "zh page without --lang: exit 0"; else bad "zh page without --lang: exit 0"; cat "$TMP/zh.err"; fi
# Chinese text, not Latin garbage: the labels and the fields behind them
has "zh: Chinese labels read" "$TMP/zh.json" '发 票 号 码'
has "zh: invoice number" "$TMP/zh.json" '"invoice_no":"41052842"'
has "zh: date 2022/3/7 as ISO" "$TMP/zh.json" '"date":"2022-03-07"'
has "zh: amount after 小写" "$TMP/zh.json" '"amount":"8440.56"'
has "zh: currency" "$TMP/zh.json" '"currency":"CNY"'
"$BIN" ocr "$FX/en.png" --engine tesseract --force-ocr >"$TMP/en.json" 2>"$TMP/en.err"
if [ $? = 0 ]; then ok "en page without --lang: exit 0"; else bad "en page without --lang: exit 0"; cat "$TMP/en.err"; fi
has "en: invoice number" "$TMP/en.json" '"invoice_no":"INV-2022-8401"'
has "en: date" "$TMP/en.json" '"date":"2022-08-06"'
has "en: payee" "$TMP/en.json" '"payee":"Brightwater Consulting PLC"'
has "en: currency" "$TMP/en.json" '"currency":"EUR"'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
