#!/bin/sh
# cli_meter_media.sh — every stage metered, the right modality, money under the default cost
# model. A real `frugal serve` (tiny fixture model, default meter configuration, a ledger in a
# scratch folder) gets a chat request with a generated invoice (`frugal gen-docs`) as an image_url
# part, one with an espeak-ng recording as an input_audio part, a text chat request and a
# /v1/assist request, each with its own W3C traceparent. Checked: the ledger rows say image+text /
# audio+text / text, list the decode_media / ocr / asr stages with their time (the stages cover
# the request's latency, not only the engine's part), and the response's `frugal` joules and $
# equal the row's; /metrics counts /v1/assist under its own endpoint and exposes the media stages;
# `frugal audit` and `frugal roi` print non-zero money and never nan/inf. Prints one line per
# check and ends with "N passed, N failed". Needs curl, sqlite3, python3, espeak-ng.
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-metermedia.XXXXXX")
pass=0; fail=0; PID=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
has() { if grep -qF -- "$3" "$2"; then ok "$1"; else bad "$1 (no '$3' in: $(head -c 400 "$2"))"; fi; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
q() { sqlite3 "$TMP/ledger.db" "$1"; }
# true when python3 says so: pyt 'expression over a, b' A B
pyt() { python3 -c "import sys; a=float(sys.argv[1]); b=float(sys.argv[2]); sys.exit(0 if ($1) else 1)" "$2" "$3"; }

# ---- inputs: a generated invoice and a recorded sentence (a missing input is a failure) ----
mkdir -p "$TMP/docs"
"$BIN" gen-docs --out "$TMP/docs" --n 1 --lang eng >"$TMP/gen.out" 2>&1
IMG=$(ls "$TMP"/docs/en-0000.* 2>/dev/null | grep -v json | head -n 1)
[ -n "$IMG" ] && ok "invoice generated" || { bad "invoice generated ($(cat "$TMP/gen.out"))"; echo "$pass passed, $fail failed"; exit 1; }
espeak-ng -v en-us -s 150 -w "$TMP/speech.wav" "my card has not arrived yet" 2>"$TMP/espeak.err"
[ -s "$TMP/speech.wav" ] && ok "speech recorded" || { bad "speech recorded ($(cat "$TMP/espeak.err"))"; echo "$pass passed, $fail failed"; exit 1; }
python3 - "$TMP" "$IMG" <<'PY'
import base64, json, sys
d, img = sys.argv[1], sys.argv[2]
mime = "image/jpeg" if img.endswith(".jpg") else "image/png"
b = base64.b64encode(open(img, "rb").read()).decode()
w = base64.b64encode(open(d + "/speech.wav", "rb").read()).decode()
def chat(parts):
    return {"messages": [{"role": "user", "content": parts}], "max_tokens": 4}
json.dump(chat([{"type": "text", "text": "Can you check the amount on this invoice?"},
                {"type": "image_url", "image_url": {"url": "data:%s;base64,%s" % (mime, b)}}]),
          open(d + "/image.json", "w"))
json.dump(chat([{"type": "text", "text": "Please listen to my message."},
                {"type": "input_audio", "input_audio": {"data": w, "format": "wav"}}]),
          open(d + "/audio.json", "w"))
json.dump(chat("hello"), open(d + "/text.json", "w"))
json.dump({"text": "I am still waiting on my card"}, open(d + "/assist.json", "w"))
PY

# ---- the server, default meter configuration (plus a trace file) ----
printf '{"trace": {"file": "%s"}}\n' "$TMP/traces.jsonl" >"$TMP/meter.json"
"$BIN" serve --model tests/fixtures/qwen2-tiny --port 0 --ledger "$TMP/ledger.db" --meter-config "$TMP/meter.json" \
    >"$TMP/s.out" 2>"$TMP/s.err" &
PID=$!
i=0; PORT=
while [ $i -lt 300 ]; do
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\)$|\1|p' "$TMP/s.out" 2>/dev/null)
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1; i=$((i + 1))
done
[ -n "$PORT" ] || { bad "server started"; cat "$TMP/s.err"; echo "$pass passed, $fail failed"; exit 1; }
# send NAME PATH TRACE: POST $TMP/NAME.json with traceparent 00-TRACE-...; body in $TMP/NAME.out
send() {
    curl -s -o "$TMP/$1.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        -H "traceparent: 00-$3-00f067aa0ba902b7-01" --data-binary "@$TMP/$1.json" "http://127.0.0.1:$PORT$2"
}
T_IMG=4bf92f3577b34da6a3ce929d0e0e4736; T_AUD=4bf92f3577b34da6a3ce929d0e0e4737
T_TXT=4bf92f3577b34da6a3ce929d0e0e4738; T_AST=4bf92f3577b34da6a3ce929d0e0e4739
for r in "image /v1/chat/completions $T_IMG" "audio /v1/chat/completions $T_AUD" \
         "text /v1/chat/completions $T_TXT" "assist /v1/assist $T_AST"; do
    set -- $r
    st=$(send "$1" "$2" "$3")
    [ "$st" = 200 ] && ok "$1 request: 200" || bad "$1 request: HTTP $st ($(head -c 300 "$TMP/$1.out"))"
