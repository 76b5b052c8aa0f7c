/* fuzz_tokenizer.c — libFuzzer harness for the tokenizers: byte-level BPE and the SentencePiece
 * shapes (see tests/fuzz/README.md).
 *
 * The first input byte (mod 5) picks what the rest is:
 *   0, 1  text encoded with the qwen2-tiny / llama-tiny fixture tokenizer. Invalid UTF-8 must be
 *         an error; valid text must encode, decode back (exactly for llama, which has no
 *         normalizer; equal after NFC for qwen2), and decode the same when streamed one id at a
 *         time, every streamed chunk being valid UTF-8. The segmented NFC is also compared with
 *         utf8proc's whole-text NFC, and the hand-written regex splitters with PCRE2 running the
 *         same regex (on text whose letters and numbers PCRE2 and utf8proc classify alike: their
 *         Unicode versions differ).
 *   2     arbitrary ids (little-endian int32) decoded: the output must be valid UTF-8 and the
 *         streaming decoder must agree with fr_detokenize.
 *   3     the bytes parsed as a tokenizer.json; when that loads, some text and the input itself
 *         are encoded and decoded.
 *   4     a GGUF vocabulary for fr_tokenizer_from_vocab, as lines: the pre name, then tokens
 *         (first byte mod 7 = token type, the rest = the string) up to an empty line, then
 *         merges; when it loads, encoded and decoded like mode 3. The pre name "llama" (or
 *         "llama-nsp", without the space prefix) makes it a SentencePiece `llama` vocabulary
 *         with scores taken from the tokens' first bytes.
 * Fixtures come from $FRUGAL_FIXTURES or tests/fixtures (run from the repository root).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "model/tok_internal.h"

static fr_tokenizer *tok[2];  /* qwen2-tiny, llama-tiny */
static fr_tokenizer *slow[2]; /* the same, forced onto PCRE2 */
static pcre2_code *re_l, *re_n; /* ^\p{L}$, ^\p{N}$ */
static pcre2_match_data *md;

static void die(const char *what) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *fx = getenv("FRUGAL_FIXTURES");
    if (!fx) fx = "tests/fixtures";
    const char *names[2] = {"qwen2-tiny/tokenizer.json", "llama-tiny/tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        char *p = fr_path_join(fx, names[i]);
        fr_err e;
        tok[i] = fr_tokenizer_load_json(p, &e);
        slow[i] = fr_tokenizer_load_json(p, &e);
        if (!tok[i] || !slow[i]) {
            fprintf(stderr, "%s\n", e.msg);
            die("cannot load the fixture tokenizers (run from the repository root)");
        }
        free(p);
        if (!tok[i]->stages[0].fast) die("fixture regex not recognised as a known one");
        slow[i]->stages[0].fast = FR_SPLIT_REGEX;
    }
    int ec;
    PCRE2_SIZE eo;
    re_l = pcre2_compile((PCRE2_SPTR) "^\\p{L}$", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec,
                         &eo, NULL);
    re_n = pcre2_compile((PCRE2_SPTR) "^\\p{N}$", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec,
                         &eo, NULL);
    md = pcre2_match_data_create(4, NULL);
    if (!re_l || !re_n || !md) die("pcre2 setup");
    return 0;
}

/* True when PCRE2 and utf8proc agree on \p{L} / \p{N} for every character of valid s. */
static bool classes_agree(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) return false;
        if (cp >= 0x80) {
            int c = utf8proc_category(cp);
            bool ul = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
            bool un = c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
            bool pl = pcre2_match(re_l, (PCRE2_SPTR)s + i, (size_t)l, 0, 0, md, NULL) >= 0;
            bool pn = pcre2_match(re_n, (PCRE2_SPTR)s + i, (size_t)l, 0, 0, md, NULL) >= 0;
            if (ul != pl || un != pn) return false;
        }
        i += (size_t)l;
    }
    return true;
}

/* Streams ids through fr_detok; checks every chunk and the total against `want`. */
static void check_stream(const fr_tokenizer *t, const int32_t *ids, size_t n, const fr_buf *want,
                         bool skip) {
    fr_detok d = {0};
    fr_buf all = {0};
    for (size_t i = 0; i < n; i++) {
        fr_buf chunk = {0};
        fr_detok_push(t, &d, ids[i], skip, &chunk);
        if (!fr_utf8_valid(chunk.data ? chunk.data : "", chunk.len))
            die("streamed chunk is not valid UTF-8");
        fr_buf_append(&all, chunk.data ? chunk.data : "", chunk.len);
        fr_buf_free(&chunk);
    }
    fr_detok_flush(&d, &all);
    if (all.len != want->len || (all.len && memcmp(all.data, want->data, all.len)))
        die("streaming decode differs from fr_detokenize");
    fr_buf_free(&all);
}

