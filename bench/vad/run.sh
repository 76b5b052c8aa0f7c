#!/bin/sh
# bench/vad/run.sh — what the VAD saves in front of pocketsphinx on audio with pauses.
#
#   sh bench/vad/run.sh [OUT_DIR]        (from the repository root, after `make` and
#                                         scripts/install-deps.sh; default OUT_DIR bench/out/vad)
#
# Makes 8 recordings with espeak-ng + sox (16 kHz mono): each is 3 banking questions joined by
# pauses of 2 to 5 s, with 1 s of lead-in and 1.5 s of tail; voices en-us and en-gb at 150 and
# 175 words per minute; set "clean" has digital silence in the pauses, set "floor" the same
# speech over a white-noise floor at -46 dBFS (a quiet room). Then `frugal asr` runs on each set
# with --no-vad and with the VAD, one process per run, three times, timed by /usr/bin/time (user +
# sys CPU seconds of the whole process; the least of the three, minus the least of a process on
# 0.5 s of silence: the model loads), and the JSON lines give the recognition
# seconds (proc_s, the VAD's own vad_s inside it) and the transcripts, scored by WER against the
# sentences (WER). Then Whisper's cost with and without the VAD on the recordings joined four by
# four (build/bench_vad_whisper: `make build/bench_vad_whisper` first).
set -eu
BIN=${FRUGAL_BIN:-build/frugal}
OUT=${1:-bench/out/vad}
mkdir -p "$OUT/wav"
S1="i still have not received my new card"
S2="how do i transfer money to my savings account"
S3="why was my card payment declined at the shop"
S4="can you tell me the exchange rate for euros"
S5="please freeze my card because it was stolen"
S6="what is the balance of my checking account"
S7="i want to cancel a transfer that i made yesterday"
S8="where can i find my account number and sort code"
set -- "$S1|$S2|$S3" "$S4|$S5|$S6" "$S7|$S8|$S1" "$S2|$S4|$S7" "$S3|$S5|$S8" "$S6|$S1|$S4" \
       "$S5|$S7|$S2" "$S8|$S3|$S6"
PAUSES="2.0 3.5 5.0 2.5 4.0 3.0 4.5 2.0"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: > "$OUT/refs.txt"
i=0
for trio in "$@"; do
    i=$((i + 1))
    voice=$([ $((i % 2)) -eq 0 ] && echo en-gb || echo en-us)
    speed=$([ $((i % 4)) -lt 2 ] && echo 150 || echo 175)
    p1=$(echo $PAUSES | cut -d' ' -f$i)
    p2=$(echo $PAUSES | cut -d' ' -f$(( (i % 8) + 1 )))
    parts="$T/lead.wav"
    sox -n -r 16000 -b 16 -c 1 "$T/lead.wav" trim 0 1.0
    k=0
    echo "$trio" | tr '|' '\n' > "$T/s.txt"
    while read -r s; do
        k=$((k + 1))
        espeak-ng -v "$voice" -s "$speed" -w "$T/e.wav" "$s"
        sox "$T/e.wav" -r 16000 -b 16 -c 1 "$T/s$k.wav"
        [ $k -eq 1 ] && sox -n -r 16000 -b 16 -c 1 "$T/p$k.wav" trim 0 "$p1"
        [ $k -eq 2 ] && sox -n -r 16000 -b 16 -c 1 "$T/p$k.wav" trim 0 "$p2"
        [ $k -eq 3 ] && sox -n -r 16000 -b 16 -c 1 "$T/p$k.wav" trim 0 1.5
        parts="$parts $T/s$k.wav $T/p$k.wav"
    done < "$T/s.txt"
    # shellcheck disable=SC2086
    sox $parts "$OUT/wav/clean$i.wav"
    len=$(soxi -D "$OUT/wav/clean$i.wav")
    sox -R -n -r 16000 -b 16 -c 1 "$T/n.wav" synth "$len" whitenoise vol 0.005
    sox -m "$OUT/wav/clean$i.wav" "$T/n.wav" -b 16 "$OUT/wav/floor$i.wav"
    echo "clean$i $(echo "$trio" | tr '|' ' ')" >> "$OUT/refs.txt"
    echo "floor$i $(echo "$trio" | tr '|' ' ')" >> "$OUT/refs.txt"
