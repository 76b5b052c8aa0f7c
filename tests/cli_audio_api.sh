#!/bin/sh
# cli_audio_api.sh — OpenAI's audio API on a real `frugal serve` (tiny fixture LLM, the embedded
# pocketsphinx ASR, API keys, a ledger in a scratch folder), with curl and with the official
# `openai` npm client (tests/serve/audio_client.mjs; scripts/install-deps.sh unpacks the pinned
# package into tests/serve/node_modules: missing, this test fails).
# Checked: POST /v1/audio/transcriptions in every response_format (json, text, srt, vtt,
# verbose_json with its one segment) and /v1/audio/translations (json, verbose_json) answer the
# espeak-ng recording's words with the right Content-Type and the cost in X-Frugal-* headers
# (and the JSON formats' "frugal" object) equal to the ledger row's; every refusal (no key, bad
# X-Priority, not multipart, missing / malformed boundary, no file part, a duplicated field, an
# empty / truncated / corrupt / MP3 file, unknown response_format, word timestamps, a language
# other than English, temperature out of range, an unknown model, stream, a part without
# Content-Disposition, part headers over their limit, a form that never closes, too many parts,
# a field over its limit, a body over max_body_bytes, GET) is its 4xx with an OpenAI-shaped
# error and a ledger row (route, modality audio, status rejected, the HTTP status), X-Deadline-Ms
# passed is 504 deadline_exceeded (row failed); the server
# keeps serving after them; the rows of served requests list decode_media and asr; /metrics
# counts both endpoints under their own label. A second server with Whisper weights
# (--asr-model, the tiny random fixture): segments from its timestamps in verbose_json / srt /
# vtt, languages by name, translation, its refusals and rows. Prints one line per check and ends with
# "N passed, N failed". Needs curl, sqlite3, python3, espeak-ng, node.
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-audioapi.XXXXXX")
pass=0; fail=0; PID=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
q() { sqlite3 "$TMP/ledger.db" "$1"; }
# pyj FILE EXPR: true when the Python expression over j (FILE's JSON) holds
pyj() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" 2>/dev/null; }