static char *nfc_whole(const char *s, size_t n, size_t *out_n) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0) die("utf8proc rejected valid UTF-8");
    *out_n = (size_t)r;
    return (char *)dst;
}

static void fuzz_text(const fr_tokenizer *t, const fr_tokenizer *ts, bool nfc, const char *s,
                      size_t n) {
    int32_t *ids = NULL;
    size_t m = 0;
    fr_err e;
    bool valid = fr_utf8_valid(s, n);
    int rc = fr_tokenize(t, s, n, false, &ids, &m, &e);
    if (!valid) {
        if (rc != -1 || ids) die("invalid UTF-8 was accepted");
        return;
    }
    if (rc != 0) die("valid text failed to encode");
    for (size_t i = 0; i < m; i++)
        if (ids[i] < 0 || ids[i] >= fr_tokenizer_n_vocab(t)) die("id out of range");
    fr_buf db = {0};
    fr_detokenize_append(t, ids, m, false, &db);
    const char *d = db.data ? db.data : "";
    size_t dn = db.len;
    if (!nfc) {
        if (dn != n || memcmp(d, s, n)) die("llama round trip differs");
    } else {
        /* detok(encode(x)) holds NFC'd pieces; NFC of it equals NFC of x */
        size_t a_n, b_n, c_n = 0;
        char *a = nfc_whole(d, dn, &a_n), *b = nfc_whole(s, n, &b_n);
        if (a_n != b_n || memcmp(a, b, a_n)) die("qwen2 round trip differs after NFC");
        char *c = fr_tok_nfc(s, n, &c_n); /* segmented NFC == whole-text NFC */
        if (c ? (c_n != b_n || memcmp(c, b, b_n)) : (n != b_n || memcmp(s, b, n)))
            die("segmented NFC differs from utf8proc");
        free(a);
        free(b);
        free(c);
    }
    check_stream(t, ids, m, &db, false);
    fr_buf_free(&db);
    /* with the post-processor: the same ids behind the template */
    int32_t *ids2 = NULL;
    size_t m2 = 0;
    if (fr_tokenize(t, s, n, true, &ids2, &m2, &e) != 0) die("encode with add_special failed");
    if (m2 < m || memcmp(ids2 + (m2 - m), ids, m * sizeof *ids)) die("add_special changed the text ids");
    free(ids2);
    /* the PCRE2 path gives the same ids */
    if (classes_agree(s, n)) {
        int32_t *ids3 = NULL;
        size_t m3 = 0;
        if (fr_tokenize(ts, s, n, false, &ids3, &m3, &e) != 0) die("PCRE2 path failed");
        if (m3 != m || memcmp(ids3, ids, m * sizeof *ids)) die("hand-written splitter differs from PCRE2");
        free(ids3);
    }
    free(ids);
}

