#!/bin/sh
# cli_ocr_engine.sh — which reader `frugal ocr` runs: PP-OCR by default when its models are
# installed (models/ppocr of the data root; a missing model is a FAIL), tesseract when the models
# folder is empty (--models DIR), the one --engine names otherwise; the JSON names the engine.
# The pages are tests/fixtures/ocr_lang (tuning pages of bench/ocr_eval/gen_invoices.py, seed 7).
# Prints one line per check and ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FX=tests/fixtures/ocr_lang
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-ocreng.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in $2)"; head -c 600 "$2" | sed 's/^/    /'; echo; fi; }
trap 'rm -rf "$TMP"' EXIT INT TERM
export OMP_THREAD_LIMIT=1
mkdir -p "$TMP/empty"
for f in models/ppocr/ch_PP-OCRv4_det_infer.onnx models/ppocr/ch_PP-OCRv4_rec_infer.onnx \
         models/ppocr/ch_ppocr_mobile_v2.0_cls_infer.onnx models/ppocr/ppocr_keys_v1.txt \
         "$FX/en.png" "$FX/zh.png"; do
    [ -f "$f" ] || bad "$f present (scripts/install-deps.sh installs the models)"
done

# default: the installed models → ppocr, no language given, fields of both pages
"$BIN" ocr "$FX/zh.png" --force-ocr >"$TMP/zh.json" 2>"$TMP/zh.err"
if [ $? = 0 ]; then ok "zh default engine: exit 0"; else bad "zh default engine: exit 0"; cat "$TMP/zh.err"; fi
has "zh: the engine is ppocr" "$TMP/zh.json" '"engine":"ppocr"'
has "zh: the script is detected" "$TMP/zh.json" '"lang":"chi_sim"'
has "zh: invoice number" "$TMP/zh.json" '"invoice_no":"41052842"'
has "zh: date" "$TMP/zh.json" '"date":"2022-03-07"'
has "zh: amount" "$TMP/zh.json" '"amount":"8440.56"'
has "zh: currency" "$TMP/zh.json" '"currency":"CNY"'
has "zh: payee" "$TMP/zh.json" '"payee":"深圳鼎盛信息技术有限公司"'
"$BIN" ocr "$FX/en.png" --force-ocr >"$TMP/en.json" 2>"$TMP/en.err"
if [ $? = 0 ]; then ok "en default engine: exit 0"; else bad "en default engine: exit 0"; cat "$TMP/en.err"; fi
has "en: the engine is ppocr" "$TMP/en.json" '"engine":"ppocr"'
has "en: line quads" "$TMP/en.json" '"quad":['
has "en: invoice number" "$TMP/en.json" '"invoice_no":"INV-2022-8401"'
has "en: amount" "$TMP/en.json" '"amount":"13693.41"'

# models absent: tesseract, and it still reads
"$BIN" ocr "$FX/en.png" --force-ocr --models "$TMP/empty" >"$TMP/t.json" 2>"$TMP/t.err"
if [ $? = 0 ]; then ok "empty models folder: exit 0"; else bad "empty models folder: exit 0"; cat "$TMP/t.err"; fi
has "empty models folder: tesseract" "$TMP/t.json" '"engine":"tesseract"'
has "empty models folder: invoice number" "$TMP/t.json" '"invoice_no":"INV-2022-8401"'
if [ -s "$TMP/t.err" ]; then bad "empty models folder: no warning"; cat "$TMP/t.err"; else ok "empty models folder: no warning"; fi
# asked for ppocr where there is none: exit 1, the file named
"$BIN" ocr "$FX/en.png" --force-ocr --engine ppocr --models "$TMP/empty" >"$TMP/p.json" 2>"$TMP/p.err"
rc=$?
if [ $rc = 1 ]; then ok "--engine ppocr without models: exit 1"; else bad "--engine ppocr without models: exit 1 (got $rc)"; fi
has "--engine ppocr without models: names the missing file" "$TMP/p.err" 'ch_PP-OCRv4_det_infer.onnx is missing'
"$BIN" ocr "$FX/en.png" --engine tesseract --force-ocr >"$TMP/e.json" 2>&1
has "--engine tesseract with the models present" "$TMP/e.json" '"engine":"tesseract"'
"$BIN" ocr "$FX/en.png" --engine paddle >"$TMP/b.out" 2>&1
rc=$?
if [ $rc = 2 ]; then ok "--engine paddle: usage error"; else bad "--engine paddle: usage error (got $rc)"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
