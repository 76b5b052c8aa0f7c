#!/bin/sh
# cli_serve_vl.sh — `frugal serve` with a vision-language model (the tiny random Qwen2.5-VL
# fixture) on loopback: a chat with a data-URL image returns HF transformers' greedy ids
# (tests/fixtures/ref/qwen25vl-tiny/ref.json, case one_image, temperature 0); usage carries the
# image tokens before and after pruning; the ledger row has the stage "vision" and the modality
# image; a second identical request is an encoder-cache hit (the /metrics counter moves, the ids
# stay); the "image" part type and several images per request; hostile images through every
# door (corrupt PNG, huge declared dimensions, wrong declared type, a remote URL when remote
# images are off, too many images, bad pruning fields) get their status and code and the server
# keeps serving text; /v1/assist routes a photo to the VLM with pruning, a document to OCR or,
# when the question needs the picture, to the VLM at the larger budget, and keeps the old route
# without a VLM; with remote images allowed, an http URL is fetched (a local python3 HTTP
# server) and gives the same ids. A missing fixture fails. Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
MODEL=tests/fixtures/qwen25vl-tiny
REF=tests/fixtures/ref/qwen25vl-tiny/ref.json
IMGS=tests/fixtures/vl-images
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-servevl.XXXXXX")
pass=0; fail=0; PID=; PORT=; HPID=
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
check() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1 (got '$2', want '$3')"; fi; }
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null
    [ -n "$HPID" ] && kill "$HPID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

