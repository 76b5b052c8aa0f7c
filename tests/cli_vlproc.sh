#!/bin/sh
# cli_vlproc.sh — `frugal generate --image ... --dump-pixel-values` on the image files of the HF
# fixture cases writes exactly HF's pixel_values: byte-identical .npy files (our writer's header is
# numpy's, and every float is equal). Covers the whole decode path of the model: an RGBA PNG
# (alpha dropped, as PIL's convert("RGB")), a JPEG with EXIF Orientation 6 (rotated upright, as
# exif_transpose), a plain JPEG, an RGB PNG, a WebP (qwen2vl-tiny), with each model folder's
# processor configuration. A missing fixture is a failure. Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
FX=${FRUGAL_FIXTURES:-tests/fixtures}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-vlproc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# case model images...
check() {
    name=$1; model=$2; shift 2
    ref=$FX/ref/$model/$name-pixel_values.npy
    [ -f "$ref" ] || { bad "$model $name: missing $ref"; return; }
    args=""
    for im in "$@"; do
        [ -f "$FX/$im" ] || { bad "$model $name: missing $FX/$im"; return; }
        args="$args --image $FX/$im"
    done
    # shellcheck disable=SC2086
    if ! "$BIN" generate --model "$FX/$model" $args --prompt "Describe." --max-tokens 1 \
        --temperature 0 --json --dump-pixel-values "$TMP/$name.npy" >"$TMP/$name.json" 2>"$TMP/$name.err"; then
        bad "$model $name: generate failed: $(tail -n 1 "$TMP/$name.err")"; return
    fi
    if cmp -s "$TMP/$name.npy" "$ref"; then ok "$model $name: pixel_values byte-identical to HF's ($*)"
    else bad "$model $name: pixel_values differ from $ref"; fi
}
check two_images qwen25vl-tiny vl-images/rgba-64x96.png vl-images/exif6-100x60.jpg
check one_image qwen25vl-tiny vl-images/odd-123x77.jpg
check regions_left qwen25vl-tiny vl-images/regions-112x56.png
check one_image qwen2vl-tiny vl-images/square-90x90.webp
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
