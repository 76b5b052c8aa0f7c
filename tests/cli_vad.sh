#!/bin/sh
# cli_vad.sh — `frugal vad` end to end on the committed fixtures (tests/fixtures/vad): the speech
# fixture gives two spans around its sentences (none over the 3 s pause), noise and silence none,
# --probs gives one probability per 512-sample window, --threshold moves the spans; a missing
# model or non-audio exits 1 with one line, usage errors exit 2. Needs models/vad
# (scripts/install-deps.sh): without it the spans checks FAIL.
# Prints one line per check and ends with "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FIX=tests/fixtures/vad
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
rc_is() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (exit $2, want $3)"; fi; }
same() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
# field FIELD: the value of FIELD in the JSON line on stdin (python3 reads it)
field() { python3 -c "import json,sys; print(json.dumps(json.loads(sys.stdin.readline())[sys.argv[1]]))" "$1"; }

out=$("$BIN" vad "$FIX/speech_pauses.wav"); rc=$?
rc_is "speech fixture exits 0" "$rc" 0
same "two spans" "$(echo "$out" | python3 -c "import json,sys; print(len(json.load(sys.stdin)['spans']))")" 2
same "spans cover the sentences, not the pause" "$(echo "$out" | python3 -c "
import json, sys
s = json.load(sys.stdin)['spans']
print(s[0][0] <= 0.75 and s[0][1] >= 3.9 and s[0][1] <= 4.9 and 6.9 <= s[1][0] <= 7.6 and s[1][1] >= 9.6)")" True
same "343 windows" "$(echo "$out" | field windows)" 343
same "noise: no span" "$("$BIN" vad "$FIX/noise.wav" | field spans)" "[]"
same "silence: no span" "$("$BIN" vad "$FIX/silence.wav" | field spans)" "[]"
same "--probs: one per window" "$("$BIN" vad --probs "$FIX/silence.wav" | python3 -c "import json,sys; print(len(json.load(sys.stdin)['probs']))")" 63
same "--threshold 0.99 keeps less speech" "$("$BIN" vad --threshold 0.99 "$FIX/speech_pauses.wav" | python3 -c "import json,sys; print(json.load(sys.stdin)['speech_s'] < 6.4)")" True
err=$("$BIN" vad --model "$FIX/no-such-model.onnx" "$FIX/noise.wav" 2>&1 >/dev/null); rc=$?
rc_is "a missing model exits 1" "$rc" 1
same "one line" "$(printf '%s\n' "$err" | wc -l | tr -d ' ')" 1
"$BIN" vad "$FIX/README.md" >/dev/null 2>&1
rc_is "non-audio exits 1" "$?" 1
"$BIN" vad >/dev/null 2>&1
rc_is "no file exits 2" "$?" 2
"$BIN" vad --threshold 2 "$FIX/noise.wav" >/dev/null 2>&1
rc_is "a bad threshold exits 2" "$?" 2
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