done
# a baseline process on 0.5 s of silence: the model loads every run pays
sox -n -r 16000 -b 16 -c 1 "$OUT/wav/empty.wav" trim 0 0.5
for rep in 1 2 3; do
    for mode in novad vad; do
        flag=$([ $mode = novad ] && echo --no-vad || echo)
        /usr/bin/time -f "%U %S" -a -o "$OUT/base-$mode.time" "$BIN" asr $flag "$OUT/wav/empty.wav" > /dev/null
        for set in clean floor; do
            # shellcheck disable=SC2086
            /usr/bin/time -f "%U %S" -a -o "$OUT/$set-$mode.time" "$BIN" asr $flag "$OUT"/wav/$set?.wav \
                > "$OUT/$set-$mode.jsonl"
        done
    done
done
# Whisper (bench/bench_vad_whisper.c, tiny-shaped random weights): the recordings joined four by
# four (about 72 s each, past one 30 s window)
for set in clean floor; do
    sox "$OUT/wav/${set}1.wav" "$OUT/wav/${set}2.wav" "$OUT/wav/${set}3.wav" "$OUT/wav/${set}4.wav" "$OUT/wav/${set}-long1.wav"
    sox "$OUT/wav/${set}5.wav" "$OUT/wav/${set}6.wav" "$OUT/wav/${set}7.wav" "$OUT/wav/${set}8.wav" "$OUT/wav/${set}-long2.wav"
done
if [ -x "${BENCH_WHISPER:-build/bench_vad_whisper}" ]; then
    "${BENCH_WHISPER:-build/bench_vad_whisper}" --tokens 24 "$OUT"/wav/*-long?.wav > "$OUT/whisper.md"
fi
echo "machine: $(nproc) cores, $(uptime | sed 's/.*load average/load average/') (after the runs)"
python3 - "$OUT" <<'EOF'
import json, sys, os
out = sys.argv[1]
refs = {}
for line in open(os.path.join(out, "refs.txt")):
    name, text = line.split(" ", 1)
    refs[name] = text.split()
def edits(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev, d[j] = d[j], cur
    return d[len(b)]
def cpu(name):
    runs = [l.split() for l in open(os.path.join(out, name)) if l.strip() and l[0].isdigit()]
    return min(float(u) + float(s) for u, s in runs)
base = {m: cpu("base-%s.time" % m) for m in ("novad", "vad")}
print("model loads (CPU s of a process on 0.5 s): no VAD %.2f, VAD %.2f" % (base["novad"], base["vad"]))
print(open(os.path.join(out, "whisper.md")).read() if os.path.exists(os.path.join(out, "whisper.md")) else "(no build/bench_vad_whisper)")
print("| set | mode | files | audio s | decoded s | recognition wall s (proc_s) | of it VAD s | CPU s (process - loads) | WER |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for s in ("clean", "floor"):
    for mode in ("novad", "vad"):
        rows = [json.loads(l) for l in open(os.path.join(out, "%s-%s.jsonl" % (s, mode)))]
        assert len(rows) == 8
        c = cpu("%s-%s.time" % (s, mode)) - base[mode]
        e = n = 0
        for r in rows:
            name = os.path.basename(r["file"])[:-4]
            e += edits(refs[name], r["transcript"].split())
            n += len(refs[name])
        print("| %s | %s | %d | %.1f | %.1f | %.2f | %.3f | %.2f | %.3f |" % (
            s, "VAD" if mode == "vad" else "no VAD", len(rows), sum(r["audio_s"] for r in rows),
            sum(r["speech_s"] for r in rows), sum(r["proc_s"] for r in rows),
            sum(r.get("vad_s", 0) for r in rows), c, e / n))
EOF
