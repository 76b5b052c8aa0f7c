#!/bin/sh
# cli_gguf.sh — GGUF files written by `frugal mkmodel`, and the GGUF fixtures, checked by
# gguf-spec (tests/gguf_spec.c: the GGUF specification and llama.cpp's loader rules for llama,
# qwen2 and the gpt2 / llama tokenizers, written without the project's own GGUF reader):
#   - both architectures x every GGUF type mkmodel writes (f32 f16 q8_0 q4_0), tied and untied,
#     with the default tokenizer and an embedding larger than the tokenizer (--vocab > tokens);
#   - real tokenizers (llama-tiny's Llama 3 BPE with BOS, qwen2-tiny's), a head size other than
#     hidden / heads;
#   - every tests/fixtures/*.gguf;
#   - and that the checker fails: a file whose token list is shorter than token_embd's rows
#     (what mkmodel wrote before), a key written as i32 where llama.cpp reads u32,
#     general.alignment as i32, a truncated file;
#   - the same files read by third-party code (npm packages pinned in tests/gguf/package.json,
#     installed into tests/gguf/node_modules on the first run, as cli_serve.sh does for openai):
#     the @huggingface/gguf parser (tests/gguf/hf_gguf.mjs), and llama.cpp itself through
#     node-llama-cpp's prebuilt CPU build (tests/gguf/llamacpp.mjs): every file loads and decodes,
#     on the F32 ones llama.cpp's greedy tokens equal frugal's, and the bad file is refused;
#   - the SentencePiece (`llama` tokenizer) GGUF that tests/test_sp_tokenizer.c writes: gguf-spec
#     accepts it, and llama.cpp's tokenizer gives sentencepiece's ids on the fixture strings
#     (tests/gguf/sp_llamacpp.mjs; frugal's ids on the same file are checked by the C test).
# Prints "N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
BIN=${FRUGAL_BIN:-build/frugal}
SPEC=${GGUF_SPEC:-$(dirname "$BIN")/gguf-spec}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/frugal-gguf.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

if [ ! -x "$SPEC" ] || [ ! -x "$BIN" ]; then
    bad "need $BIN and $SPEC (make tests)"
    echo "$pass passed, $fail failed"; exit 1
fi

# spec_ok NAME FILE: gguf-spec accepts FILE
spec_ok() {
    if out=$("$SPEC" "$2" 2>&1); then ok "$1: $(printf '%s' "$out" | sed "s|^$2: ||")"
    else bad "$1: $(printf '%s' "$out" | head -n 8)"; fi
}
# spec_rejects NAME FILE WORDS: gguf-spec refuses FILE and says WORDS
spec_rejects() {
    out=$("$SPEC" "$2" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q -- "$3"; then ok "$1 is refused ($3)"
    else bad "$1: exit $rc, output: $(printf '%s' "$out" | head -n 4)"; fi
}
# mk NAME ARGS...: mkmodel into $TMP/NAME.gguf
mk() {
    n=$1; shift
    if "$BIN" mkmodel --out "$TMP/$n.gguf" "$@" >"$TMP/$n.log" 2>&1; then return 0; fi
    bad "mkmodel $n: $(tail -c 300 "$TMP/$n.log")"; return 1
}

# ---- every architecture x GGUF type; the embedding has 300 rows, the tokenizer 259 tokens ----
i=0
for arch in qwen2 llama; do
    for t in f32 f16 q8_0 q4_0; do
        tied=; [ $((i % 2)) -eq 1 ] && tied=--tied
        i=$((i + 1))
        mk "$arch-$t" --arch "$arch" --hidden 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96 \
            --vocab 300 --gguf-type "$t" $tied --seed 3 &&
            spec_ok "mkmodel $arch $t ${tied:-untied}" "$TMP/$arch-$t.gguf"
    done
done

# ---- real tokenizers; a head size that is not hidden / heads ----
mk llama-tok --arch llama --hidden 64 --layers 1 --heads 8 --kv-heads 2 --head-dim 16 --ffn 96 \
    --vocab 3100 --gguf-type f16 --tokenizer tests/fixtures/llama-tiny/tokenizer.json &&
    spec_ok "mkmodel llama, Llama 3 tokenizer (BOS, merges), head size 16 x 8 heads" "$TMP/llama-tok.gguf"
mk qwen2-tok --arch qwen2 --hidden 64 --layers 1 --heads 4 --kv-heads 4 --ffn 64 \
    --vocab 4005 --gguf-type q8_0 --tokenizer tests/fixtures/qwen2-tiny/tokenizer.json &&
    spec_ok "mkmodel qwen2, Qwen2 tokenizer, --vocab = token count" "$TMP/qwen2-tok.gguf"

# ---- the fixtures (the CPU and CUDA end-to-end tests load them) ----
for f in tests/fixtures/*.gguf; do
    [ -f "$f" ] || { bad "no GGUF fixtures in tests/fixtures"; break; }
    spec_ok "fixture ${f##*/}" "$f"
done

# ---- the checker fails on what it must refuse ----
spec_rejects "tokens fewer than token_embd rows" tests/fixtures/bad-gguf/tokens-fewer-than-rows.gguf \
    "token_embd.weight' has shape"