# ---- the recording (a missing input is a failure) ----
SAY="my card has not arrived yet"
espeak-ng -v en-us -s 150 -w "$TMP/speech.wav" "$SAY" 2>"$TMP/espeak.err"
[ -s "$TMP/speech.wav" ] && ok "speech recorded" || { bad "speech recorded ($(cat "$TMP/espeak.err"))"; finish; }
: >"$TMP/empty.wav"
head -c 200 "$TMP/speech.wav" >"$TMP/cut.wav"
printf 'RIFF\044\000\000\000WAVEfmt \020\000\000\000junkjunkjunkjunk' >"$TMP/corrupt.wav"
printf 'ID3\003\000\000\000\000\000\017\377\373\220\144not really an mp3 frame' >"$TMP/song.mp3"
# the recording's length as the cues write it (SubRip's comma, WebVTT's point) and in seconds
read -r DUR SRT_END VTT_END <<EOF
$(python3 -c "
import wave, sys
w = wave.open(sys.argv[1]); s = w.getnframes() / w.getframerate(); ms = round(s * 1000)
t = '%02d:%02d:%02d' % (ms // 3600000, ms // 60000 % 60, ms // 1000 % 60)
print('%.3f' % (ms / 1000), '%s,%03d' % (t, ms % 1000), '%s.%03d' % (t, ms % 1000))" "$TMP/speech.wav")
EOF
[ -n "$VTT_END" ] && ok "recording of $DUR s" || bad "the recording's length"

# ---- the server ----
printf 'sk-audio-a P1\nsk-audio-batch P2 P2\n' >"$TMP/keys"
. tests/serve/start.sh
serve_start "$TMP/s.out" "$TMP/s.err" --model tests/fixtures/qwen2-tiny --port 0 --ledger "$TMP/ledger.db" \
    --api-keys "$TMP/keys"
[ -n "$PORT" ] || { bad "server started ($(cat "$TMP/s.err"))"; finish; }
URL=http://127.0.0.1:$PORT
KEY='Authorization: Bearer sk-audio-a'
# post NAME PATH CURL-ARGS...: POST with the key ($AUTH, else $KEY) and NAME's own trace id (its MD5); body in
# $TMP/NAME.out, headers in $TMP/NAME.h, the trace id in $TMP/NAME.trace; prints the status
post() {
    name=$1 path=$2; shift 2
    TRACE=$(printf '%s' "$name" | md5sum | cut -c1-32)
    echo "$TRACE" >"$TMP/$name.trace"
    curl -s -o "$TMP/$name.out" -D "$TMP/$name.h" -w '%{http_code}' -H "${AUTH:-$KEY}" \
        -H "traceparent: 00-$TRACE-00f067aa0ba902b7-01" "$@" "$URL$path"
}
hdr() { sed -n "s/^$2: *//Ip" "$TMP/$1.h" | tr -d '\r' | head -n 1; }
row() { q "SELECT $2 FROM requests WHERE trace_id = '$(cat "$TMP/$1.trace")'"; }
T=/v1/audio/transcriptions; TR=/v1/audio/translations

# a first request: a fresh decoder (pocketsphinx's first utterance starts from the model's
# default cepstral mean, so its words may differ: only its status is checked)
st=$(post warm $T -F file=@"$TMP/speech.wav" -F model=whisper-1)
[ "$st" = 200 ] && ok "first transcription: 200" || bad "first transcription: HTTP $st ($(head -c 300 "$TMP/warm.out"))"

# ---- every response_format ----
st=$(post json $T -F file=@"$TMP/speech.wav" -F model=whisper-1 -F response_format=json)
[ "$st" = 200 ] && pyj "$TMP/json.out" "j['text'] == '$SAY' and j['usage'] == {'type': 'duration', 'seconds': 3}" \
    && ok "json: the words, usage in seconds" || bad "json: HTTP $st $(head -c 300 "$TMP/json.out")"
case "$(hdr json Content-Type)" in application/json*) ok "json: application/json";; *) bad "json: Content-Type '$(hdr json Content-Type)'";; esac
st=$(post text $T -F file=@"$TMP/speech.wav" -F response_format=text)
[ "$st" = 200 ] && [ "$(cat "$TMP/text.out")" = "$SAY" ] && [ "$(tail -c 1 "$TMP/text.out" | od -An -c | tr -d ' ')" = '\n' ] \
    && ok "text: the words and a newline" || bad "text: HTTP $st '$(cat "$TMP/text.out")'"
case "$(hdr text Content-Type)" in text/plain*) ok "text: text/plain";; *) bad "text: Content-Type '$(hdr text Content-Type)'";; esac
printf '1\n00:00:00,000 --> %s\n%s\n\n' "$SRT_END" "$SAY" >"$TMP/want.srt"
st=$(post srt $T -F file=@"$TMP/speech.wav" -F response_format=srt)
[ "$st" = 200 ] && cmp -s "$TMP/srt.out" "$TMP/want.srt" && ok "srt: one cue over the recording" \
    || bad "srt: HTTP $st '$(cat "$TMP/srt.out")'"
printf 'WEBVTT\n\n00:00:00.000 --> %s\n%s\n\n' "$VTT_END" "$SAY" >"$TMP/want.vtt"
st=$(post vtt $T -F file=@"$TMP/speech.wav" -F response_format=vtt)
[ "$st" = 200 ] && cmp -s "$TMP/vtt.out" "$TMP/want.vtt" && ok "vtt: WEBVTT and one cue" \
    || bad "vtt: HTTP $st '$(cat "$TMP/vtt.out")'"
