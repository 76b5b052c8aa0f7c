#!/bin/sh
# make-seeds.sh — (re)write the committed seed corpora tests/fuzz/corpus/<harness>/ from the
# release build (build/frugal, build/libfrugal.a). Run from the repository root after `make`:
#   sh tests/fuzz/make-seeds.sh
# Each file is small (the whole corpus stays under 400 KB); the fuzzers start from them. Files
# named regress-* are inputs a fuzzer found (kept as they are: this script leaves them).
set -eu
B=${BUILD:-build}
C=tests/fuzz/corpus
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -d "$C" ] && find "$C" -type f ! -name "regress-*" -delete
for h in assist audio chat gguf gguf_spec exif http_head image mask meter_config multipart nlu npy onnx ppocr request safetensors tokenizer traceparent vl_sample; do
    mkdir -p "$C/$h"
done
LIBS=$(make -s --no-print-directory print-ldlibs)
cc -std=c11 -D_GNU_SOURCE -O1 -Isrc -Itests -I"$B/gen" tests/fuzz/seeds.c "$B/libfrugal.a" -o "$T/seeds" $LIBS
"$T/seeds" audio "$C/audio"
"$T/seeds" image "$C/image"
"$T/seeds" npy "$C/npy"
"$T/seeds" mmproj "$C/gguf"
"$T/seeds" onnx "$C/onnx"

# assist: a text request, an image + ticket + history request, an {"data","format"} audio request
printf '{"text":"I still have not received my card, it was sent on 3 March","top_k":3}' > "$C/assist/text"
printf '{"text":"check the amount on this invoice","image":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==","ticket":{"id":"T-1","status":"open"},"history":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}],"budget_tokens":256}' > "$C/assist/image"
printf '{"audio":{"data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","format":"wav"}}' > "$C/assist/audio"

# chat: the two shipped templates and two small constructs
cp tests/fixtures/qwen2-tiny/chat_template.jinja "$C/chat/qwen25"
python3 -c "import json; print(json.load(open('tests/fixtures/llama-tiny/tokenizer_config.json'))['chat_template'], end='')" > "$C/chat/llama3"
printf '{%% set ns = namespace(a=0) %%}{%% for m in messages if m.role != "tool" %%}{%% set ns.a = ns.a + 1 %%}{{ loop.index }}{{ m.content | trim | tojson(indent=2) }}{%% else %%}x{%% endfor %%}{{ ns.a }}' > "$C/chat/loops"
printf '{%% macro f(x, y=2) -%%}{{ x ~ y }}{%%- endmacro %%}{{ f(1) }}{{ messages[::-1][0].content[1:5] | upper }}{%% raw %%}{{ r }}{%% endraw %%}{# c #}' > "$C/chat/macro"

# gguf and safetensors: tiny random models
"$B/frugal" mkmodel --out "$C/gguf/q-f32.gguf" --arch qwen2 --hidden 8 --layers 1 --heads 2 --kv-heads 1 --ffn 8 --vocab 260 >/dev/null
"$B/frugal" mkmodel --out "$C/gguf/l-q8.gguf" --arch llama --hidden 32 --layers 1 --heads 2 --kv-heads 2 --ffn 32 --vocab 260 --gguf-type q8_0 >/dev/null
# gguf_spec: the same two models (the checker reads any GGUF) and a tied q4_0 one
cp "$C/gguf/q-f32.gguf" "$C/gguf/l-q8.gguf" "$C/gguf_spec/"
"$B/frugal" mkmodel --out "$C/gguf_spec/l-q4.gguf" --arch llama --hidden 32 --layers 1 --heads 2 --kv-heads 2 --ffn 32 --vocab 260 --gguf-type q4_0 --tied >/dev/null
"$B/frugal" mkmodel --out "$T/st" --arch qwen2 --hidden 8 --layers 1 --heads 2 --kv-heads 1 --ffn 8 --vocab 260 --dtype bf16 >/dev/null
cp "$T/st/model.safetensors" "$T/st/config.json" "$C/safetensors/"
# the Qwen2.5-VL (nested) and Qwen2-VL (flat) configs
cp tests/fixtures/qwen25vl-tiny/config.json "$C/safetensors/qwen25vl-config.json"
cp tests/fixtures/qwen2vl-tiny/config.json "$C/safetensors/qwen2vl-config.json"
cp tests/fixtures/llama-tiny/config.json "$C/safetensors/llama-config.json"
head -c 3000 tests/fixtures/llama-tiny/model-00003-of-00003.safetensors > "$C/safetensors/shard-head"

