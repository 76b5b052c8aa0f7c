#!/bin/sh
# cli_vl.sh — the CLI contract of `frugal generate` with images on the HF fixtures
# (tests/fixtures/qwen25vl-tiny, references in tests/fixtures/ref/qwen25vl-tiny/ref.json from HF
# transformers 5.17):
#   - --pixel-values HF's processor output --grid-thw T,H,W (one image; two images of different
#     sizes split by two --grid-thw): prompt_ids (pads expanded) and the greedy ids equal HF's,
#     image_grid_thw, image_tokens and image_tokens_kept as HF's grid says, --last-logits within
#     1e-4 relative L2 of HF's, --dump-pixel-values writes the rows it was given,
#     --dump-image-features the merger's output within 1e-4 of HF's image_embeds;
#   - --image files decoded and preprocessed by us (the JPEG of one_image, the PNG of the region
#     image): the same prompt ids, grids, greedy ids and last logits;
#   - hostile images (corrupt bytes, a truncated PNG, an empty file, a PNG header claiming
#     20000 x 20000 pixels, text named .png) are refused with invalid_argument / too_large /
#     unsupported (a format we do not take);
#   - pruning: --keep-ratio and --max-image-tokens keep the counts asked for and the pruned pads
#     leave the prompt (which tokens, at which positions: tests/test_vl.c); --keep-ratio 1 is
#     exactly no pruning;
#   - usage errors exit 2; refusals exit 1 and name their status (a text model, rows that do not
#     match the grids, a budget below one token per image, a missing file).
# A missing fixture is a failure. Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FX=${FRUGAL_FIXTURES:-tests/fixtures}
M=$FX/qwen25vl-tiny
REF=$FX/ref/qwen25vl-tiny
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-vl.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

for f in "$BIN" "$M/config.json" "$REF/ref.json" "$REF/one_image-pixel_values.npy" \
         "$REF/two_images-pixel_values.npy" "$REF/one_image-image_embeds.npy"; do
    [ -e "$f" ] || { bad "missing $f"; echo "$pass passed, $fail failed"; exit 1; }
done

