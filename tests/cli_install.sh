#!/bin/sh
# cli_install.sh — runs from anywhere and installs: `make install DESTDIR=... PREFIX=/usr` into a
# temporary folder, then the installed `frugal assist` (text and a generated document image),
# `frugal asr` and `frugal serve`'s /v1/assist from another working directory, with no
# FRUGAL_DATA_DIR; the build tree's binary from elsewhere too; `gen-docs` and `mkmodel` into
# folders that do not exist yet; `make uninstall`. Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BIN=${FRUGAL_BIN:-build/frugal}
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-install.XXXXXX")
pass=0; fail=0; PID=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -q -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in: $(head -c 300 "$2"))"; fi; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
unset FRUGAL_DATA_DIR FRUGAL_ASR_LM FRUGAL_ASSIST_CONFIG
# a sanitizer build: fontconfig's process-lifetime caches (gen-docs renders with cairo) are not ours
printf 'leak:libfontconfig\n' >"$TMP/lsan.supp"
LSAN_OPTIONS="suppressions=$TMP/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"; export LSAN_OPTIONS

# ---- make install into a staging folder ----
if make -s install DESTDIR="$TMP/stage" PREFIX=/usr INSTALL_BIN="$BIN" >"$TMP/make.out" 2>&1; then
    ok "make install DESTDIR PREFIX=/usr"
else
    bad "make install ($(tail -c 300 "$TMP/make.out"))"
fi
IB="$TMP/stage/usr/bin/frugal"
for f in usr/bin/frugal usr/share/frugal/models/intent-banking77.bin \
         usr/share/frugal/models/reply-templates.json usr/share/frugal/models/asr/banking.lm.bin \
         usr/share/frugal/dashboards/frugal.json usr/share/frugal/models/qwen2-tiny/config.json \
         usr/share/doc/frugal/README.md usr/share/doc/frugal/ASSIST.md; do
    [ -f "$TMP/stage/$f" ] && ok "installed $f" || bad "missing $f"
done

# ---- gen-docs and mkmodel create the folders they write into ----
mkdir -p "$TMP/elsewhere"
cd "$TMP/elsewhere" || exit 1
if "$IB" gen-docs --out "$TMP/new/docs" --n 1 --clean >"$TMP/gd.out" 2>&1 && [ -f "$TMP/new/docs/en-0000.png" ]; then
    ok "gen-docs --out NEW/docs creates the folder"
else
    bad "gen-docs into a new folder: $(tail -c 300 "$TMP/gd.out")"
fi
if "$IB" mkmodel --out "$TMP/new/m/x" --arch qwen2 --hidden 32 --layers 1 --heads 2 --kv-heads 1 \
        --ffn 64 --vocab 300 >"$TMP/mk.out" 2>&1 && [ -f "$TMP/new/m/x/config.json" ]; then
    ok "mkmodel --out NEW/m/x creates the folders"
else
    bad "mkmodel into a new folder: $(tail -c 300 "$TMP/mk.out")"
fi
if "$IB" mkmodel --out "$TMP/new/g/y.gguf" --format gguf --arch qwen2 --hidden 32 --layers 1 \
        --heads 2 --kv-heads 1 --ffn 64 --vocab 300 >"$TMP/mk2.out" 2>&1 && [ -f "$TMP/new/g/y.gguf" ]; then
    ok "mkmodel --format gguf --out NEW/g/y.gguf creates the folder"
else
    bad "mkmodel gguf into a new folder: $(tail -c 300 "$TMP/mk2.out")"
fi

# ---- the installed binary from another directory: text, image, speech ----
python3 - "$TMP" <<'PY'
import base64, json, struct, sys
d = sys.argv[1]
png = open(d + "/new/docs/en-0000.png", "rb").read()
with open(d + "/req.jsonl", "w") as f:
    f.write(json.dumps({"text": "I still have not received my card"}) + "\n")
    f.write(json.dumps({"image": "data:image/png;base64," + base64.b64encode(png).decode()}) + "\n")