# mask: raw text (odd first byte) and writer programs (even first byte)
printf '\001card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, ref 5500-0000-0000-0004.' > "$C/mask/raw"
printf '\001\357\274\224\357\274\221\357\274\221\357\274\221\342\200\213 1111\302\2401111.1111 gb82west12345698765432 2024-03-15 $1,234.56' > "$C/mask/unicode"
printf '\000\000\007\010\011\012\013\014\015\016\017\020\021\022\023\024\025\026\001\005\006\007\010\011\012\013\014\015\016\017\020\021\022\023\024\025\026\027\030\031\032\033\034\035' > "$C/mask/writer"

# meter config
cp docs/metering.example.json "$C/meter_config/example"
printf '[cost]\npue = 1.2\nhw_usd_per_hour = 2.5\n[slo]\nfast = 0.5\n[ab]\na = 1\nb = 3 | x=y\n' > "$C/meter_config/small"
printf '{"cost": {"pue": 1.2, "hw_usd_per_hour": 2.5}, "slo": {"fast": 0.5},\n "ab": {"a": 1, "b": {"weight": 3, "options": "x=y"}}}\n' > "$C/meter_config/small-json"
printf '{"port": 0, "host": "::1", "tiers": {"P0": {"weight": 4, "ttft_slo_ms": 100}},\n "limits": {"max_tokens": 64, "reserved_connections": {"control": 2}},\n "metering": {"ledger": {"path": ""}, "trace": {"batch": 8}}}\n' > "$C/meter_config/serve"
printf '{"cost": {"pue": 1.2,\n  "pue": 1.3}, "meter": {"nvml": "on"}, "x": [1, {"y": null}] }' > "$C/meter_config/bad-json"

# nlu: a tiny intent model (checksum skipped / enforced), slot-rich sentences, text
printf 'text,category\nwhere is my card,card_arrival\nmy card has not arrived,card_arrival\nI lost my card,lost_card\nstolen card,lost_card\n' > "$T/tiny.csv"
"$B/frugal" train-intent --data "$T/tiny.csv" --out "$T/tiny.bin" --val-frac 0 --bits 10 --char 2-3 \
    --min-df 1 --member hidden=0,epochs=2 --member hidden=4,epochs=2 --quiet >/dev/null
{ printf '\000'; cat "$T/tiny.bin"; } > "$C/nlu/model0"
{ printf '\001'; cat "$T/tiny.bin"; } > "$C/nlu/model1"
# a multi-label (format version 3) model: NLU++ fold 0, thresholds tuned on fold 1
"$B/frugal" train-intent --nlupp data/nlupp/banking --folds 0 --tune-folds 1 --bits 10 --char 0 \
    --min-df 3 --member hidden=4,epochs=2 --quiet --out "$T/multi.bin" >/dev/null
{ printf '\000'; cat "$T/multi.bin"; } > "$C/nlu/model3"
printf '\002did I pay 50 pounds to marisol quintanilla on Friday 7 January 2016? I spent on groceries in the last 3 hours, make it 4' > "$C/nlu/slots3"
printf '\002Please refund $1,200.50 on 15 March 2024 at 25 to 7 p.m., card 4111 1111 1111 1111, invoice INV-2024-00123 from Acme Ltd' > "$C/nlu/slots1"
printf '\002between 9 05 in the morning and half past 3 next Tuesday, 500\345\205\203 \344\270\213\345\215\2103\347\202\271\345\215\212 IBAN GB82 WEST 1234 5698 7654 32 since last week' > "$C/nlu/slots2"
printf '\003I still have not received my card \346\210\221\347\232\204\345\215\241' > "$C/nlu/text"

# request: chat and completion bodies, server configs, key files
printf '\000{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"x"}}]}],"max_tokens":5,"stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},"priority":"P0"}' > "$C/request/chat1"
printf '\000{"messages":[{"role":"assistant","content":null},{"role":"tool","content":"x"}],"temperature":0.5,"top_p":0.9,"seed":-1,"n":1,"logprobs":false,"tools":[],"response_format":{"type":"text"}}' > "$C/request/chat2"
printf '\001{"prompt":"Once upon a time","max_tokens":16,"stop":"\\n","echo":false,"best_of":1,"suffix":"","ignore_eos":true,"return_token_ids":true}' > "$C/request/cmpl1"
printf '\001{"prompt":["caf\\u00e9 \\ud83d\\ude00"],"max_completion_tokens":3}' > "$C/request/cmpl2"
{ printf '\002'; cat tests/serve/overload.json; } > "$C/request/cfg1"
{ printf '\002'; cat tests/serve/limits.json; } > "$C/request/cfg2"
printf '\003# keys\nsk-a P0\nsk-b P2 P1 # c\n' > "$C/request/keys1"
printf '\043sk-env:P2,sk-x' > "$C/request/keys2"

