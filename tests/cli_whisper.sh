#!/bin/sh
# cli_whisper.sh — `frugal transcribe` end to end on the tiny HF fixtures
# (tests/fixtures/whisper-tiny, references in tests/fixtures/ref/whisper/ref.json): the JSON
# output holds HF's greedy tokens for the forced-language case, HF's detected language and the
# tokens after it; --timestamps prints segment lines; the ggml file of the same model transcribes
# with beam search and translate; bad input exits 1 (a missing model, a truncated model, non-audio)
# or 2 (usage, an unknown language).
# Prints one line per check and ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FIX=${FRUGAL_FIXTURES:-tests/fixtures}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-whisper.XXXXXX")
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
rc_is() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (exit $2, want $3)"; fi; }
same() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
trap 'rm -rf "$TMP"' EXIT INT TERM
# HF's references are of the whole recordings: no VAD in front (tests/test_vad.c covers it)
export FRUGAL_NO_VAD=1

REF=$FIX/ref/whisper/ref.json
HF=$FIX/whisper-tiny/hf-80
AUD=$FIX/whisper-tiny/audio
# the reference's tokens for a case, as "a,b,c" without a final <|endoftext|>
ref_tokens() {
    python3 -c "
import json, sys
r = json.load(open('$REF'))
eot = r['vocab']['eot']
c = [g for g in r['models']['hf-80']['generate'] if g['name'] == sys.argv[1]][0]
t = list(c['tokens'])
while t and t[-1] == eot: t.pop()
print(','.join(map(str, t)))" "$1"
}
json_field() { python3 -c "import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(','.join(map(str, v)) if isinstance(v, list) else v)" "$1" "$2"; }

if [ ! -f "$REF" ] || [ ! -d "$HF" ]; then
    bad "fixtures present ($REF, $HF)"
    echo "$pass passed, $fail failed"
    exit 1
fi

"$BIN" transcribe --model "$HF" --audio "$AUD/chirp-7.3s.wav" --language en --max-new-tokens 16 --json \
    >"$TMP/en.json" 2>"$TMP/en.err"
rc_is "transcribe --json exits 0" $? 0
same "greedy tokens are HF's (chirp, en)" "$(json_field "$TMP/en.json" tokens)" "$(ref_tokens chirp-en-greedy)"
same "language reported" "$(json_field "$TMP/en.json" language)" "en"

"$BIN" transcribe --model "$HF" --audio "$AUD/chirp-7.3s.wav" --max-new-tokens 16 --json >"$TMP/det.json" 2>/dev/null
rc_is "language detection exits 0" $? 0
want=$(python3 -c "
import json
r = json.load(open('$REF'))
c = [g for g in r['models']['hf-80']['generate'] if g['name'] == 'chirp-detect-greedy'][0]
langs = {v: k for k, v in r['vocab']['languages'].items()}
print(langs[c['detected_language']])")
same "detected language is HF's" "$(json_field "$TMP/det.json" language)" "$want"
same "tokens after detection are HF's" "$(json_field "$TMP/det.json" tokens)" "$(ref_tokens chirp-detect-greedy)"

"$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --language en --timestamps --max-new-tokens 16 \
    >"$TMP/ts.out" 2>/dev/null
rc_is "--timestamps exits 0" $? 0
if grep -qE '^\[[0-9]+\.[0-9]{2} --> [0-9]+\.[0-9]{2}\]' "$TMP/ts.out"; then ok "--timestamps prints segment lines"
else bad "--timestamps prints segment lines"; sed 's/^/    /' "$TMP/ts.out" | head; fi

"$BIN" transcribe --model "$FIX/whisper-tiny/ggml-80-f32.bin" --audio "$AUD/noise-2s.wav" --language de \
    --task translate --beams 3 --max-new-tokens 8 --json >"$TMP/ggml.json" 2>/dev/null
rc_is "a ggml model, beam search, translate: exits 0" $? 0

"$BIN" transcribe --model "$TMP/none" --audio "$AUD/tone-1s.wav" >/dev/null 2>"$TMP/e1"
rc_is "a missing model exits 1" $? 1
head -c 3000 "$FIX/whisper-tiny/ggml-80-f32.bin" > "$TMP/cut.bin"
"$BIN" transcribe --model "$TMP/cut.bin" --audio "$AUD/tone-1s.wav" >/dev/null 2>"$TMP/e2"
rc_is "a truncated ggml model exits 1" $? 1
if grep -q "cut.bin" "$TMP/e2"; then ok "the error names the file"; else bad "the error names the file"; fi
printf 'not audio at all' > "$TMP/x.wav"
"$BIN" transcribe --model "$HF" --audio "$TMP/x.wav" >/dev/null 2>&1
rc_is "non-audio exits 1" $? 1
"$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --language xx >/dev/null 2>&1
rc_is "an unknown language exits 2" $? 2
"$BIN" transcribe --model "$HF" >/dev/null 2>&1
rc_is "no --audio exits 2" $? 2

# --device: cpu is the reference; a CUDA device in a binary without the CUDA backend is refused
"$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --language en --max-new-tokens 8 \
    --device cpu --json >"$TMP/dev_cpu.json" 2>/dev/null
rc_is "--device cpu exits 0" $? 0
same "--device cpu gives the default's tokens" "$(json_field "$TMP/dev_cpu.json" tokens)" \
    "$("$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --language en --max-new-tokens 8 \
        --json 2>/dev/null | json_field /dev/stdin tokens)"
"$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --device cuda --max-new-tokens 4 \
    >/dev/null 2>"$TMP/e3"
rc=$?
if grep -q "no CUDA backend" "$TMP/e3"; then
    rc_is "--device cuda in the CPU-only binary exits 1" $rc 1
else
    ok "--device cuda: this binary has the CUDA backend (exit $rc; not the CPU-only case)"
fi
"$BIN" transcribe --model "$HF" --audio "$AUD/tone-1s.wav" --device gpu >/dev/null 2>&1
rc_is "--device gpu (not a device) exits 1" $? 1

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