pcm = b"\0\0" * 16000  # one second of silence, 16 kHz mono
hdr = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" + struct.pack("<I", len(pcm))
open(d + "/silence.wav", "wb").write(hdr + pcm)
PY
"$IB" assist <"$TMP/req.jsonl" >"$TMP/as.out" 2>"$TMP/as.err"; rc=$?
[ "$rc" = 0 ] && ok "installed assist from another directory exits 0" || bad "installed assist: exit $rc ($(head -c 300 "$TMP/as.err"))"
sed -n 1p "$TMP/as.out" >"$TMP/l1"; sed -n 2p "$TMP/as.out" >"$TMP/l2"
has "installed assist: text → intent" "$TMP/l1" '"name":"card_arrival"'
has "installed assist: text → template reply" "$TMP/l1" '"response_source":"template"'
has "installed assist: image → OCR ran" "$TMP/l2" '"stages_run":\["decode_image","density","ocr"'
has "installed assist: image → OCR text" "$TMP/l2" '"ocr":{"text":"[^"]'
"$IB" asr "$TMP/silence.wav" >"$TMP/asr.out" 2>"$TMP/asr.err"; rc=$?
[ "$rc" = 0 ] && ok "installed asr from another directory (domain LM found)" || bad "installed asr: exit $rc ($(head -c 300 "$TMP/asr.err"))"
"$BIN" assist <"$TMP/req.jsonl" >"$TMP/bt.out" 2>"$TMP/bt.err"
sed -n 1p "$TMP/bt.out" >"$TMP/b1"
has "build-tree assist from another directory" "$TMP/b1" '"name":"card_arrival"'
FRUGAL_DATA_DIR="$TMP/nowhere" "$IB" assist <"$TMP/req.jsonl" >"$TMP/nd.out" 2>"$TMP/nd.err"; rc=$?
[ "$rc" != 0 ] && grep -q "$TMP/nowhere/models/intent-banking77.bin" "$TMP/nd.err" &&
    ok "FRUGAL_DATA_DIR is honoured (error names it)" || bad "FRUGAL_DATA_DIR ignored (exit $rc: $(head -c 300 "$TMP/nd.err"))"
"$IB" serve --help >"$TMP/help" 2>&1
has "serve --help names FRUGAL_DATA_DIR" "$TMP/help" 'FRUGAL_DATA_DIR'
has "serve --help shows the data root" "$TMP/help" "data root now: $TMP/stage/usr/share/frugal"

# ---- the installed server's /v1/assist, started from another directory ----
"$IB" serve --model "$TMP/stage/usr/share/frugal/models/qwen2-tiny" --port 0 --ledger "" \
    >"$TMP/s.out" 2>"$TMP/s.err" &
PID=$!
i=0; PORT=
while [ $i -lt 300 ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$TMP/s.out" 2>/dev/null)
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
if [ -n "$PORT" ]; then
    st=$(curl -s -o "$TMP/body" -w '%{http_code}' --data-binary '{"text":"I still have not received my card"}' \
        "http://127.0.0.1:$PORT/v1/assist")
    [ "$st" = 200 ] && ok "installed serve: /v1/assist 200 from another directory" || bad "installed serve: /v1/assist $st ($(head -c 300 "$TMP/body"))"
    kill "$PID"; wait "$PID" 2>/dev/null; PID=
else
    bad "installed serve started ($(tail -c 300 "$TMP/s.err"))"
fi

# ---- uninstall ----
cd "$ROOT" || exit 1
make -s uninstall DESTDIR="$TMP/stage" PREFIX=/usr >/dev/null 2>&1
[ ! -e "$IB" ] && [ ! -e "$TMP/stage/usr/share/frugal" ] && [ ! -e "$TMP/stage/usr/share/doc/frugal" ] &&
    ok "make uninstall removes what install put there" || bad "make uninstall left files"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
