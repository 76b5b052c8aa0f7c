#!/bin/sh
# cli_meter.sh — `frugal audit`, `frugal audit --ab` and `frugal roi` on the recorded ledger
# fixtures (tests/fixtures/ledger/*.sql; numbers from make_fixture.py), the HTML and PNG reports,
# a real SQLite ledger file, and usage errors. Prints one line per check and ends with
# "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FX=tests/fixtures/ledger
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-meter.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in $2)"; sed 's/^/    /' "$2" | head -40; fi; }
rc_is() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (exit $2, want $3)"; fi; }
trap 'rm -rf "$TMP"' EXIT INT TERM

# audit: the four steps
"$BIN" audit --ledger $FX/run.sql --html "$TMP/a.html" --png "$TMP/a.png" >"$TMP/audit.txt" 2>"$TMP/audit.err"
rc_is "audit exits 0" $? 0
has "audit: window" "$TMP/audit.txt" "2024-06-10 06:13:20Z .. 2024-06-10 06:30:00Z (1000 s)"
has "audit: outcomes" "$TMP/audit.txt" "requests     200 (ok 179, rejected 8, cancelled 5, failed 8)"
has "audit: measured energy and idle" "$TMP/audit.txt" "113615.1 J measured, 43.6 % idle  [includes estimated energy]"
has "audit: heatmap row" "$TMP/audit.txt" "    text              100"
has "audit: heatmap cell text x decode" "$TMP/audit.txt" "42/45/47"
has "audit: bottleneck" "$TMP/audit.txt" "modality text (50.9 % of \$), stage decode (79.4 % of \$)"
has "audit: top candidate" "$TMP/audit.txt" "1. [idle_capacity] \$2.139467 in the window"
has "audit: vision candidate" "$TMP/audit.txt" "3. [skip_vision] \$0.006656 in the window"
has "audit: vision evidence" "$TMP/audit.txt" "on 30 % of the image requests that ran vision (12 of 40)"
has "html: heatmap" "$TMP/a.html" "<h2>2. Modality &times; stage heatmap</h2>"
has "html: embedded png" "$TMP/a.html" "data:image/png;base64,iVBORw0KGgo"
sig=$(od -An -tx1 -N8 "$TMP/a.png" | tr -d ' \n')
if [ "$sig" = "89504e470d0a1a0a" ]; then ok "png signature"; else bad "png signature ($sig)"; fi

# a live ledger file (not a dump) through the same command
if command -v sqlite3 >/dev/null 2>&1; then
    sqlite3 "$TMP/run.db" < $FX/run.sql
    "$BIN" audit --ledger "$TMP/run.db" --since 2024-06-10T06:21:40Z >"$TMP/audit2.txt" 2>&1
    rc_is "audit of a ledger file exits 0" $? 0
    has "audit --since filters" "$TMP/audit2.txt" "requests     100 ("
else
    echo "  (sqlite3 command not installed: ledger-file check skipped)"
fi

# A/B
"$BIN" audit --ab --ledger $FX/run.sql >"$TMP/ab.txt" 2>&1
rc_is "audit --ab exits 0" $? 0
has "ab: control row" "$TMP/ab.txt" "control              100    3.6063 [3.3081, 3.9044]"
has "ab: vision_off row" "$TMP/ab.txt" "vision_off           100    3.3724 [3.0165, 3.7283]"
has "ab: J per request" "$TMP/ab.txt" "330.12 ["
has "ab: difference section" "$TMP/ab.txt" "difference to control"
"$BIN" audit --ab --arms vision_off,control --ledger $FX/run.sql >"$TMP/ab2.txt" 2>&1
has "ab: --arms picks the baseline" "$TMP/ab2.txt" "difference to vision_off"
"$BIN" audit --ab --ledger $FX/after.sql >"$TMP/ab3.txt" 2>&1
rc_is "ab without arms fails" $? 1
has "ab without arms says so" "$TMP/ab3.txt" "A/B needs two arms; the ledger has 0"

# ROI
"$BIN" roi --a $FX/run.sql --a-label before --b $FX/after.sql --b-label after >"$TMP/roi.txt" 2>&1
rc_is "roi exits 0" $? 0
has "roi: energy per request" "$TMP/roi.txt" "energy / request (J)"
has "roi: numbers" "$TMP/roi.txt" "568.08             421.47            -146.60    -25.8 %"
has "roi: TCO total" "$TMP/roi.txt" "89637.29           89579.46             -57.83"
has "roi: cost per request" "$TMP/roi.txt" "cost / request (\$)"
"$BIN" roi --a $FX/run.sql --a-arm control --b $FX/run.sql --b-arm vision_off >"$TMP/roi2.txt" 2>&1
rc_is "roi of two arms exits 0" $? 0
has "roi of two arms" "$TMP/roi2.txt" "578.03             558.12"

# usage
"$BIN" audit >/dev/null 2>"$TMP/u1.txt"; rc_is "audit without --ledger: usage error" $? 2
"$BIN" audit --ledger "$TMP/missing.db" >/dev/null 2>"$TMP/u2.txt"; rc_is "missing ledger: exit 1" $? 1
has "missing ledger message" "$TMP/u2.txt" "no such file"
"$BIN" roi --a $FX/run.sql >/dev/null 2>&1; rc_is "roi without --b: usage error" $? 2
"$BIN" audit --help >"$TMP/h.txt"; rc_is "audit --help" $? 0

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