case "$(hdr vtt Content-Type)" in text/vtt*) ok "vtt: text/vtt";; *) bad "vtt: Content-Type '$(hdr vtt Content-Type)'";; esac
st=$(post verbose $T -F file=@"$TMP/speech.wav" -F response_format=verbose_json -F 'timestamp_granularities[]=segment' \
    -F language=en -F temperature=0.2 -F 'prompt=card delivery')
[ "$st" = 200 ] && pyj "$TMP/verbose.out" "j['task'] == 'transcribe' and j['language'] == 'english' and abs(j['duration'] - $DUR) < 0.002 and j['text'] == '$SAY' and len(j['segments']) == 1 and j['segments'][0]['start'] == 0 and j['segments'][0]['end'] == j['duration'] and j['segments'][0]['text'] == '$SAY' and j['segments'][0]['id'] == 0 and j['segments'][0]['compression_ratio'] > 0" \
    && ok "verbose_json: task, language, duration, one segment" || bad "verbose_json: HTTP $st $(head -c 400 "$TMP/verbose.out")"
st=$(post tjson $TR -F file=@"$TMP/speech.wav" -F model=pocketsphinx)
[ "$st" = 200 ] && pyj "$TMP/tjson.out" "j['text'] == '$SAY'" && ok "translations json: the English transcript" \
    || bad "translations json: HTTP $st $(head -c 300 "$TMP/tjson.out")"
st=$(post tverbose $TR -F file=@"$TMP/speech.wav" -F response_format=verbose_json)
[ "$st" = 200 ] && pyj "$TMP/tverbose.out" "j['task'] == 'translate' and j['language'] == 'english' and len(j['segments']) == 1" \
    && ok "translations verbose_json: task translate" || bad "translations verbose_json: HTTP $st $(head -c 300 "$TMP/tverbose.out")"
st=$(post tsrt $TR -F file=@"$TMP/speech.wav" -F response_format=srt)
[ "$st" = 200 ] && cmp -s "$TMP/tsrt.out" "$TMP/want.srt" && ok "translations srt" || bad "translations srt: HTTP $st"
st=$(AUTH='Authorization: Bearer sk-audio-batch' post batch $T -F file=@"$TMP/speech.wav" -H 'X-Priority: P0')
[ "$st" = 200 ] && ok "a P2-capped key asking P0: served" || bad "a P2-capped key asking P0: HTTP $st"