. tests/serve/start.sh # serve_start
start_server() {
    name=$1; shift
    serve_start "$TMP/$name.out" "$TMP/$name.err" --model "$MODEL" --port 0 "$@"
    URL=http://127.0.0.1:$PORT
    if [ -z "$PORT" ]; then bad "$name: server started"; cat "$TMP/$name.err"; PID=; return 1; fi
    return 0
}
stop_server() {
    [ -n "$PID" ] || return
    kill -TERM "$PID"; wait "$PID"; rc=$?; PID=
    check "$1: SIGTERM exits 0" "$rc" 0
}
# post BODYFILE: the HTTP status (body in $TMP/body)
post() { curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/chat/completions" \
             -H Content-Type:application/json --data-binary @"$1"; }
# num KEY: the first number after "KEY": in the body; ids: the returned token ids; code, param
num() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$TMP/body" | head -n 1; }
ids() { grep -o '"token_ids":\[[^]]*\]' "$TMP/body" | sed 's/.*://'; }
ecode() { sed -n 's/.*"code":"\([^"]*\)".*/\1/p' "$TMP/body"; }
eparam() { sed -n 's/.*"param":"\([^"]*\)".*/\1/p' "$TMP/body"; }
metric() { curl -s "$URL/metrics" | sed -n "s/^$1 //p"; }
# body NAME EXTRA PART...: writes $TMP/NAME.json, a user message with the image parts then the
# one_image prompt, greedy, 12 tokens, ids returned; EXTRA (",\"key\":value..." or "") is added
body() {
    name=$1; extra=$2; shift 2; parts=
    for p in "$@"; do parts="$parts$p,"; done
    printf '{"messages":[{"role":"user","content":[%s{"type":"text","text":"Describe this image."}]}],"max_tokens":12,"temperature":0,"ignore_eos":true,"return_token_ids":true%s}' \
        "$parts" "$extra" >"$TMP/$name.json"
}
# durl FILE TYPE: a data URL image_url part
durl() { printf '{"type":"image_url","image_url":{"url":"data:%s;base64,%s"}}' "$2" "$(base64 -w0 "$1")"; }

[ -x "$BIN" ] || { bad "binary $BIN missing"; echo "$pass passed, $fail failed"; exit 1; }
for f in "$REF" "$MODEL/config.json" "$IMGS/odd-123x77.jpg" "$IMGS/rgba-64x96.png"; do
    [ -f "$f" ] || bad "fixture $f missing"
done
WANT=$(python3 -c "import json; c=[c for c in json.load(open('$REF'))['cases'] if c['name']=='one_image'][0]; print(str(c['greedy_ids']).replace(' ', '')); print(c['n_image_tokens']); print(len(c['input_ids']))" 2>/dev/null)
WANT_IDS=$(echo "$WANT" | sed -n 1p); WANT_IMG=$(echo "$WANT" | sed -n 2p); WANT_N=$(echo "$WANT" | sed -n 3p)
[ -n "$WANT_IDS" ] || bad "ref.json has the one_image case"
printf '{"vision": {"max_images": 2}}\n' >"$TMP/conf.json"

if start_server vl --ledger "$TMP/ledger.db" --config "$TMP/conf.json"; then
    JPG=$(durl "$IMGS/odd-123x77.jpg" image/jpeg)
    body one "" "$JPG"
    check "image chat 200" "$(post "$TMP/one.json")" 200
    check "greedy ids = HF's (one_image)" "$(ids)" "$WANT_IDS"
    check "usage.prompt_tokens = HF's input ids" "$(num prompt_tokens)" "$WANT_N"
    check "usage.prompt_tokens_details.image_tokens" \
        "$(num image_tokens)" "$WANT_IMG"
    check "usage.image_tokens_kept (no pruning)" "$(num image_tokens_kept)" "$WANT_IMG"
    check "encoder cache: one miss" "$(metric frugal_vision_cache_misses_total)" 1
    check "encoder cache: no hit yet" "$(metric frugal_vision_cache_hits_total)" 0
    check "second identical request 200" "$(post "$TMP/one.json")" 200
    check "second request: same ids" "$(ids)" "$WANT_IDS"
    check "second request: an encoder-cache hit" "$(metric frugal_vision_cache_hits_total)" 1
    check "encoder cache holds one image" "$(metric frugal_vision_cache_entries)" 1
    # the "image" part type takes the same data URL
    body imgpart "" "$(printf '{"type":"image","image":"data:image/jpeg;base64,%s"}' "$(base64 -w0 "$IMGS/odd-123x77.jpg")")"
    check "image part type 200" "$(post "$TMP/imgpart.json")" 200
    check "image part type: same ids" "$(ids)" "$WANT_IDS"
    # pruning per request: half the tokens kept, the prompt shorter by the dropped ones
    body half ',"keep_ratio":0.5' "$JPG"
    check "keep_ratio 0.5 200" "$(post "$TMP/half.json")" 200
    check "keep_ratio 0.5: image tokens before" "$(num image_tokens)" "$WANT_IMG"
    check "keep_ratio 0.5: kept" "$(num image_tokens_kept)" $((WANT_IMG / 2))
    check "keep_ratio 0.5: prompt tokens" "$(num prompt_tokens)" $((WANT_N - WANT_IMG / 2))
    body budget ',"max_image_tokens":3' "$JPG"
    check "max_image_tokens 3: kept" "$([ "$(post "$TMP/budget.json")" = 200 ] && num image_tokens_kept)" 3
    body small ',"mm_processor_kwargs":{"max_pixels":3136}' "$JPG"
    check "mm_processor_kwargs max_pixels: fewer image tokens" \
        "$([ "$(post "$TMP/small.json")" = 200 ] && [ "$(num image_tokens)" -lt "$WANT_IMG" ] && echo yes)" yes
    # two images in one request
    body two "" "$(durl "$IMGS/rgba-64x96.png" image/png)" "$JPG"
    check "two images 200" "$(post "$TMP/two.json")" 200
    check "two images: tokens of both" "$([ "$(num image_tokens)" -gt "$WANT_IMG" ] && echo yes)" yes
    # a document page: its plain background units are dropped before the tower (on by default),
    # and a cache hit gives back the same kept set
    DOC=tests/fixtures/ocr_lang/en.png
    body doc ',"mm_processor_kwargs":{"max_pixels":200704}' "$(durl "$DOC" image/png)"
    check "document page 200" "$(post "$TMP/doc.json")" 200
    DOC_ALL=$(num image_tokens); DOC_KEPT=$(num image_tokens_kept); DOC_IDS=$(ids)
    check "document: background units dropped before the tower ($DOC_KEPT of $DOC_ALL kept)" \
        "$([ -n "$DOC_KEPT" ] && [ "$DOC_KEPT" -gt 0 ] && [ "$DOC_KEPT" -lt "$DOC_ALL" ] && echo yes)" yes
    check "document again 200 (a cache hit)" "$(post "$TMP/doc.json")" 200
    check "document cache hit: same kept count" "$(num image_tokens_kept)" "$DOC_KEPT"
    check "document cache hit: same ids" "$(ids)" "$DOC_IDS"
    check "photo: nothing dropped (odd-123x77.jpg, no pruning)" \
        "$(post "$TMP/one.json" >/dev/null; num image_tokens_kept)" "$WANT_IMG"
    # the ledger row: the vision stage and the image modality
    sleep 0.3
    row=$(sqlite3 "$TMP/ledger.db" "select modality || '|' || stages from requests where id = 1" 2>/dev/null)
    case "$row" in *image*"|"*vision*) ok "ledger row: modality image, stage vision ($row)" ;;
                   *) bad "ledger row: modality image, stage vision (got '$row')" ;; esac
    vj=$(sqlite3 "$TMP/ledger.db" "select count(*) from request_stages where request = 1 and stage = 'vision' and device = 'cpu' and seconds > 0" 2>/dev/null)
    check "ledger: a metered vision stage on the cpu" "$vj" 1

    # hostile images through every door; the server keeps serving
    printf '\211PNG\r\n\032\nthis is not a png at all' >"$TMP/corrupt.png"
    body corrupt "" "$(durl "$TMP/corrupt.png" image/png)"
    check "corrupt PNG 400" "$(post "$TMP/corrupt.json")" 400
    check "corrupt PNG code" "$(ecode)" invalid_image
    python3 - "$TMP/huge.png" <<'EOF'