done
# frugal figures of each response: joules usd final
for n in image audio text assist; do
    python3 -c "import json,sys; f=json.load(open(sys.argv[1])).get('frugal') or {}; print(f.get('joules',-1), f.get('usd',-1), f.get('final'))" \
        "$TMP/$n.out" >"$TMP/$n.fr" 2>/dev/null || echo "-1 -1 None" >"$TMP/$n.fr"
done
curl -s "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics.txt"
has "metrics: /v1/assist has its own endpoint" "$TMP/metrics.txt" 'frugal_requests_total{endpoint="/v1/assist",tier="P1",status="200"} 1'
if grep -q 'frugal_requests_total{endpoint="other"' "$TMP/metrics.txt"; then bad "metrics: nothing counted as other"; else ok "metrics: nothing counted as other"; fi
kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
[ "$rc" = 0 ] && ok "server exit 0" || bad "server exit $rc"
# the meter's families, scraped after the rows were made (they are final at the response)
has "metrics: ocr stage time" "$TMP/metrics.txt" 'frugal_stage_seconds_total{stage="ocr"}'
has "metrics: asr stage time" "$TMP/metrics.txt" 'frugal_stage_seconds_total{stage="asr"}'
has "metrics: ocr stage energy" "$TMP/metrics.txt" 'frugal_energy_joules_total{device="cpu",stage="ocr"'

# ---- the ledger ----
[ -s "$TMP/ledger.db" ] && ok "ledger written" || bad "ledger written"
row() { q "SELECT $2 FROM requests WHERE trace_id = '$1'"; }
[ "$(row $T_IMG modality)" = "image+text" ] && ok "image row: modality image+text" || bad "image row: modality '$(row $T_IMG modality)'"
[ "$(row $T_AUD modality)" = "audio+text" ] && ok "audio row: modality audio+text" || bad "audio row: modality '$(row $T_AUD modality)'"
[ "$(row $T_TXT modality)" = "text" ] && ok "text row: modality text" || bad "text row: modality '$(row $T_TXT modality)'"
[ "$(row $T_AST modality)" = "text" ] && ok "assist row: modality text" || bad "assist row: modality '$(row $T_AST modality)'"
[ "$(row $T_AST route)" = "assist" ] && ok "assist row: route assist" || bad "assist row: route '$(row $T_AST route)'"
case "$(row $T_IMG stages)" in decode_media,ocr,*prefill*) ok "image row: decode_media, ocr, then the engine";; *) bad "image row: stages '$(row $T_IMG stages)'";; esac
case "$(row $T_AUD stages)" in decode_media,asr,*prefill*) ok "audio row: decode_media, asr, then the engine";; *) bad "audio row: stages '$(row $T_AUD stages)'";; esac
# stage seconds (from request_stages) of one row and stage
secs() { q "SELECT coalesce(sum(s.seconds), 0) FROM request_stages s JOIN requests r ON s.request = r.id WHERE r.trace_id = '$1'${2:+ AND s.stage = '$2'}"; }
pyt 'a > 0.01' "$(secs $T_IMG ocr)" 0 && ok "image row: ocr time $(secs $T_IMG ocr) s" || bad "image row: ocr time '$(secs $T_IMG ocr)'"
pyt 'a > 0' "$(secs $T_IMG decode_media)" 0 && ok "image row: decode_media time" || bad "image row: decode_media time '$(secs $T_IMG decode_media)'"
pyt 'a > 0.01' "$(secs $T_AUD asr)" 0 && ok "audio row: asr time $(secs $T_AUD asr) s" || bad "audio row: asr time '$(secs $T_AUD asr)'"
pyt 'a > 0' "$(secs $T_AUD decode_media)" 0 && ok "audio row: decode_media time" || bad "audio row: decode_media time '$(secs $T_AUD decode_media)'"
# the stages cover the request: their seconds are most of its latency (the body is parsed inside)
for t in $T_IMG $T_AUD; do
    s=$(secs $t); l=$(row $t latency_s)
    pyt 'a >= 0.8 * b and a <= 1.05 * b' "$s" "$l" && ok "stages cover the latency ($s of $l s)" || bad "stages cover the latency ($s of $l s)"