# ---- refusals: NAME STATUS CODE PATH CURL-ARGS... ----
refused() {
    name=$1 want=$2 code=$3 path=$4; shift 4
    st=$(post "$name" "$path" "$@")
    [ "$code" = null ] && jc=None || jc="'$code'"
    if [ "$st" = "$want" ] && pyj "$TMP/$name.out" "j['error']['code'] == $jc and j['error']['type'] == 'invalid_request_error' and len(j['error']['message']) > 10 and 'param' in j['error']"; then
        ok "refused $name: $want $code"
    else bad "refused $name: HTTP $st (want $want $code) $(head -c 300 "$TMP/$name.out")"; fi
}
refused xpriority 400 null $T -H 'X-Priority: P7' -F file=@"$TMP/speech.wav" 2>/dev/null
refused not_multipart 400 not_multipart $T -H 'Content-Type: application/json' -d '{"file": "x"}'
refused no_boundary 400 missing_boundary $T -H 'Content-Type: multipart/form-data' --data-binary 'x'
refused long_boundary 400 bad_boundary $T -H "Content-Type: multipart/form-data; boundary=$(printf '%080d' 0)" --data-binary 'x'
refused no_file 400 missing_file $T -F model=whisper-1 -F response_format=json
refused two_files 400 duplicate_field $T -F file=@"$TMP/speech.wav" -F file=@"$TMP/speech.wav"
refused empty 400 invalid_audio $T -F file=@"$TMP/empty.wav"
refused truncated 400 invalid_audio $T -F file=@"$TMP/cut.wav"
refused corrupt 400 invalid_audio $T -F file=@"$TMP/corrupt.wav"
refused mp3 415 unsupported_media_type $T -F file=@"$TMP/song.mp3"
refused format 400 invalid_value $T -F file=@"$TMP/speech.wav" -F response_format=xml
refused word 400 unsupported_value $T -F file=@"$TMP/speech.wav" -F response_format=verbose_json -F 'timestamp_granularities[]=word'
refused granularity 400 invalid_value $T -F file=@"$TMP/speech.wav" -F 'timestamp_granularities[]=phoneme'
refused french 400 unsupported_language $T -F file=@"$TMP/speech.wav" -F language=fr
refused french_tr 400 unsupported_language $TR -F file=@"$TMP/speech.wav" -F language=de
refused language 400 invalid_value $T -F file=@"$TMP/speech.wav" -F 'language=en_US!'
refused hot 400 invalid_value $T -F file=@"$TMP/speech.wav" -F temperature=1.5
refused nan 400 invalid_value $T -F file=@"$TMP/speech.wav" -F temperature=nan
refused model 404 model_not_found $T -F file=@"$TMP/speech.wav" -F model=gpt-9-transcribe
refused stream 400 unsupported_value $T -F file=@"$TMP/speech.wav" -F stream=true
CT='Content-Type: multipart/form-data; boundary=XyZ'
printf -- '--XyZ\r\nContent-Type: audio/wav\r\n\r\nabc\r\n--XyZ--\r\n' >"$TMP/nodisp.body"
refused no_disposition 400 bad_part_header $T -H "$CT" --data-binary @"$TMP/nodisp.body"
python3 -c "import sys; sys.stdout.write('--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\nX-Pad: ' + 'a' * 5000 + '\r\n\r\nabc\r\n--XyZ--\r\n')" >"$TMP/bighead.body"
refused big_header 400 part_header_too_large $T -H "$CT" --data-binary @"$TMP/bighead.body"
printf -- '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF' >"$TMP/open.body"
refused unclosed 400 bad_multipart $T -H "$CT" --data-binary @"$TMP/open.body"
set --; for k in $(seq 1 40); do set -- "$@" -F "f$k=x"; done
refused many_parts 400 too_many_parts $T "$@" -F file=@"$TMP/speech.wav"
python3 -c "print('a' * 5000, end='')" >"$TMP/prompt.txt"
refused big_field 413 part_too_large $T -F file=@"$TMP/speech.wav" -F "prompt=<$TMP/prompt.txt"
head -c 1100000 /dev/zero >"$TMP/pad.bin"
refused big_body 413 request_too_large $T -F file=@"$TMP/speech.wav" -F "pad=@$TMP/pad.bin"
st=$(post deadline $T -H 'X-Deadline-Ms: 1' -F file=@"$TMP/speech.wav")
[ "$st" = 504 ] && pyj "$TMP/deadline.out" "j['error']['code'] == 'deadline_exceeded' and j['error']['type'] == 'timeout_error'" \
    && ok "X-Deadline-Ms 1: 504 deadline_exceeded" || bad "X-Deadline-Ms 1: HTTP $st $(head -c 300 "$TMP/deadline.out")"
st=$(curl -s -o "$TMP/nokey.out" -w '%{http_code}' -H "traceparent: 00-4bf92f3577b34da6a3ce929d0effffff-00f067aa0ba902b7-01" \
    -F file=@"$TMP/speech.wav" "$URL$T")
[ "$st" = 401 ] && pyj "$TMP/nokey.out" "j['error']['code'] == 'missing_api_key'" && ok "no key: 401" || bad "no key: HTTP $st"
st=$(curl -s -o "$TMP/get.out" -D "$TMP/get.h" -w '%{http_code}' -H "$KEY" "$URL$TR")
[ "$st" = 405 ] && [ "$(hdr get Allow)" = POST ] && ok "GET: 405, Allow POST" || bad "GET: HTTP $st Allow '$(hdr get Allow)'"