import struct, sys, zlib
ihdr = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                              chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
EOF
    body huge "" "$(durl "$TMP/huge.png" image/png)"
    check "huge declared dimensions 413" "$(post "$TMP/huge.json")" 413
    check "huge dimensions code" "$(ecode)" image_too_large
    body wrongtype "" "$(durl "$IMGS/odd-123x77.jpg" image/png)"
    check "wrong declared type 415" "$(post "$TMP/wrongtype.json")" 415
    check "wrong declared type code" "$(ecode)" unsupported_media_type
    body remote "" '{"type":"image_url","image_url":{"url":"http://127.0.0.1:9/x.jpg"}}'
    check "remote URL refused 400" "$(post "$TMP/remote.json")" 400
    check "remote URL refused code" "$(ecode)" remote_image_refused
    body many "" "$JPG" "$JPG" "$JPG"
    check "too many images 400" "$(post "$TMP/many.json")" 400
    check "too many images code" "$(ecode)" too_many_images
    check "too many images names the part" "$(eparam)" "messages[0].content[2]"
    printf '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,@@@"}}]}]}' >"$TMP/b64.json"
    check "bad base64 400" "$(post "$TMP/b64.json")" 400
    check "bad base64 code" "$(ecode)" invalid_base64
    body badratio ',"keep_ratio":0' "$JPG"
    check "keep_ratio 0 refused 400" "$(post "$TMP/badratio.json")" 400
    body badpix ',"mm_processor_kwargs":{"max_pixels":10}' "$JPG"
    check "max_pixels below the factor refused 400" "$(post "$TMP/badpix.json")" 400
    check "health after the hostile images" "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" 200
    printf '{"messages":[{"role":"user","content":"Where is my card?"}],"max_tokens":4,"temperature":0}' >"$TMP/text.json"
    check "a text request still works" "$(post "$TMP/text.json")" 200
    check "text request: no image usage" "$(grep -c image_tokens "$TMP/body")" 0
    check "after it all: the image request still = HF" \
        "$([ "$(post "$TMP/one.json")" = 200 ] && ids)" "$WANT_IDS"
    # /v1/assist routes pictures: a photo to the VLM with pruning, a document to OCR unless the
    # question needs the picture (then the VLM at the larger budget); the answer is the VLM's
    "$BIN" gen-docs --out "$TMP/docs" --n 1 --lang eng >/dev/null 2>&1
    DOC=$(ls "$TMP"/docs/*.jpg 2>/dev/null | head -n 1)
    [ -n "$DOC" ] || bad "gen-docs made a document"
    assist() { # TEXT IMAGEFILE: status, body in $TMP/body
        printf '{"text":"%s","image":"data:image/jpeg;base64,%s"}' "$1" "$(base64 -w0 "$2")" >"$TMP/assist.json"
        curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/assist" -H Content-Type:application/json \
            --data-binary @"$TMP/assist.json"
    }
    ran_stages() { grep -o '"stages_run":\[[^]]*\]' "$TMP/body" | sed 's/.*://'; }
    check "assist photo 200" "$(assist "What is in this picture?" "$IMGS/odd-123x77.jpg")" 200
    check "assist photo: stages" "$(ran_stages)" '["decode_image","density","vision","nlu"]'
    check "assist photo: the answer is the VLM's" "$(sed -n 's/.*"response_source":"\([^"]*\)".*/\1/p' "$TMP/body")" vision
    check "assist photo: pruned (keep 0.5)" "$(num image_tokens_kept)/$(num image_tokens)" "$((WANT_IMG / 2))/$WANT_IMG"
    check "assist document, an OCR question 200" "$(assist "What is the total amount due?" "$DOC")" 200
    case "$(ran_stages)" in *'"ocr"'*) ok "assist document: OCR answers" ;;
                            *) bad "assist document: OCR answers (got $(ran_stages))" ;; esac
    check "assist document: no vision" "$(ran_stages | grep -c vision)" 0
    check "assist document, a question about the picture 200" "$(assist "Does the signature look genuine?" "$DOC")" 200
    case "$(ran_stages)" in *'"vision"'*) ok "assist document + visual question: the VLM" ;;
                            *) bad "assist document + visual question: the VLM (got $(ran_stages))" ;; esac
    check "assist document + visual question: the larger budget (all tokens kept)" \
        "$([ "$(num image_tokens_kept)" = "$(num image_tokens)" ] && echo yes)" yes
    stop_server vl