# check CASE OUT.json [DUMPED_PIXELS] [DUMPED_FEATURES]: the JSON against ref.json's case
check() {
    python3 - "$REF" "$@" <<'PY'
import json, math, struct, sys
ref_dir, case, out = sys.argv[1], sys.argv[2], sys.argv[3]
def npy(path):
    b = open(path, 'rb').read()
    assert b[:6] == b'\x93NUMPY', path
    hl = struct.unpack('<H', b[8:10])[0] if b[6] == 1 else struct.unpack('<I', b[8:12])[0]
    off = (10 if b[6] == 1 else 12) + hl
    head = b[off - hl:off].decode()
    assert "'<f4'" in head and "'fortran_order': False" in head, head
    return list(struct.unpack('<%df' % ((len(b) - off) // 4), b[off:]))
def rel(a, b):
    assert len(a) == len(b), (len(a), len(b))
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(y * y for y in b))
c = next(c for c in json.load(open(ref_dir + '/ref.json'))['cases'] if c['name'] == case)
j = json.load(open(out))
errs = []
if j['prompt_ids'] != c['input_ids']: errs.append('prompt_ids differ')
if j['ids'] != c['greedy_ids']: errs.append('ids %s != %s' % (j['ids'], c['greedy_ids']))
if j['image_grid_thw'] != c['image_grid_thw']: errs.append('grid %s' % j['image_grid_thw'])
if j['image_tokens'] != c['n_image_tokens'] or j['image_tokens_kept'] != c['n_image_tokens']:
    errs.append('image tokens %s/%s' % (j['image_tokens'], j['image_tokens_kept']))
if not isinstance(j.get('text'), str): errs.append('no text')
if 'last_logits' in j:
    d = rel(j['last_logits'], npy(ref_dir + '/' + c['last_logits']))
    if not d <= 1e-4: errs.append('last_logits rel L2 %g' % d)
if len(sys.argv) > 4 and sys.argv[4]:
    if npy(sys.argv[4]) != npy(ref_dir + '/' + c['pixel_values']): errs.append('dumped pixels')
if len(sys.argv) > 5:
    d = rel(npy(sys.argv[5]), npy(ref_dir + '/' + c['image_embeds']))
    if not d <= 1e-4: errs.append('features rel L2 %g' % d)
print('; '.join(errs) if errs else 'ok')
sys.exit(1 if errs else 0)
PY
}

PV0=$REF/one_image-pixel_values.npy
gen() { "$BIN" generate --model "$M" --max-tokens 12 --temperature 0 --ignore-eos --json "$@"; }

# ---- one image from HF's pixel values: everything the contract prints, the dumps ----
if gen --pixel-values "$REF/one_image-pixel_values.npy" --grid-thw 1,6,8 \
       --prompt "Describe this image." --last-logits --dump-pixel-values "$TMP/px.npy" \
       --dump-image-features "$TMP/feat.npy" >"$TMP/one.json" 2>"$TMP/one.err" &&
   r=$(check one_image "$TMP/one.json" "$TMP/px.npy" "$TMP/feat.npy"); then
    ok "one image: prompt ids, greedy ids, grid, token counts, last logits, dumps equal HF's"
else bad "one image: ${r:-$(tail -c 300 "$TMP/one.err")}"; fi

# ---- two images of different sizes in one prompt ----
if gen --pixel-values "$REF/two_images-pixel_values.npy" --grid-thw 1,6,4 --grid-thw 1,8,4 \
       --prompt "Compare the two pictures." --last-logits >"$TMP/two.json" 2>"$TMP/two.err" &&
   r=$(check two_images "$TMP/two.json"); then
    ok "two images: prompt ids, greedy ids, grids, token counts, last logits equal HF's"
else bad "two images: ${r:-$(tail -c 300 "$TMP/two.err")}"; fi

# ---- image files through our decoder and preprocessing ----
if gen --image "$FX/vl-images/odd-123x77.jpg" --prompt "Describe this image." --last-logits \
       >"$TMP/f1.json" 2>"$TMP/f1.err" && r=$(check one_image "$TMP/f1.json"); then
    ok "--image JPEG: prompt ids, greedy ids, grid, token counts, last logits equal HF's"
else bad "--image JPEG: ${r:-$(tail -c 300 "$TMP/f1.err")}"; fi
if gen --image "$FX/vl-images/regions-112x56.png" --prompt "What is in the left half of the picture?" \
       --last-logits >"$TMP/f2.json" 2>"$TMP/f2.err" && r=$(check regions_left "$TMP/f2.json"); then
    ok "--image PNG: prompt ids, greedy ids, grid, token counts, last logits equal HF's"
else bad "--image PNG: ${r:-$(tail -c 300 "$TMP/f2.err")}"; fi

# ---- hostile images ----
python3 - "$TMP" "$FX/vl-images/wide-200x120.png" <<'PY'
import struct, sys, zlib
tmp, png = sys.argv[1], open(sys.argv[2], 'rb').read()
open(tmp + '/corrupt.png', 'wb').write(png[:8] + bytes((i * 37) & 255 for i in range(400)))
open(tmp + '/truncated.png', 'wb').write(png[:len(png) // 3])
open(tmp + '/empty.png', 'wb').write(b'')
open(tmp + '/text.png', 'wb').write(b'this is not an image\n' * 10)
ihdr = struct.pack('>IIBBBBB', 20000, 20000, 8, 2, 0, 0, 0)
chunk = struct.pack('>I', 13) + b'IHDR' + ihdr + struct.pack('>I', zlib.crc32(b'IHDR' + ihdr))
open(tmp + '/huge.png', 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk + b'\x00' * 64)
PY
for h in corrupt truncated empty; do
    gen --image "$TMP/$h.png" --prompt x >"$TMP/h.out" 2>"$TMP/h.err"; rc=$?
    if [ "$rc" -eq 1 ] && grep -q "(invalid_argument)\$" "$TMP/h.err"; then ok "hostile image ($h): invalid_argument"
    else bad "hostile image ($h): exit $rc: $(cat "$TMP/h.err")"; fi
done
gen --image "$TMP/text.png" --prompt x >"$TMP/h.out" 2>"$TMP/h.err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "(unsupported)\$" "$TMP/h.err"; then ok "text named .png: unsupported"
else bad "text named .png: exit $rc: $(cat "$TMP/h.err")"; fi
gen --image "$TMP/huge.png" --prompt x >"$TMP/h.out" 2>"$TMP/h.err"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "(too_large)\$" "$TMP/h.err"; then ok "hostile image (20000 x 20000 header): too_large"
else bad "hostile image (huge): exit $rc: $(cat "$TMP/h.err")"; fi
gen --image "$TMP/missing.png" --prompt x >"$TMP/h.out" 2>"$TMP/h.err"; rc=$?
[ "$rc" -eq 1 ] && ok "a missing image file: exit 1" || bad "missing image: exit $rc"

# ---- pruning: the counts asked for; the pruned pads leave the prompt; ratio 1 changes nothing ----
prune() { # NAME WANT_KEPT WANT_PROMPT_LEN ARGS...
    name=$1; k=$2; len=$3; shift 3
    if gen --pixel-values "$REF/one_image-pixel_values.npy" --grid-thw 1,6,8 \
           --prompt "Describe this image." "$@" >"$TMP/p.json" 2>"$TMP/p.err" &&
       r=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["image_tokens"], j["image_tokens_kept"], len(j["prompt_ids"]), j["prompt_ids"].count(518))' "$TMP/p.json") &&
       [ "$r" = "12 $k $len $k" ]; then ok "pruning $name: 12 image tokens, $k kept, a prompt of $len"
    else bad "pruning $name: got '${r:-}' $(tail -c 300 "$TMP/p.err")"; fi
}
prune "--keep-ratio 0.5" 6 60 --keep-ratio 0.5
prune "--max-image-tokens 4" 4 58 --max-image-tokens 4
prune "--keep-ratio 0.5 --max-image-tokens 5 (the tighter wins)" 5 59 --keep-ratio 0.5 --max-image-tokens 5
gen --pixel-values "$PV0" --grid-thw 1,6,8 --prompt "Describe this image." --last-logits \
    --keep-ratio 1 >"$TMP/k1.json" 2>/dev/null
if python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a["ids"] == b["ids"] and a["last_logits"] == b["last_logits"] else 1)' "$TMP/k1.json" "$TMP/one.json"; then
    ok "--keep-ratio 1: the ids and last logits of no pruning"
else bad "--keep-ratio 1 differs from no pruning"; fi

# ---- usage errors: exit 2 ----
usage() {
    name=$1; shift
    "$BIN" generate --model "$M" "$@" >"$TMP/u.out" 2>"$TMP/u.err"; rc=$?
    if [ "$rc" -eq 2 ]; then ok "usage: $name"; else bad "usage: $name: exit $rc $(cat "$TMP/u.err")"; fi
}
PV=$REF/one_image-pixel_values.npy
usage "--grid-thw needs three values" --pixel-values "$PV" --grid-thw 1,6 --prompt x
usage "--pixel-values without --grid-thw" --pixel-values "$PV" --prompt x
usage "--grid-thw without --pixel-values" --grid-thw 1,6,8 --prompt x
usage "images with --messages" --pixel-values "$PV" --grid-thw 1,6,8 --messages "$TMP/none.json"
usage "--image and --pixel-values together" --image "$FX/vl-images/wide-200x120.png" \
    --pixel-values "$PV" --grid-thw 1,6,8 --prompt x
usage "--last-logits without images" --prompt x --last-logits
usage "--keep-ratio 0" --pixel-values "$PV" --grid-thw 1,6,8 --prompt x --keep-ratio 0

# ---- refusals: exit 1 with the status ----
refused() {
    name=$1; status=$2; shift 2
    "$BIN" generate --max-tokens 2 "$@" >"$TMP/r.out" 2>"$TMP/r.err"; rc=$?
    if [ "$rc" -eq 1 ] && grep -q "($status)\$" "$TMP/r.err"; then ok "refused ($status): $name"
    else bad "$name: exit $rc: $(cat "$TMP/r.err")"; fi
}
refused "a text-only model" unsupported --model "$FX/qwen2-tiny" --pixel-values "$PV" \
    --grid-thw 1,6,8 --prompt x
refused "a budget below one token per image" invalid_argument --model "$M" \
    --pixel-values "$REF/two_images-pixel_values.npy" --grid-thw 1,6,4 --grid-thw 1,8,4 \
    --prompt x --max-image-tokens 1
refused "a grid not divisible by the merge size" invalid_argument --model "$M" \
    --pixel-values "$PV" --grid-thw 1,3,16 --prompt x
# rows that do not match the grids, a missing pixel-values file: the CLI's own checks
"$BIN" generate --model "$M" --pixel-values "$PV" --grid-thw 1,6,6 --prompt x >/dev/null 2>"$TMP/e"
rc=$?; [ "$rc" -eq 1 ] && grep -q "rows" "$TMP/e" && ok "rows that the grids do not take: exit 1" ||
    bad "rows vs grids: exit $rc $(cat "$TMP/e")"
"$BIN" generate --model "$M" --pixel-values "$TMP/nope.npy" --grid-thw 1,6,8 --prompt x \
    >/dev/null 2>"$TMP/e"
rc=$?; [ "$rc" -eq 1 ] && ok "a missing pixel-values file: exit 1" || bad "missing npy: exit $rc"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