# ---- still serving ----
st=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[ "$st" = 200 ] && ok "health after the refusals" || bad "health after the refusals: $st"
st=$(post after $T -F file=@"$TMP/speech.wav" -F response_format=text)
[ "$st" = 200 ] && [ "$(cat "$TMP/after.out")" = "$SAY" ] && ok "transcribes after the refusals" || bad "transcribes after the refusals: HTTP $st"

# ---- the official openai client ----
if ! command -v node >/dev/null 2>&1; then bad "node is installed"
elif [ ! -f tests/serve/node_modules/openai/package.json ]; then
    bad "the openai npm client is installed (sh scripts/install-deps.sh)"
else
    out=$(cd tests/serve && FRUGAL_URL=$URL FRUGAL_KEY=sk-audio-a node audio_client.mjs "$TMP/speech.wav" card 2>&1); rc=$?
    echo "$out" | sed -n 's/^ok /ok   /p; s/^FAIL /FAIL /p'
    pass=$((pass + $(echo "$out" | grep -c '^ok '))); fail=$((fail + $(echo "$out" | grep -c '^FAIL ')))
    [ "$rc" = 0 ] && [ "$(echo "$out" | grep -c '^ok ')" -ge 12 ] && ok "openai client: exit 0, every check ran" \
        || bad "openai client: exit $rc ($(echo "$out" | grep -v '^ok ' | head -c 600))"
fi

curl -s -H "$KEY" "$URL/metrics" >"$TMP/metrics.txt"
grep -q 'frugal_requests_total{endpoint="/v1/audio/transcriptions",tier="P1",status="200"}' "$TMP/metrics.txt" \
    && ok "metrics: transcriptions endpoint" || bad "metrics: transcriptions endpoint"
grep -q 'frugal_requests_total{endpoint="/v1/audio/translations",tier="P1",status="200"}' "$TMP/metrics.txt" \
    && ok "metrics: translations endpoint" || bad "metrics: translations endpoint"
grep -q 'frugal_requests_total{endpoint="other"' "$TMP/metrics.txt" && bad "metrics: nothing counted as other" || ok "metrics: nothing counted as other"
kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
[ "$rc" = 0 ] && ok "server exit 0" || bad "server exit $rc"

# ---- the ledger ----
for r in json text srt vtt verbose tjson tverbose batch after; do
    got="$(row $r route)|$(row $r modality)|$(row $r stages)|$(row $r status)|$(row $r http_status)"
    case $r in t*) want=translations;; *) want=transcriptions;; esac
    [ "$r" = text ] && want=transcriptions
    [ "$got" = "$want|audio|decode_media,asr|ok|200" ] && ok "row $r: $got" || bad "row $r: '$got'"
done
[ "$(row batch tier)" = P2 ] && ok "row batch: the key's cap P2" || bad "row batch: tier '$(row batch tier)'"
# the response's figures are the row's (headers and the JSON object; printing tolerance)
for r in json text verbose tjson; do
    hj=$(hdr $r X-Frugal-Joules); lj=$(row $r "joules + joules_idle"); lu=$(row $r usd_total); hu=$(hdr $r X-Frugal-Usd)
    python3 -c "import sys; a, b, c, d = map(float, sys.argv[1:]); sys.exit(0 if a > 0 and abs(a - b) <= 1e-6 * b + 1e-12 and abs(c - d) <= 1e-6 * d + 1e-15 else 1)" \
        "$hj" "$lj" "$hu" "$lu" && ok "$r: X-Frugal-Joules $hj = the row's" || bad "$r: headers '$hj' '$hu', row '$lj' '$lu'"
    [ "$(hdr $r X-Frugal-Final)" = true ] && ok "$r: X-Frugal-Final true" || bad "$r: X-Frugal-Final '$(hdr $r X-Frugal-Final)'"