# tokenizer: text for both fixture tokenizers, ids, a small tokenizer.json, a GGUF-style vocabulary
printf '\000Hello world! I can'"'"'t find my card \342\200\224 2024-03-15' > "$C/tokenizer/t0"
printf '\001\346\210\221\347\232\204 \360\237\230\200 <|eot_id|>\r\n  x' > "$C/tokenizer/t1"
printf '\002\001\000\000\000\334\000\000\000\240\017\000\000' > "$C/tokenizer/ids"
printf '\003{"version":"1.0","added_tokens":[{"id":3,"content":"<s>","special":true}],"normalizer":{"type":"NFC"},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"<s>":3},"merges":["a b"]}}' > "$C/tokenizer/json"
printf '\004gpt2\n\001a\n\001b\n\001c\n\001ab\n\001abc\n\003<s>\n\na b\nab c\n' > "$C/tokenizer/vocab"
# SentencePiece shapes: a GGUF llama vocabulary, Unigram, Llama-2 BPE with byte fallback, Gemma
printf '\004llama\n\002<unk>\n\003<s>\n\003</s>\n\006<0x41>\n\006<0xE2>\n\001\342\226\201\n\001a\n\001b\n\001\342\226\201a\n\001ab\n\004<tab>\n' > "$C/tokenizer/vocab_llama"
printf '\004llama-nsp\n\002<unk>\n\003<s>\n\001a\n\001b\n\001ab\n\005x\n' > "$C/tokenizer/vocab_llama_nsp"
printf '\003{"added_tokens":[{"id":0,"content":"<unk>","special":true}],"normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"\342\226\201","prepend_scheme":"always","split":true},"decoder":{"type":"Metaspace","replacement":"\342\226\201","prepend_scheme":"always"},"model":{"type":"Unigram","unk_id":0,"byte_fallback":true,"vocab":[["<unk>",0],["<0x41>",0],["\342\226\201",-2],["a",-1.5],["\342\226\201ab",-3],["b",-2.5]]}}' > "$C/tokenizer/json_unigram"
printf '\003{"added_tokens":[{"id":1,"content":"<s>","special":true}],"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\342\226\201"},{"type":"Replace","pattern":{"String":" "},"content":"\342\226\201"}]},"pre_tokenizer":null,"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\342\226\201"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1]}}},"model":{"type":"BPE","byte_fallback":true,"fuse_unk":true,"unk_token":"<unk>","vocab":{"<unk>":0,"<s>":1,"<0xE6>":2,"<0x88>":3,"<0x91>":4,"\342\226\201":5,"a":6,"b":7,"\342\226\201a":8,"ab":9},"merges":["\342\226\201 a","a b"]}}' > "$C/tokenizer/json_llama2"
printf '\003{"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"\342\226\201"},"pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\342\226\201"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]},"model":{"type":"BPE","byte_fallback":true,"vocab":{"<unk>":0,"\342\226\201":1,"a":2,"\342\226\201a":3},"merges":["\342\226\201 a"]}}' > "$C/tokenizer/json_gemma"

# http_head: request heads (GET, chunked POST with a body, HTTP/1.0 with Content-Length)
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' > "$C/http_head/a"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n' > "$C/http_head/b"
printf 'POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 12\r\nX-Priority: P0\r\n\r\n' > "$C/http_head/c"

# exif: EXIF blocks in both byte orders (selector 0), and PIL-written JPEG / PNG / WebP files with
# an orientation (selectors 1, 2, 3; tests/fixtures/ref/exif-pil)
printf '\000Exif\000\000II*\000\010\000\000\000\001\000\022\001\003\000\001\000\000\000\006\000\000\000\000\000\000\000' > "$C/exif/le"
printf '\000MM\000*\000\000\000\010\000\001\001\022\000\004\000\000\000\001\000\000\000\010\000\000\000\000' > "$C/exif/be"
{ printf '\001'; cat tests/fixtures/ref/exif-pil/o6.jpg; } > "$C/exif/jpeg"
{ printf '\002'; cat tests/fixtures/ref/exif-pil/o5.png; } > "$C/exif/png"
{ printf '\003'; cat tests/fixtures/ref/exif-pil/o8.webp; } > "$C/exif/webp"
# image: the same files as RGB with alpha dropped (selector bits: type, 0x10 RGB, 0x20 drop)
{ printf '\062'; cat tests/fixtures/ref/exif-pil/o6.jpg; } > "$C/image/exif6-jpg"
{ printf '\061'; cat tests/fixtures/ref/exif-pil/o7.png; } > "$C/image/exif7-png"
{ printf '\063'; cat tests/fixtures/ref/exif-pil/rgba.webp; } > "$C/image/rgba-webp"
{ printf '\061'; cat tests/fixtures/ref/exif-pil/palette.png; } > "$C/image/palette-png"