fi

# without a VLM (the text model) /v1/assist keeps the old route and its reason
MODEL=tests/fixtures/qwen2-tiny
if start_server text --ledger ""; then
    check "assist photo without a VLM 200" "$(assist "What is in this picture?" "$IMGS/odd-123x77.jpg")" 200
    check "assist photo without a VLM: no vision stage" "$(ran_stages | grep -c vision)" 0
    grep -q 'no vision-language model is served' "$TMP/body" && ok "assist photo without a VLM: the reason" \
        || bad "assist photo without a VLM: the reason ($(cat "$TMP/body" | head -c 400))"
    stop_server text
fi
MODEL=tests/fixtures/qwen25vl-tiny

# remote images allowed: fetched from a local HTTP server, the same answer; background
# dropping off: the document keeps every unit
if command -v python3 >/dev/null 2>&1; then
    HP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    (cd "$IMGS" && exec python3 -m http.server "$HP" --bind 127.0.0.1) >"$TMP/http.log" 2>&1 &
    HPID=$!
    printf '{"vision": {"allow_remote_images": true, "remote_max_bytes": 100000, "background_drop": false}}\n' >"$TMP/remote.conf"
    if start_server remote --ledger "" --config "$TMP/remote.conf"; then
        i=0; while [ $i -lt 50 ] && ! curl -s -o /dev/null "http://127.0.0.1:$HP/"; do sleep 0.1; i=$((i + 1)); done
        body rurl "" "{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://127.0.0.1:$HP/odd-123x77.jpg\"}}"
        check "remote URL fetched 200" "$(post "$TMP/rurl.json")" 200
        check "remote URL: HF's ids" "$(ids)" "$WANT_IDS"
        body r404 "" "{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://127.0.0.1:$HP/none.jpg\"}}"
        check "remote URL 404 400" "$(post "$TMP/r404.json")" 400
        check "remote URL 404 code" "$(ecode)" remote_image_failed
        check "background_drop false: document 200" "$(post "$TMP/doc.json")" 200
        check "background_drop false: every document unit kept" "$(num image_tokens_kept)" "$DOC_ALL"
        stop_server remote
    fi
    kill "$HPID" 2>/dev/null; wait "$HPID" 2>/dev/null; HPID=
else
    bad "python3 is not installed"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