# patch_type FILE KEY TYPE: overwrite the u32 value type that follows KEY's bytes
patch_type() {
    off=$(grep -obUa -- "$2" "$1" | head -n 1 | cut -d: -f1)
    [ -n "$off" ] || return 1
    printf "\\$(printf '%03o' "$3")" | dd of="$1" bs=1 seek=$((off + ${#2})) conv=notrunc 2>/dev/null
}
if [ -f "$TMP/qwen2-f32.gguf" ]; then
    cp "$TMP/qwen2-f32.gguf" "$TMP/i32.gguf"
    if patch_type "$TMP/i32.gguf" qwen2.block_count 5; then
        spec_rejects "qwen2.block_count as i32" "$TMP/i32.gguf" "reads it as u32"
    else bad "qwen2.block_count not found to patch"; fi
    cp "$TMP/qwen2-f32.gguf" "$TMP/align.gguf"
    if patch_type "$TMP/align.gguf" general.alignment 5; then
        spec_rejects "general.alignment as i32" "$TMP/align.gguf" "requires u32"
    else bad "general.alignment not found to patch"; fi
    head -c $(($(wc -c <"$TMP/qwen2-f32.gguf") - 100)) "$TMP/qwen2-f32.gguf" >"$TMP/cut.gguf"
    spec_rejects "a truncated file" "$TMP/cut.gguf" "past the end"
fi

# ---- third-party readers on the same files: @huggingface/gguf's parser, and llama.cpp itself ----
# (npm installs the versions pinned in tests/gguf/package.json into tests/gguf/node_modules on the
# first run, about 85 MB: node-llama-cpp with its prebuilt x86-64 CPU build of llama.cpp)
nm=tests/gguf/node_modules
if ! command -v node >/dev/null 2>&1; then
    bad "node is not installed (scripts/install-deps.sh installs it)"
elif [ "$(uname -m)" != x86_64 ]; then
    bad "no prebuilt llama.cpp for $(uname -m) in tests/gguf/package.json"
else
    if [ ! -d "$nm/@huggingface/gguf" ] || [ ! -d "$nm/node-llama-cpp" ] || [ ! -d "$nm/@node-llama-cpp/linux-x64" ]; then
        (cd tests/gguf && npm install --omit=optional --no-package-lock --no-audit --no-fund \
            --loglevel=error >"$TMP/npm.log" 2>&1) || bad "npm install in tests/gguf: $(tail -c 300 "$TMP/npm.log")"
    fi
    files=$(ls "$TMP"/qwen2-*.gguf "$TMP"/llama-*.gguf tests/fixtures/*.gguf 2>/dev/null)
    # node_count SCRIPT NAME ARGS...: one ok/FAIL per line of the script's output
    node_count() {
        js=$1; what=$2; shift 2
        out=$(node "tests/gguf/$js" "$@" 2>&1)
        p=$(printf '%s\n' "$out" | grep -c '^ok '); f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
        printf '%s\n' "$out" | grep '^FAIL ' | head -n 5
        [ "$p" -gt 0 ] && ok "$what: $p files"
        [ "$f" -gt 0 ] && bad "$what: $f files fail"
        [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && bad "$what: no result ($(printf '%s' "$out" | tail -c 300))"
    }
    if [ -d "$nm/@huggingface/gguf" ]; then
        # shellcheck disable=SC2086
        node_count hf_gguf.mjs "@huggingface/gguf reads them as llama.cpp needs them" $files
        out=$(node tests/gguf/hf_gguf.mjs tests/fixtures/bad-gguf/tokens-fewer-than-rows.gguf 2>&1)
        if printf '%s' "$out" | grep -q '^FAIL .*tokens but token_embd.weight has'; then
            ok "@huggingface/gguf check refuses tokens fewer than rows"
        else bad "@huggingface/gguf check on tokens-fewer-than-rows: $out"; fi
    fi
    if [ -d "$nm/node-llama-cpp" ]; then
        # every file loads and decodes; on the F32 ones llama.cpp's greedy tokens on frugal's prompt
        # ids equal frugal's (CPU decoder); the bad file is refused
        set --
        for f in $files; do
            case $f in
            "$TMP/qwen2-f32.gguf" | "$TMP/llama-f32.gguf" | tests/fixtures/qwen2-tiny-f32.gguf)
                j=$("$BIN" generate --model "$f" --prompt "The cat sat on the mat" --temperature 0 \
                    --max-tokens 6 --ignore-eos --json 2>/dev/null) || { bad "frugal generate $f"; continue; }
                set -- "$@" "$f" "$j" ;;
            *) set -- "$@" "$f" ;;
            esac
        done
        node_count llamacpp.mjs "llama.cpp loads and decodes them (greedy = frugal's on the F32 ones), refuses the bad file" \
            "$@" "!tests/fixtures/bad-gguf/tokens-fewer-than-rows.gguf"
        # the SentencePiece GGUF that test_sp_tokenizer writes (llama-tiny's weights and a `llama`
        # vocabulary from tests/fixtures/sp/spm): gguf-spec accepts it and llama.cpp tokenizes the
        # fixture strings as sentencepiece does (frugal's ids on it: test_sp_tokenizer)
        spt=$(dirname "$BIN")/tests/test_sp_tokenizer
        if [ -x "$spt" ] && FRUGAL_SP_GGUF_OUT="$TMP/spm.gguf" "$spt" >"$TMP/spt.log" 2>&1; then
            spec_ok "the SentencePiece GGUF of test_sp_tokenizer" "$TMP/spm.gguf"
            out=$(node tests/gguf/sp_llamacpp.mjs "$TMP/spm.gguf" tests/fixtures/sp/spm/expect.json 2>&1)
            if printf '%s\n' "$out" | grep -q '^ok '; then ok "$(printf '%s\n' "$out" | sed -n 's/^ok   //p')"
            else bad "llama.cpp on the SentencePiece GGUF: $(printf '%s' "$out" | tail -c 600)"; fi
        else
            bad "test_sp_tokenizer wrote no GGUF ($spt: $(tail -c 300 "$TMP/spt.log" 2>/dev/null))"
        fi
    fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