done
for r in json verbose tjson; do
    pyj "$TMP/$r.out" "abs(j['frugal']['joules'] - $(row $r "joules + joules_idle")) <= 1e-9 * j['frugal']['joules'] + 1e-15 and j['frugal']['final'] is True" \
        && ok "$r: frugal object = the row's" || bad "$r: frugal object $(head -c 300 "$TMP/$r.out")"
done
for r in xpriority:400 not_multipart:400 no_boundary:400 no_file:400 empty:400 mp3:415 format:400 word:400 french:400 french_tr:400 \
         model:404 no_disposition:400 big_header:400 many_parts:400 big_field:413 big_body:413; do
    name=${r%%:*} st=${r#*:}
    case $name in french_tr) want=translations;; *) want=transcriptions;; esac
    got="$(row $name route)|$(row $name modality)|$(row $name status)|$(row $name http_status)"
    [ "$got" = "$want|audio|rejected|$st" ] && ok "row $name: $got" || bad "row $name: '$got'"
done
got="$(row deadline status)|$(row deadline http_status)|$(row deadline stages)"
[ "$got" = "failed|504|decode_media,asr" ] && ok "row deadline: $got" || bad "row deadline: '$got'"
got=$(q "SELECT route || '|' || modality || '|' || http_status FROM requests WHERE trace_id = '4bf92f3577b34da6a3ce929d0effffff'")
[ "$got" = "transcriptions|audio|401" ] && ok "row no key: $got" || bad "row no key: '$got'"
[ "$(row mp3 stages)" = decode_media ] && ok "row mp3: the decode stage ran" || bad "row mp3: stages '$(row mp3 stages)'"
nasr=$(q "SELECT count(*) FROM requests WHERE route IN ('transcriptions', 'translations') AND stages = 'decode_media,asr' AND status = 'ok'")
# 11 by curl, 7 by the openai client
[ "$nasr" = 18 ] && ok "$nasr served audio rows (curl and the openai client)" || bad "served audio rows: $nasr, want 18"

# ---- Whisper (--asr-model): the tiny random-weight fixture, so the structure is checked, not
# the words: segments from its timestamp tokens (srt and vtt cue for cue), the detected or given
# language by name, translation with the translate task, its languages and its model name ----
WH=tests/fixtures/whisper-tiny/hf-80
"$BIN" serve --model tests/fixtures/qwen2-tiny --port 0 --ledger "" --asr-model "$TMP/none" >/dev/null 2>"$TMP/wbad.err"
rc=$?
[ "$rc" = 1 ] && grep -q "$TMP/none" "$TMP/wbad.err" && ok "--asr-model missing: exit 1 naming it" \
    || bad "--asr-model missing: exit $rc ($(head -c 200 "$TMP/wbad.err"))"
serve_start "$TMP/w.out" "$TMP/w.err" --model tests/fixtures/qwen2-tiny --port 0 --ledger "$TMP/wledger.db" --asr-model "$WH"
[ -n "$PORT" ] || { bad "Whisper server started ($(tail -c 300 "$TMP/w.err"))"; finish; }
URL=http://127.0.0.1:$PORT
AUD=tests/fixtures/whisper-tiny/audio/chirp-7.3s.wav
st=$(post wverbose $T -F file=@$AUD -F response_format=verbose_json -F model=whisper)
[ "$st" = 200 ] && pyj "$TMP/wverbose.out" "j['task'] == 'transcribe' and j['language'].isalpha() and len(j['language']) > 3 and abs(j['duration'] - 7.3) < 0.01 and len(j['segments']) >= 1 and all(s['start'] <= s['end'] for s in j['segments']) and [s['id'] for s in j['segments']] == list(range(len(j['segments'])))" \
    && ok "whisper verbose_json: detected language by name, $(python3 -c "import json; print(len(json.load(open('$TMP/wverbose.out'))['segments']))" 2>/dev/null) segments" \
    || bad "whisper verbose_json: HTTP $st $(head -c 400 "$TMP/wverbose.out")"