done
pyt 'a > 0' "$(q "SELECT coalesce(sum(s.joules), 0) FROM request_stages s JOIN requests r ON s.request = r.id WHERE r.trace_id = '$T_IMG' AND s.stage = 'ocr'")" 0 \
    && ok "image row: ocr energy" || bad "image row: ocr energy"
# the response's figures are the row's (tolerance: 1e-9 relative + 1e-15 J, printing rounding)
for p in "image $T_IMG" "audio $T_AUD" "text $T_TXT" "assist $T_AST"; do
    set -- $p
    read -r rj ru rf <"$TMP/$1.fr"
    lj=$(row "$2" "joules + joules_idle"); lu=$(row "$2" usd_total)
    pyt 'a > 0' "$rj" 0 && ok "$1 response: joules $rj > 0" || bad "$1 response: joules '$rj'"
    [ "$rf" = True ] && ok "$1 response: final" || bad "$1 response: final '$rf'"
    pyt 'abs(a - b) <= 1e-9 * abs(b) + 1e-15' "$rj" "${lj:-nan}" && ok "$1: response joules = ledger ($lj)" || bad "$1: response joules $rj, ledger '$lj'"
    pyt 'a > 0 and abs(a - b) <= 1e-9 * abs(b) + 1e-18' "$ru" "${lu:-nan}" && ok "$1: response \$ = ledger ($lu)" || bad "$1: response \$ $ru, ledger '$lu'"
done

# ---- the traces: the media stages are spans of the request's trace ----
python3 - "$TMP/traces.jsonl" $T_IMG $T_AUD >"$TMP/spans.txt" 2>&1 <<'PY'
import json, sys
spans = {}
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                spans.setdefault(sp["traceId"], []).append(
                    (sp["name"], (int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])) / 1e9))
for t in sys.argv[2:]:
    print(t, " ".join("%s:%.3f" % s for s in spans.get(t, [])))
PY
grep "^$T_IMG" "$TMP/spans.txt" >"$TMP/spans_img.txt"; grep "^$T_AUD" "$TMP/spans.txt" >"$TMP/spans_aud.txt"
has "trace: image request has decode_media and ocr spans" "$TMP/spans_img.txt" " decode_media:"
has "trace: ocr span" "$TMP/spans_img.txt" " ocr:"
has "trace: audio request has an asr span" "$TMP/spans_aud.txt" " asr:"

# ---- audit and roi under the default cost model ----
"$BIN" audit --ledger "$TMP/ledger.db" >"$TMP/audit.txt" 2>&1
[ $? = 0 ] && ok "audit exits 0" || bad "audit exits 0 ($(head -c 300 "$TMP/audit.txt"))"
has "audit: the default hardware price" "$TMP/audit.txt" "vCPU"
has "audit: image+text row" "$TMP/audit.txt" "image+text"
usd=$(sed -n 's/^ *cost *\$\([0-9.]*\) for requests.*/\1/p' "$TMP/audit.txt")
pyt 'a > 0' "${usd:-0}" 0 && ok "audit: requests cost \$$usd" || bad "audit: requests cost '$usd'"
"$BIN" roi --a "$TMP/ledger.db" --b "$TMP/ledger.db" >"$TMP/roi.txt" 2>&1
[ $? = 0 ] && ok "roi exits 0" || bad "roi exits 0 ($(head -c 300 "$TMP/roi.txt"))"
has "roi: SLA without SLOs is n/a" "$TMP/roi.txt" "n/a"
dep=$(sed -n 's/^TCO\/yr depreciation (\$) *\([0-9.]*\) .*/\1/p' "$TMP/roi.txt")
pyt 'a > 0' "${dep:-0}" 0 && ok "roi: depreciation \$$dep/yr" || bad "roi: depreciation '$dep'"
for f in audit roi; do
    if grep -qiwE 'nan|-nan|inf|-inf' "$TMP/$f.txt"; then bad "$f: no nan/inf ($(grep -iwE 'nan|inf' "$TMP/$f.txt" | head -n 2))"
    else ok "$f: no nan/inf"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