# traceparent
printf '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' > "$C/traceparent/v00"
printf '  cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra\t' > "$C/traceparent/future"
# vl_sample: the JSONL lines of analyze heads / eval-vqa (image paths, pixel values + grids)
printf '{"image": "a.png", "question": "What is the total?", "answers": ["12.50", "$12.50"], "id": "s1"}' > "$C/vl_sample/image"
printf '{"image": ["a.png", "sub/b.jpg"], "question": "Compare them."}' > "$C/vl_sample/images"
printf '{"pixel_values": "p.npy", "grid_thw": [[1, 6, 8], [1, 4, 4]], "question": "q", "answers": []}' > "$C/vl_sample/pixels"
# ppocr: mode byte 0 + a dictionary; mode byte 1 + width, height, map bytes (two boxes)
printf '\000a\nb\r\n\344\270\255\n \n' > "$C/ppocr/dict"
python3 -c 'import sys; w,h=32,16; m=[0]*(w*h)
for y in range(3,8):
  for x in range(2,14): m[y*w+x]=230
for y in range(9,14):
  for x in range(16,30): m[y*w+x]=200
sys.stdout.buffer.write(bytes([1,w-1,h-1]+m))' > "$C/ppocr/map"
# multipart: the Content-Type line, then the body (fuzz_multipart; the audio endpoints' forms):
# curl's -F form with a WAV head and every field, undici's (the openai npm client) with a quoted
# boundary and granularities, a translation, and hostile ones (a boundary-like line inside the
# data, a part without Content-Disposition, a part that never closes)
W='RIFF$\000\000\000WAVEfmt \020\000\000\000\001\000\001\000\200>\000\000\000}\000\000\002\000\020\000data\000\000\000\000'
printf 'multipart/form-data; boundary=------------------------d74496d66958873e\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\nContent-Type: audio/x-wav\r\n\r\n'"$W"'\r\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="language"\r\n\r\nen\r\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="response_format"\r\n\r\nverbose_json\r\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="temperature"\r\n\r\n0.2\r\n--------------------------d74496d66958873e\r\nContent-Disposition: form-data; name="prompt"\r\n\r\ncard delivery\r\n--------------------------d74496d66958873e--\r\n' > "$C/multipart/curl"
printf 'multipart/form-data; boundary="----formdata-undici-0123456789"\n------formdata-undici-0123456789\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\nContent-Type: application/octet-stream\r\n\r\n'"$W"'\r\n------formdata-undici-0123456789\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n------formdata-undici-0123456789\r\nContent-Disposition: form-data; name="timestamp_granularities[]"\r\n\r\nsegment\r\n------formdata-undici-0123456789\r\nContent-Disposition: form-data; name="timestamp_granularities[]"\r\n\r\nword\r\n------formdata-undici-0123456789--' > "$C/multipart/undici"
printf 'Multipart/Form-Data; charset=utf-8; boundary=XyZ\n--XyZ\r\ncontent-disposition: form-data; name=file\r\n\r\n'"$W"'\r\n--XyZ\r\nContent-Disposition: form-data; name="response_format"\r\n\r\nsrt\r\n--XyZ\r\nContent-Disposition: form-data; name="stream"\r\n\r\nfalse\r\n--XyZ--\r\n' > "$C/multipart/translate"
printf 'multipart/form-data; boundary=XyZ\n--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a \\"q\\".wav"\r\n\r\n'"$W"'\r\n--XyZ-not\r\n--X\r\n--XyZ\r\nContent-Type: text/plain\r\n\r\nno disposition\r\n--XyZ--\r\n' > "$C/multipart/hostile"
printf 'multipart/form-data; boundary=XyZ\n--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\nRIFF never closes' > "$C/multipart/open"
du -sh "$C"