st=$(post wsrt $T -F file=@$AUD -F response_format=srt)
python3 - "$TMP/wverbose.out" "$TMP/wsrt.out" <<'PY' && ok "whisper srt: one cue per segment, the same times" || bad "whisper srt: HTTP $st $(head -c 300 "$TMP/wsrt.out")"
import json, sys
segs = json.load(open(sys.argv[1]))['segments']
def t(x): ms = round(x * 1000); return '%02d:%02d:%02d,%03d' % (ms // 3600000, ms // 60000 % 60, ms // 1000 % 60, ms % 1000)
want = ''.join('%d\n%s --> %s\n%s\n\n' % (i + 1, t(s['start']), t(s['end']), s['text'].lstrip(' ')) for i, s in enumerate(segs))
sys.exit(0 if open(sys.argv[2]).read() == want else 1)
PY
st=$(post wvtt $T -F file=@$AUD -F response_format=vtt)
[ "$st" = 200 ] && [ "$(grep -c -- ' --> ' "$TMP/wvtt.out")" = "$(grep -c -- ' --> ' "$TMP/wsrt.out")" ] && head -n 1 "$TMP/wvtt.out" | grep -qx WEBVTT \
    && ok "whisper vtt: as many cues" || bad "whisper vtt: HTTP $st"
st=$(post wen $T -F file=@$AUD -F response_format=verbose_json -F language=en)
[ "$st" = 200 ] && pyj "$TMP/wen.out" "j['language'] == 'english'" && ok "whisper language=en: english" || bad "whisper language=en: HTTP $st $(head -c 200 "$TMP/wen.out")"
st=$(post wde $T -F file=@$AUD -F response_format=verbose_json -F language=de)
[ "$st" = 200 ] && pyj "$TMP/wde.out" "j['language'] == 'german'" && ok "whisper language=de: german" || bad "whisper language=de: HTTP $st"
st=$(post wtr $TR -F file=@$AUD -F response_format=verbose_json -F language=de -F model=whisper-1)
[ "$st" = 200 ] && pyj "$TMP/wtr.out" "j['task'] == 'translate' and j['language'] == 'english'" \
    && ok "whisper translations: the translate task" || bad "whisper translations: HTTP $st $(head -c 200 "$TMP/wtr.out")"
st=$(post wjson $T -F file=@$AUD)
[ "$st" = 200 ] && pyj "$TMP/wjson.out" "isinstance(j['text'], str) and j['usage']['seconds'] == 8" && ok "whisper json" || bad "whisper json: HTTP $st"
refused wxx 400 unsupported_language $T -F file=@$AUD -F language=xx
refused wps 404 model_not_found $T -F file=@$AUD -F model=pocketsphinx
refused wword 400 unsupported_value $T -F file=@$AUD -F response_format=verbose_json -F 'timestamp_granularities[]=word'
refused wmp3 415 unsupported_media_type $T -F file=@"$TMP/song.mp3"
kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
[ "$rc" = 0 ] && ok "Whisper server exit 0" || bad "Whisper server exit $rc"
got=$(sqlite3 "$TMP/wledger.db" "SELECT group_concat(route || ':' || modality || ':' || stages || ':' || http_status, ' ') FROM requests")
[ "$got" = "transcriptions:audio:decode_media,asr:200 transcriptions:audio:decode_media,asr:200 transcriptions:audio:decode_media,asr:200 transcriptions:audio:decode_media,asr:200 transcriptions:audio:decode_media,asr:200 translations:audio:decode_media,asr:200 transcriptions:audio:decode_media,asr:200 transcriptions:audio::400 transcriptions:audio::404 transcriptions:audio::400 transcriptions:audio:decode_media:415" ] \
    && ok "whisper rows: decode_media and asr, refusals" || bad "whisper rows: '$got'"
finish