static void fuzz_ids(const uint8_t *p, size_t n) {
    size_t m = n / 4;
    int32_t *ids = malloc((m + 1) * sizeof *ids);
    for (size_t i = 0; i < m; i++) {
        uint32_t v = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                     (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        /* mostly in range, sometimes not */
        ids[i] = (v & 0x80000000u) ? (int32_t)v : (int32_t)(v % 4100u);
    }
    for (int k = 0; k < 2; k++) {
        for (int skip = 0; skip < 2; skip++) {
            fr_buf d = {0};
            fr_detokenize_append(tok[k], ids, m, skip, &d);
            if (!fr_utf8_valid(d.data ? d.data : "", d.len))
                die("fr_detokenize output is not valid UTF-8");
            char *c = fr_detokenize(tok[k], ids, m, skip);
            if (strlen(c) > d.len || memcmp(c, d.data ? d.data : "", strlen(c)))
                die("fr_detokenize differs from fr_detokenize_append");
            free(c);
            check_stream(tok[k], ids, m, &d, skip);
            fr_buf_free(&d);
        }
    }
    free(ids);
}

/* Encodes some text and the input itself with a freshly loaded tokenizer; checks the ids and
 * that decoding and streaming agree. */
static void exercise(const fr_tokenizer *t, const uint8_t *p, size_t n) {
    static const char *texts[] = {"Hello world! It's 2024.", "  \n\t x",
                                  "\xe6\x88\x91\xe7\x9a\x84 \xF0\x9F\x98\x80", "<|im_end|>a",
                                  "<s> \xE2\x96\x81" "ab  c<0x41>"};
    fr_err e;
    for (size_t i = 0; i < sizeof texts / sizeof *texts + 1; i++) {
        const size_t nt = sizeof texts / sizeof *texts;
        const char *s = i < nt ? texts[i] : (const char *)p;
        size_t sn = i < nt ? strlen(s) : n;
        int32_t *ids = NULL;
        size_t m = 0;
        if (fr_tokenize(t, s, sn, true, &ids, &m, &e) == 0) {
            for (size_t k = 0; k < m; k++)
                if (ids[k] < 0 || ids[k] >= fr_tokenizer_n_vocab(t)) die("id out of range");
            fr_buf d = {0};
            fr_detokenize_append(t, ids, m, false, &d);
            if (!fr_utf8_valid(d.data ? d.data : "", d.len)) die("decode is not valid UTF-8");
            check_stream(t, ids, m, &d, false);
            fr_buf_free(&d);
        } else if (fr_utf8_valid(s, sn)) {
            die("valid text failed to encode");
        }
        free(ids);
    }
}

static void fuzz_json(const uint8_t *p, size_t n) {
    fr_err e;
    fr_tokenizer *t = fr_tokenizer_from_json("fuzz.json", (const char *)p, n, &e);
    if (!t) {
        if (strncmp(e.msg, "fuzz.json: ", 11) != 0) die("error does not name the file");
        return;
    }
    exercise(t, p, n);
    fr_tokenizer_free(t);
}

static void fuzz_vocab(const uint8_t *p, size_t n) {
    /* split into lines (the copy keeps the strings alive and NUL-terminated) */
    char *buf = malloc(n + 1);
    memcpy(buf, p, n);
    buf[n] = 0;
    size_t cap = 16, nl = 0;
    char **line = malloc(cap * sizeof *line);
    size_t *len = malloc(cap * sizeof *len);
    for (size_t i = 0, st = 0; i <= n; i++) {
        if (i < n && buf[i] != '\n') continue;
        if (nl == cap) {
            cap *= 2;
            line = realloc(line, cap * sizeof *line);
            len = realloc(len, cap * sizeof *len);
        }
        line[nl] = buf + st;
        len[nl++] = i - st;
        if (i < n) buf[i] = 0;
        st = i + 1;
    }
    size_t nt = 0;
    while (1 + nt < nl && len[1 + nt] > 0) nt++;
    const char **toks = malloc((nt + 1) * sizeof *toks);
    size_t *tl = malloc((nt + 1) * sizeof *tl);
    int32_t *ty = malloc((nt + 1) * sizeof *ty);
    for (size_t i = 0; i < nt; i++) {
        ty[i] = (uint8_t)line[1 + i][0] % 7;
        toks[i] = line[1 + i] + 1;
        tl[i] = len[1 + i] - 1;
    }
    size_t m0 = FR_MIN(nl, 2 + nt), nm = nl - m0;
    fr_vocab_spec sp = {(int)nt, toks, tl, ty, (int)nm, (const char *const *)line + m0, len + m0,
                        nl ? line[0] : NULL, nt > 1 ? 1 : -1, nt > 2 ? 2 : -1, -1, nt > 1};
    /* pre name "llama" / "llama-nsp": a SentencePiece vocabulary (scores from the string bytes;
     * "-nsp": add_space_prefix false) */
    float *sc = malloc((nt + 1) * sizeof *sc);
    for (size_t i = 0; i < nt; i++) sc[i] = tl[i] ? -(float)((uint8_t)toks[i][0] % 31) : 0.0f;
    if (nl && !strncmp(line[0], "llama", 5)) {
        sp.model = "llama";
        sp.scores = sc;
        sp.no_space_prefix = !strcmp(line[0], "llama-nsp");
        sp.add_eos = nt > 3;
    }
    fr_err e;
    fr_tokenizer *t = fr_tokenizer_from_vocab(&sp, &e);
    if (t) {
        exercise(t, p, n);
        fr_tokenizer_free(t);
    } else if (strncmp(e.msg, "gguf vocab: ", 12) != 0) {
        die("vocab error without its prefix");
    }
    free(sc);
    free(toks);
    free(tl);
    free(ty);
    free(line);
    free(len);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 5) {
    case 0: fuzz_text(tok[0], slow[0], true, s, n); break;
    case 1: fuzz_text(tok[1], slow[1], false, s, n); break;
    case 2: fuzz_ids(data + 1, n); break;
    case 3: fuzz_json(data + 1, n); break;
    default: fuzz_vocab(data + 1, n); break;
    }
    return 0;
}
