/* test_tokenizer.c — byte-level BPE against HF tokenizers' outputs (tests/fixtures/ref), the GGUF
 * vocabulary path against the tokenizer.json path, streaming decoding, lossy UTF-8, corrupt
 * files, added-token options, long inputs and threads; prints the encoding throughput.
 *
 * Design: the reference files hold, per fixture tokenizer, "tokenize": [{text, ids, decoded}]
 * made by HF `Tokenizer.encode(text).ids` and `decode(ids, skip_special_tokens=False)`. cJSON
 * strings are NUL-terminated, so before parsing a reference file "\u0000" is rewritten to the
 * escape of U+F0000 and mapped back to a NUL byte afterwards (jstr()).
 * White-box checks (tok_internal.h): the hand-written splitters against PCRE2 running the same
 * regex, and the segmented NFC against utf8proc's whole-text NFC, on random text.
 */
#include "t.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <utf8proc.h>

#include "base/base.h"
#include "model/tok_internal.h"
#include "model/tokenizer.h"

/* ---------------------------------------------------------------- helpers */

static char *fx_path(const char *rel) { return fr_path_join(t_fixtures(), rel); }

/* A string with its length (may hold NUL bytes). */
typedef struct tstr {
    char *s;
    size_t n;
} tstr;

/* U+F0000 in UTF-8, the stand-in for NUL in reference files */
static const char nul_standin[] = "\xF3\xB0\x80\x80";

static tstr jstr(const cJSON *v) {
    tstr r = {NULL, 0};
    if (!cJSON_IsString(v)) return r;
    const char *s = v->valuestring;
    size_t n = strlen(s);
    r.s = fr_xmalloc(n + 1);
    for (size_t i = 0; i < n;) {
        if (i + 4 <= n && !memcmp(s + i, nul_standin, 4)) {
            r.s[r.n++] = 0;
            i += 4;
        } else {
            r.s[r.n++] = s[i++];
        }
    }
    r.s[r.n] = 0;
    return r;
}

static cJSON *load_ref(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "ref/%s.json", name);
    char *p = fx_path(rel);
    fr_err e = {0};
    size_t n = 0;
    char *txt = fr_read_file(p, 256u << 20, &n, &e);
    free(p);
    if (!txt) {
        fprintf(stderr, "  %s\n", e.msg);
        return NULL;
    }
    /* "\u0000" -> "\udb80\udc00" */
    fr_buf b = {0};
    const char *q = txt, *r;
    while ((r = strstr(q, "\\u0000")) != NULL) {
        fr_buf_append(&b, q, (size_t)(r - q));
        if (r > txt && r[-1] == '\\') fr_buf_puts(&b, "\\u0000");
        else fr_buf_puts(&b, "\\udb80\\udc00");
        q = r + 6;
    }
    fr_buf_puts(&b, q);
    free(txt);
    txt = fr_buf_cstr(&b);
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    return j;
}

static fr_tokenizer *load_fixture(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "%s/tokenizer.json", name);
    char *p = fx_path(rel);
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_load_json(p, &e);
    if (!t) fprintf(stderr, "  load %s: %s\n", p, e.msg);
    free(p);
    return t;
}

static int enc(const fr_tokenizer *t, const char *s, size_t n, bool add_special, int32_t **ids,
               size_t *nids) {
    fr_err e = {0};
    int rc = fr_tokenize(t, s, n, add_special, ids, nids, &e);
    if (rc) fprintf(stderr, "  tokenize: %s\n", e.msg);
    return rc;
}

static bool ids_equal_json(const int32_t *ids, size_t n, const cJSON *arr) {
    if ((size_t)cJSON_GetArraySize(arr) != n) return false;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++)
        if (!cJSON_IsNumber(e) || e->valueint != ids[i]) return false;
    return true;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 40 ? " ..." : "");
}

/* Streams ids through fr_detok one at a time; every chunk must be valid UTF-8 on its own and the
 * whole must equal fr_detokenize. Returns the number of failed checks. */
static int check_stream(const fr_tokenizer *t, const int32_t *ids, size_t n, const char *want,
                        size_t want_n) {
    int fails = 0;
    fr_detok d = {0};
    fr_buf all = {0};
    for (size_t i = 0; i < n; i++) {
        fr_buf chunk = {0};
        fr_detok_push(t, &d, ids[i], false, &chunk);
        if (!fr_utf8_valid(chunk.data ? chunk.data : "", chunk.len)) fails++;
        if (chunk.len) fr_buf_append(&all, chunk.data, chunk.len);
        fr_buf_free(&chunk);
    }
    fr_buf tail = {0};
    fr_detok_flush(&d, &tail);
    if (!fr_utf8_valid(tail.data ? tail.data : "", tail.len)) fails++;
    if (tail.len) fr_buf_append(&all, tail.data, tail.len);
    fr_buf_free(&tail);
    if (all.len != want_n || (want_n && memcmp(all.data, want, want_n))) {
        fprintf(stderr, "  stream decode differs (%zu vs %zu bytes)\n", all.len, want_n);
        fails++;
    }
    fr_buf_free(&all);
    return fails;
}

/* Every reference entry: ids, decode, streaming decode. */
static void check_ref(const fr_tokenizer *t, const char *refname) {
    cJSON *ref = load_ref(refname);
    CHECK(ref != NULL);
    if (!ref) return;
    const cJSON *list = cJSON_GetObjectItem(ref, "tokenize");
    CHECK(cJSON_GetArraySize(list) >= 19);
    CHECK_EQ_INT(fr_tokenizer_n_vocab(t), cJSON_GetObjectItem(ref, "n_vocab")->valueint);
    int k = 0;
    for (const cJSON *e = list ? list->child : NULL; e; e = e->next, k++) {
        tstr text = jstr(cJSON_GetObjectItem(e, "text"));
        tstr dec = jstr(cJSON_GetObjectItem(e, "decoded"));
        const cJSON *want = cJSON_GetObjectItem(e, "ids");
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(text.s && dec.s);
        if (!text.s || !dec.s || enc(t, text.s, text.n, true, &ids, &n)) {
            t_fail_cur++;
        } else {
            if (!ids_equal_json(ids, n, want)) {
                fprintf(stderr, "  %s entry %d: ids differ for text %.60s\n", refname, k, text.s);
                print_ids("got ", ids, n);
                char *w = cJSON_PrintUnformatted(want);
                fprintf(stderr, "    want: %.300s\n", w);
                free(w);
                t_fail_cur++;
            }
            /* decode the reference ids, not ours */
            size_t nw = (size_t)cJSON_GetArraySize(want), i = 0;
            int32_t *wid = fr_xmalloc((nw + 1) * sizeof *wid);
            for (const cJSON *x = want->child; x; x = x->next) wid[i++] = x->valueint;
            fr_buf got = {0};
            fr_detokenize_append(t, wid, nw, false, &got);
            if (got.len != dec.n || memcmp(got.data ? got.data : "", dec.s, dec.n)) {
                fprintf(stderr, "  %s entry %d: decode differs\n    got  [%.*s]\n    want [%s]\n",
                        refname, k, (int)got.len, got.data ? got.data : "", dec.s);
                t_fail_cur++;
            }
            fr_buf_free(&got);
            char *cs = fr_detokenize(t, wid, nw, false); /* the C string: up to a NUL */
            CHECK(strlen(cs) <= dec.n && !memcmp(cs, dec.s, strlen(cs)));
            free(cs);
            t_fail_cur += check_stream(t, wid, nw, dec.s, dec.n);
            free(wid);
        }
        free(ids);
        free(text.s);
        free(dec.s);
    }
    cJSON_Delete(ref);
}

/* ---------------------------------------------------------------- GGUF spec from tokenizer.json */

typedef struct vspec {
    fr_vocab_spec spec;
    cJSON *root;        /* owns the strings */
    const char **tokens;
    size_t *lens;
    int32_t *types;
    char **merges;      /* "a b" */
    const char **mptr;
    size_t *mlens;
} vspec;

static bool vspec_make(vspec *v, const char *fixture, const char *pre) {
    memset(v, 0, sizeof *v);
    char rel[128];
    snprintf(rel, sizeof rel, "%s/tokenizer.json", fixture);
    char *p = fx_path(rel);
    fr_err e = {0};
    char *txt = fr_read_file(p, 64u << 20, NULL, &e);
    free(p);
    if (!txt) return false;
    v->root = cJSON_Parse(txt);
    free(txt);
    if (!v->root) return false;
    const cJSON *model = cJSON_GetObjectItem(v->root, "model");
    const cJSON *vocab = cJSON_GetObjectItem(model, "vocab");
    const cJSON *added = cJSON_GetObjectItem(v->root, "added_tokens");
    const cJSON *merges = cJSON_GetObjectItem(model, "merges");
    int n = 0;
    for (const cJSON *x = vocab->child; x; x = x->next) n = FR_MAX(n, x->valueint + 1);
    for (const cJSON *x = added->child; x; x = x->next)
        n = FR_MAX(n, cJSON_GetObjectItem(x, "id")->valueint + 1);
    v->tokens = fr_xcalloc((size_t)n, sizeof *v->tokens);
    v->lens = fr_xcalloc((size_t)n, sizeof *v->lens);
    v->types = fr_xcalloc((size_t)n, sizeof *v->types);
    for (const cJSON *x = vocab->child; x; x = x->next) {
        v->tokens[x->valueint] = x->string;
        v->lens[x->valueint] = strlen(x->string);
        v->types[x->valueint] = 1;
    }
    for (const cJSON *x = added->child; x; x = x->next) {
        int id = cJSON_GetObjectItem(x, "id")->valueint;
        const char *c = cJSON_GetObjectItem(x, "content")->valuestring;
        v->tokens[id] = c;
        v->lens[id] = strlen(c);
        v->types[id] = cJSON_IsTrue(cJSON_GetObjectItem(x, "special")) ? 3 : 4;
    }
    int nm = cJSON_GetArraySize(merges), i = 0;
    v->merges = fr_xcalloc((size_t)nm + 1, sizeof *v->merges);
    v->mptr = fr_xcalloc((size_t)nm + 1, sizeof *v->mptr);
    v->mlens = fr_xcalloc((size_t)nm + 1, sizeof *v->mlens);
    for (const cJSON *x = merges->child; x; x = x->next, i++) {
        fr_buf b = {0};
        if (cJSON_IsString(x)) {
            fr_buf_puts(&b, x->valuestring);
        } else {
            fr_buf_puts(&b, x->child->valuestring);
            fr_buf_puts(&b, " ");
            fr_buf_puts(&b, x->child->next->valuestring);
        }
        v->mlens[i] = b.len;
        v->merges[i] = fr_buf_cstr(&b);
        v->mptr[i] = v->merges[i];
    }
    v->spec.n_tokens = n;
    v->spec.tokens = v->tokens;
    v->spec.token_lens = v->lens;
    v->spec.token_types = v->types;
    v->spec.n_merges = nm;
    v->spec.merges = v->mptr;
    v->spec.merge_lens = v->mlens;
    v->spec.pre = pre;
    v->spec.bos_id = v->spec.eos_id = v->spec.pad_id = -1;
    return true;
}

static void vspec_free(vspec *v) {
    for (int i = 0; i < v->spec.n_merges; i++) free(v->merges[i]);
    free(v->merges);
    free(v->mptr);
    free(v->mlens);
    free(v->tokens);
    free(v->lens);
    free(v->types);
    cJSON_Delete(v->root);
}

/* ---------------------------------------------------------------- reference tests */

TEST(json_qwen2_matches_hf) {
    fr_tokenizer *t = load_fixture("qwen2-tiny");
    CHECK(t != NULL);
    if (!t) return;
    check_ref(t, "qwen2-tiny");
    CHECK_EQ_INT(fr_tokenizer_bos(t), -1);
    CHECK_EQ_INT(fr_tokenizer_eos(t), -1);
    fr_tokenizer_free(t);
}

TEST(json_llama_matches_hf) {
    fr_tokenizer *t = load_fixture("llama-tiny");
    CHECK(t != NULL);
    if (!t) return;
    check_ref(t, "llama-tiny");
    CHECK_EQ_INT(fr_tokenizer_bos(t), 3000); /* from the TemplateProcessing */
    CHECK_EQ_INT(fr_tokenizer_eos(t), -1);
    /* without add_special, no BOS */
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(enc(t, "", 0, true, &ids, &n) == 0 && n == 1 && ids[0] == 3000);
    free(ids);
    CHECK(enc(t, "a", 1, false, &ids, &n) == 0 && n == 1 && ids[0] == 64);
    free(ids);
    fr_tokenizer_free(t);
}

TEST(json_qwen2_bf16_fixture_loads) {
    fr_tokenizer *t = load_fixture("qwen2-tiny-bf16");
    CHECK(t != NULL);
    if (t) check_ref(t, "qwen2-tiny");
    fr_tokenizer_free(t);
}

static void check_vocab_path(const char *fixture, const char *pre, bool llama) {
    vspec v;
    CHECK(vspec_make(&v, fixture, pre));
    if (!v.root) return;
    if (llama) {
        v.spec.bos_id = 3000;
        v.spec.eos_id = 3004;
        v.spec.add_bos = true;
    } else {
        v.spec.bos_id = 4000; /* as the GGUF writer stores it; add_bos false */
        v.spec.eos_id = 4002;
        v.spec.pad_id = 4000;
    }
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_from_vocab(&v.spec, &e);
    if (!t) fprintf(stderr, "  from_vocab: %s\n", e.msg);
    CHECK(t != NULL);
    if (t) {
        check_ref(t, fixture);
        CHECK_EQ_INT(fr_tokenizer_bos(t), llama ? 3000 : 4000);
        CHECK_EQ_INT(fr_tokenizer_eos(t), llama ? 3004 : 4002);
        CHECK(fr_tokenizer_is_special(t, llama ? 3004 : 4002));
        if (!llama) CHECK(!fr_tokenizer_is_special(t, 4003));
        /* same ids as the tokenizer.json path on the whole English corpus */
        fr_tokenizer *tj = load_fixture(fixture);
        char *p = fx_path("corpus-en.txt");
        size_t len = 0;
        char *txt = fr_read_file(p, 64u << 20, &len, &e);
        free(p);
        CHECK(tj && txt);
        if (tj && txt) {
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            CHECK(enc(t, txt, len, true, &a, &na) == 0);
            CHECK(enc(tj, txt, len, true, &b, &nb) == 0);
            CHECK(na == nb && a && b && !memcmp(a, b, na * sizeof *a));
            free(a);
            free(b);
        }
        free(txt);
        fr_tokenizer_free(tj);
    }
    fr_tokenizer_free(t);
    vspec_free(&v);
}

TEST(vocab_qwen2_matches_hf) { check_vocab_path("qwen2-tiny", "qwen2", false); }
TEST(vocab_llama_matches_hf) { check_vocab_path("llama-tiny", "llama-bpe", true); }

TEST(vocab_errors) {
    vspec v;
    CHECK(vspec_make(&v, "qwen2-tiny", "no-such-pre"));
    if (!v.root) return;
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_from_vocab(&v.spec, &e);
    CHECK(t == NULL);
    CHECK(strstr(e.msg, "no-such-pre") != NULL);
    /* aliases llama.cpp uses */
    static const char *const aliases[] = {"llama3", "llama-v3", "deepseek-r1-qwen", "gpt-2"};
    for (size_t i = 0; i < FR_ARRAY_LEN(aliases); i++) {
        v.spec.pre = aliases[i];
        t = fr_tokenizer_from_vocab(&v.spec, &e);
        CHECK(t != NULL);
        fr_tokenizer_free(t);
    }
    /* NULL pre = "default" (GPT-2 regex), NULL types = all normal */
    v.spec.pre = NULL;
    v.spec.token_types = NULL;
    t = fr_tokenizer_from_vocab(&v.spec, &e);
    CHECK(t != NULL);
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(enc(t, "Hello world", 11, true, &ids, &n) == 0 && n == 2);
        free(ids);
        CHECK(!fr_tokenizer_is_special(t, 4002));
    }
    fr_tokenizer_free(t);
    /* a bad merge */
    v.spec.pre = "qwen2";
    const char *saved = v.mptr[5];
    v.mptr[5] = "nospace";
    v.mlens[5] = 7;
    t = fr_tokenizer_from_vocab(&v.spec, &e);
    CHECK(t == NULL && strstr(e.msg, "merge 5"));
    v.mptr[5] = saved;
    v.mlens[5] = strlen(saved);
    /* a control token that is not valid UTF-8 is never matched (it would cut a character) */
    {
        const char *saved_tok = v.tokens[4003];
        size_t saved_len = v.lens[4003];
        v.tokens[4003] = "\xE4\xB8";
        v.lens[4003] = 2;
        t = fr_tokenizer_from_vocab(&v.spec, &e);
        CHECK(t != NULL);
        if (t) {
            int32_t *ids = NULL;
            size_t n = 0;
            const char *s = "\xE4\xB8\xAD\xE6\x96\x87 ok";
            CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
            char *d = fr_detokenize(t, ids, n, false);
            CHECK_STR(d, s);
            free(d);
            free(ids);
        }
        fr_tokenizer_free(t);
        v.tokens[4003] = saved_tok;
        v.lens[4003] = saved_len;
    }
    v.spec.add_bos = true; /* no bos id */
    t = fr_tokenizer_from_vocab(&v.spec, &e);
    CHECK(t == NULL && strstr(e.msg, "bos"));
    vspec_free(&v);
}

/* ---------------------------------------------------------------- decoding */

/* ids of the single-byte tokens for the bytes of s */
static int32_t *byte_ids(const fr_tokenizer *t, const uint8_t *s, size_t n) {
    int32_t *ids = fr_xmalloc((n + 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        int found = -1;
        for (int id = 0; id < fr_tokenizer_n_vocab(t) && found < 0; id++) {
            char b[8];
            if (fr_token_bytes(t, id, b, sizeof b) == 1 && (uint8_t)b[0] == s[i]) found = id;
        }
        ids[i] = found;
    }
    return ids;
}

TEST(stream_detok_multibyte) {
    fr_tokenizer *t = load_fixture("qwen2-tiny");
    CHECK(t != NULL);
    if (!t) return;
    const char *texts[] = {"\xe6\x88\x91\xe7\x9a\x84\xe9\x93\xb6\xe8\xa1\x8c\xe5\x8d\xa1 ok",
                           ("Emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD! "
                            "\xF0\x9F\x87\xBA\xF0\x9F\x87\xB8 \xe2\x9d\xa4\xef\xb8\x8f"),
                           "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf"};
    for (size_t k = 0; k < FR_ARRAY_LEN(texts); k++) {
        const char *s = texts[k];
        size_t n = strlen(s);
        /* byte by byte: each push may only emit whole characters */
        int32_t *ids = byte_ids(t, (const uint8_t *)s, n);
        for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0);
        t_fail_cur += check_stream(t, ids, n, s, n);
        free(ids);
        /* as the tokenizer splits it */
        size_t m = 0;
        CHECK(enc(t, s, n, false, &ids, &m) == 0);
        t_fail_cur += check_stream(t, ids, m, s, n);
        char *d = fr_detokenize(t, ids, m, false);
        CHECK_STR(d, s);
        free(d);
        free(ids);
    }
    fr_tokenizer_free(t);
}

TEST(lossy_utf8_like_rust) {
    fr_tokenizer *t = load_fixture("llama-tiny");
    CHECK(t != NULL);
    if (!t) return;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xE4\xB8" "a", "\xEF\xBF\xBD" "a"},
        {"\x80", "\xEF\xBF\xBD"},
        {"\xE0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
        {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF5x", "\xEF\xBF\xBDx"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"a\xF0\x9F\x98" "b\xE4", "a\xEF\xBF\xBD" "b\xEF\xBF\xBD"},
        {"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80", "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"},
    };
    for (size_t k = 0; k < FR_ARRAY_LEN(cases); k++) {
        size_t n = strlen(cases[k].in);
        int32_t *ids = byte_ids(t, (const uint8_t *)cases[k].in, n);
        char *d = fr_detokenize(t, ids, n, false);
        CHECK_STR(d, cases[k].out);
        free(d);
        t_fail_cur += check_stream(t, ids, n, cases[k].out, strlen(cases[k].out));
        free(ids);
    }
    fr_tokenizer_free(t);
}

TEST(lookups_and_skip_special) {
    fr_tokenizer *t = load_fixture("qwen2-tiny");
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ_INT(fr_tokenizer_find(t, "<|im_end|>"), 4002);
    CHECK_EQ_INT(fr_tokenizer_find(t, "<tool_call>"), 4003);
    CHECK_EQ_INT(fr_tokenizer_find(t, "\xC4\xA0"), 220); /* "Ġ" */
    CHECK_EQ_INT(fr_tokenizer_find(t, "no such token"), -1);
    CHECK(fr_tokenizer_is_special(t, 4000));
    CHECK(!fr_tokenizer_is_special(t, 4003));
    CHECK(!fr_tokenizer_is_special(t, 220));
    CHECK(!fr_tokenizer_is_special(t, -1));
    CHECK(!fr_tokenizer_is_special(t, 1 << 30));
    CHECK_STR(fr_tokenizer_token_str(t, 4001), "<|im_start|>");
    CHECK_STR(fr_tokenizer_token_str(t, 4004), "</tool_call>");
    CHECK(fr_tokenizer_token_str(t, 220) == NULL);
    char b[16];
    CHECK_EQ_INT(fr_token_bytes(t, 220, b, sizeof b), 1);
    CHECK(b[0] == ' ');
    CHECK_EQ_INT(fr_token_bytes(t, 4002, b, 4), 4); /* cut at cap */
    CHECK_EQ_INT(fr_token_bytes(t, 9999, b, sizeof b), -1);
    CHECK_EQ_INT(fr_token_bytes(t, -3, b, sizeof b), -1);
    int32_t ids[] = {4001, 64, 4002, 4003, 9999, -5};
    char *d = fr_detokenize(t, ids, 6, true);
    CHECK_STR(d, "a<tool_call>");
    free(d);
    d = fr_detokenize(t, ids, 6, false);
    CHECK_STR(d, "<|im_start|>a<|im_end|><tool_call>");
    free(d);
    fr_detok st = {0};
    fr_buf out = {0};
    for (int i = 0; i < 6; i++) fr_detok_push(t, &st, ids[i], true, &out);
    fr_detok_flush(&st, &out);
    CHECK_STR(fr_buf_cstr(&out), "a<tool_call>");
    fr_buf_free(&out);
    d = fr_detokenize(t, NULL, 0, false);
    CHECK_STR(d, "");
    free(d);
    fr_tokenizer_free(t);
}

TEST(invalid_utf8_input_is_an_error) {
    fr_tokenizer *t = load_fixture("qwen2-tiny");
    CHECK(t != NULL);
    if (!t) return;
    const char *bad[] = {"abc\xff", "\xE4\xB8", "\xC0\xAF", "\xED\xA0\x80", "ok \x80 no"};
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        fr_err e = {0};
        CHECK(fr_tokenize(t, bad[i], strlen(bad[i]), true, &ids, &n, &e) == -1);
        CHECK(ids == NULL && n == 0);
        CHECK(strstr(e.msg, "UTF-8") != NULL);
    }
    fr_tokenizer_free(t);
}

/* ---------------------------------------------------------------- corrupt files */

static char tmpdir[256];

static const char *tmp_dir(void) {
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/frugal-tok-XXXXXX");
        if (!mkdtemp(tmpdir)) tmpdir[0] = 0;
    }
    return tmpdir;
}

static char *write_tmp(const char *name, const void *data, size_t n) {
    char *p = fr_path_join(tmp_dir(), name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
    return p;
}

/* The qwen2 fixture as a cJSON tree to edit. */
static cJSON *qwen_tree(void) {
    char *p = fx_path("qwen2-tiny/tokenizer.json");
    char *txt = fr_read_file(p, 64u << 20, NULL, NULL);
    free(p);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    return j;
}

/* Writes `j` (consumed) as NAME and loads it; returns the tokenizer or NULL with *e set. */
static fr_tokenizer *load_tree(const char *name, cJSON *j, fr_err *e, char **path) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    *path = write_tmp(name, s, strlen(s));
    free(s);
    return fr_tokenizer_load_json(*path, e);
}

static void expect_load_error(const char *name, cJSON *j, const char *needle) {
    fr_err e = {0};
    char *path = NULL;
    fr_tokenizer *t = load_tree(name, j, &e, &path);
    if (t || !strstr(e.msg, path) || (needle && !strstr(e.msg, needle))) {
        fprintf(stderr, "  %s: expected an error naming the file%s%s, got: %s\n", name,
                needle ? " and " : "", needle ? needle : "", t ? "(loaded)" : e.msg);
        t_fail_cur++;
    }
    fr_tokenizer_free(t);
    unlink(path);
    free(path);
}

static cJSON *model_of(cJSON *j) { return cJSON_GetObjectItem(j, "model"); }

TEST(corrupt_files_give_errors_naming_the_file) {
    cJSON *j;
    /* raw-byte variants */
    char *p = fx_path("qwen2-tiny/tokenizer.json");
    size_t len = 0;
    char *txt = fr_read_file(p, 64u << 20, &len, NULL);
    free(p);
    CHECK(txt != NULL);
    if (!txt) return;
    static const struct {
        const char *name, *data, *needle;
    } raw[] = {
        {"notjson.json", "this is not json {", "JSON"},
        {"empty.json", "", "JSON"},
        {"array.json", "[1, 2, 3]", "object"},
        {"binary.json", "{\"model\": \"\xff\xfe\"}", "UTF-8"},
        {"nomodel.json", "{}", "model"},
        {"trailing.json", "{\"model\": {}} x", "trailing"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(raw); i++) {
        char *path = write_tmp(raw[i].name, raw[i].data, strlen(raw[i].data));
        fr_err e = {0};
        fr_tokenizer *t = fr_tokenizer_load_json(path, &e);
        if (t || !strstr(e.msg, path) || !strstr(e.msg, raw[i].needle)) {
            fprintf(stderr, "  %s: got %s\n", raw[i].name, t ? "(loaded)" : e.msg);
            t_fail_cur++;
        }
        fr_tokenizer_free(t);
        unlink(path);
        free(path);
    }
    /* truncated at several points */
    for (int k = 1; k < 8; k++) {
        char *path = write_tmp("truncated.json", txt, len * (size_t)k / 8);
        fr_err e = {0};
        fr_tokenizer *t = fr_tokenizer_load_json(path, &e);
        CHECK(t == NULL && strstr(e.msg, path));
        fr_tokenizer_free(t);
        unlink(path);
        free(path);
    }
    free(txt);
    /* missing file */
    {
        fr_err e = {0};
        char *path = fr_path_join(tmp_dir(), "does-not-exist.json");
        CHECK(fr_tokenizer_load_json(path, &e) == NULL && strstr(e.msg, path));
        free(path);
    }
    /* structural variants */
    j = qwen_tree();
    cJSON_ReplaceItemInObject(model_of(j), "type", cJSON_CreateString("WordPiece"));
    expect_load_error("wordpiece.json", j, "WordPiece");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(model_of(j), "merges", cJSON_CreateNumber(42));
    expect_load_error("merges-number.json", j, "merges");

    j = qwen_tree();
    cJSON_AddItemToArray(cJSON_GetObjectItem(model_of(j), "merges"), cJSON_CreateNumber(1));
    expect_load_error("merges-item.json", j, "merges");

    j = qwen_tree();
    cJSON_AddItemToArray(cJSON_GetObjectItem(model_of(j), "merges"), cJSON_CreateString("a b c"));
    expect_load_error("merges-3.json", j, "merges");

    j = qwen_tree();
    cJSON_AddItemToArray(cJSON_GetObjectItem(model_of(j), "merges"),
                         cJSON_CreateString("zzzq yyyq"));
    expect_load_error("merges-unknown.json", j, "not in the vocab");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(model_of(j), "vocab", cJSON_CreateString("oops"));
    expect_load_error("vocab-string.json", j, "vocab");

    j = qwen_tree();
    cJSON_AddItemToObject(cJSON_GetObjectItem(model_of(j), "vocab"), "zzz",
                          cJSON_CreateNumber(99999999));
    expect_load_error("vocab-range.json", j, "vocab");

    j = qwen_tree();
    cJSON_AddItemToObject(cJSON_GetObjectItem(model_of(j), "vocab"), "zzz", cJSON_CreateNumber(-1));
    expect_load_error("vocab-negative.json", j, "vocab");

    j = qwen_tree();
    cJSON_AddItemToObject(cJSON_GetObjectItem(model_of(j), "vocab"), "zzz", cJSON_CreateNumber(1.5));
    expect_load_error("vocab-fraction.json", j, "vocab");

    j = qwen_tree();
    cJSON_AddItemToObject(cJSON_GetObjectItem(model_of(j), "vocab"), "zzz", cJSON_CreateNumber(17));
    expect_load_error("vocab-dup-id.json", j, "17");

    j = qwen_tree();
    cJSON_AddItemToObject(cJSON_GetObjectItem(model_of(j), "vocab"), "zzz", cJSON_CreateString("1"));
    expect_load_error("vocab-id-string.json", j, "vocab");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(model_of(j), "byte_fallback", cJSON_CreateTrue());
    expect_load_error("byte-fallback.json", j, "byte_fallback");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(model_of(j), "ignore_merges", cJSON_CreateString("yes"));
    expect_load_error("ignore-merges-type.json", j, "ignore_merges");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "normalizer", cJSON_Parse("{\"type\":\"Lowercase\"}"));
    expect_load_error("normalizer.json", j, "Lowercase");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "normalizer",
                              cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
                                          "{\"type\":\"NFKC\"}]}"));
    expect_load_error("normalizer-seq.json", j, "NFKC");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", cJSON_Parse("{\"type\":\"Whitespace\"}"));
    expect_load_error("pretok.json", j, "Whitespace");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", cJSON_CreateNull());
    expect_load_error("pretok-null.json", j, "pre_tokenizer");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "pre_tokenizer"),
                                               "pretokenizers"), 0),
        "behavior", cJSON_CreateString("Removed"));
    expect_load_error("split-removed.json", j, "Removed");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                                                   cJSON_GetObjectItem(j, "pre_tokenizer"),
                                                   "pretokenizers"), 0), "pattern"),
        "Regex", cJSON_CreateString("(unclosed"));
    expect_load_error("bad-regex.json", j, "regex");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "decoder", cJSON_Parse("{\"type\":\"WordPiece\"}"));
    expect_load_error("decoder.json", j, "decoder");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(j, "post_processor", cJSON_Parse("{\"type\":\"RobertaProcessing\"}"));
    expect_load_error("post.json", j, "RobertaProcessing");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0),
                              "content", cJSON_CreateNumber(5));
    expect_load_error("added-content.json", j, "added_tokens[0]");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0), "id",
                              cJSON_CreateNumber(1e300));
    expect_load_error("added-huge-id.json", j, "added_tokens[0]");

    j = qwen_tree();
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0), "id",
                              cJSON_CreateNumber(3999999));
    expect_load_error("added-big-id.json", j, "sparse"); /* in range, but a mostly empty vocab */

    /* huge numbers written literally */
    {
        const char *s = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e999},\"merges\":[]}}";
        char *path = write_tmp("huge.json", s, strlen(s));
        fr_err e = {0};
        fr_tokenizer *t = fr_tokenizer_load_json(path, &e);
        CHECK(t == NULL && strstr(e.msg, path));
        fr_tokenizer_free(t);
        unlink(path);
        free(path);
        s = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":123456789012345678901234567890},"
            "\"merges\":[]}}";
        path = write_tmp("huge2.json", s, strlen(s));
        t = fr_tokenizer_load_json(path, &e);
        CHECK(t == NULL && strstr(e.msg, path));
        fr_tokenizer_free(t);
        unlink(path);
        free(path);
    }
    rmdir(tmp_dir());
}

/* ---------------------------------------------------------------- added-token options */

static fr_tokenizer *qwen_with(void (*edit)(cJSON *j)) {
    cJSON *j = qwen_tree();
    if (!j) return NULL;
    edit(j);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_from_json("edited.json", s, strlen(s), &e);
    if (!t) fprintf(stderr, "  %s\n", e.msg);
    free(s);
    return t;
}

static cJSON *added_item(cJSON *j, int i) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), i);
}

static void edit_strip(cJSON *j) {
    cJSON_ReplaceItemInObject(added_item(j, 2), "lstrip", cJSON_CreateTrue()); /* <|im_end|> */
    cJSON_ReplaceItemInObject(added_item(j, 1), "rstrip", cJSON_CreateTrue()); /* <|im_start|> */
    cJSON_ReplaceItemInObject(added_item(j, 3), "single_word", cJSON_CreateTrue()); /* <tool_call> */
}

static void edit_normalized(cJSON *j) {
    cJSON *a = cJSON_Parse("{\"id\":4005,\"content\":\"\xC3\xA9\",\"single_word\":false,"
                           "\"lstrip\":false,\"rstrip\":false,\"normalized\":true,"
                           "\"special\":false}");
    cJSON_AddItemToArray(cJSON_GetObjectItem(j, "added_tokens"), a);
}

/* ids of a + [mid] + b, each encoded on its own */
static bool ids_concat_equal(const fr_tokenizer *t, const int32_t *got, size_t ng, const char *a,
                             int mid, const char *b) {
    int32_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    if (enc(t, a, strlen(a), false, &x, &nx) || enc(t, b, strlen(b), false, &y, &ny)) return false;
    bool ok = ng == nx + 1 + ny && !memcmp(got, x, nx * sizeof *x) && got[nx] == mid &&
              !memcmp(got + nx + 1, y, ny * sizeof *y);
    if (!ok) {
        print_ids("got", got, ng);
        print_ids("a", x, nx);
        print_ids("b", y, ny);
    }
    free(x);
    free(y);
    return ok;
}

TEST(added_token_lstrip_rstrip_single_word) {
    fr_tokenizer *t = qwen_with(edit_strip);
    fr_tokenizer *plain = load_fixture("qwen2-tiny");
    CHECK(t && plain);
    if (!t || !plain) {
        fr_tokenizer_free(t);
        fr_tokenizer_free(plain);
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    const char *s = "a \t <|im_end|>  b";
    CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
    CHECK(ids_concat_equal(t, ids, n, "a", 4002, "  b")); /* lstrip only */
    free(ids);
    CHECK(enc(plain, s, strlen(s), false, &ids, &n) == 0);
    CHECK(ids_concat_equal(plain, ids, n, "a \t ", 4002, "  b"));
    free(ids);
    s = "x <|im_start|> \n y";
    CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
    CHECK(ids_concat_equal(t, ids, n, "x ", 4001, "y")); /* rstrip only */
    free(ids);
    /* single_word: not matched inside a word */
    s = "x<tool_call>y";
    CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
    bool has = false;
    for (size_t i = 0; i < n; i++) has |= ids[i] == 4003;
    CHECK(!has);
    free(ids);
    s = "x <tool_call> y";
    CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
    CHECK(ids_concat_equal(t, ids, n, "x ", 4003, " y"));
    free(ids);
    fr_tokenizer_free(t);
    fr_tokenizer_free(plain);
}

TEST(added_token_normalized_matches_after_nfc) {
    fr_tokenizer *t = qwen_with(edit_normalized);
    CHECK(t != NULL);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 0;
    const char *s = "cafe\xCC\x81"; /* e + combining acute: NFC gives U+00E9 */
    CHECK(enc(t, s, strlen(s), false, &ids, &n) == 0);
    CHECK(n >= 2 && ids[n - 1] == 4005);
    free(ids);
    fr_tokenizer_free(t);
}

static void edit_odd_added(cJSON *j) {
    static const char *const items[] = {
        "{\"id\":4005,\"content\":\"\xC4\xA0hi\",\"special\":false,\"normalized\":false}",
        "{\"id\":4006,\"content\":\"<tool call>\",\"special\":false,\"normalized\":false}",
        "{\"id\":4007,\"content\":\"\xC3\xA9!\",\"special\":true,\"normalized\":false}"};
    for (size_t i = 0; i < FR_ARRAY_LEN(items); i++)
        cJSON_AddItemToArray(cJSON_GetObjectItem(j, "added_tokens"), cJSON_Parse(items[i]));
}

/* HF's decode() hands added tokens' content to the ByteLevel decoder like any token: content
 * made only of ByteLevel characters is mapped back to bytes, anything else is kept as is. */
TEST(added_token_decoding_follows_bytelevel) {
    fr_tokenizer *t = qwen_with(edit_odd_added);
    CHECK(t != NULL);
    if (!t) return;
    int32_t a[] = {4005}, b[] = {4006}, c[] = {4007};
    char *d = fr_detokenize(t, a, 1, false);
    CHECK_STR(d, " hi"); /* "\xC4\xA0" is the ByteLevel character of ' ' */
    free(d);
    d = fr_detokenize(t, b, 1, false);
    CHECK_STR(d, "<tool call>"); /* ' ' is not a ByteLevel character: kept as is */
    free(d);
    d = fr_detokenize(t, c, 1, false);
    CHECK_STR(d, "\xEF\xBF\xBD!"); /* U+00E9 maps to byte 0xE9: invalid alone */
    free(d);
    CHECK_STR(fr_tokenizer_token_str(t, 4005), "\xC4\xA0hi");
    CHECK_STR(fr_tokenizer_token_str(t, 4007), "\xC3\xA9!");
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(enc(t, "x<tool call>y", 13, false, &ids, &n) == 0);
    CHECK(n == 3 && ids[1] == 4006);
    free(ids);
    fr_tokenizer_free(t);
}

/* ---------------------------------------------------------------- other pre-tokenizers */

static void edit_bare_bytelevel(cJSON *j) {
    cJSON_ReplaceItemInObject(j, "pre_tokenizer",
                              cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                                          "\"trim_offsets\":true,\"use_regex\":true}"));
    cJSON_ReplaceItemInObject(j, "normalizer", cJSON_CreateNull());
}

static void edit_prefix_space(cJSON *j) {
    cJSON_ReplaceItemInObject(j, "pre_tokenizer",
                              cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                                          "\"use_regex\":true}"));
}

static void edit_string_split(cJSON *j) {
    cJSON_ReplaceItemInObject(j, "pre_tokenizer",
                              cJSON_Parse("{\"type\":\"Sequence\",\"pretokenizers\":["
                                          "{\"type\":\"Split\",\"pattern\":{\"String\":\"::\"},"
                                          "\"behavior\":\"Isolated\",\"invert\":false},"
                                          "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                                          "\"use_regex\":false}]}"));
    cJSON_AddItemToObject(cJSON_GetObjectItem(j, "model"), "merges_extra", cJSON_CreateNull());
}

TEST(gpt2_bytelevel_and_string_split) {
    fr_tokenizer *q = load_fixture("qwen2-tiny");
    fr_tokenizer *g = qwen_with(edit_bare_bytelevel);
    fr_tokenizer *p = qwen_with(edit_prefix_space);
    fr_tokenizer *s = qwen_with(edit_string_split);
    CHECK(q && g && p && s);
    if (q && g && p && s) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        /* the GPT-2 and Qwen2 regexes cut this text the same way */
        const char *txt = "Hello world, how are you?";
        CHECK(enc(q, txt, strlen(txt), true, &a, &na) == 0);
        CHECK(enc(g, txt, strlen(txt), true, &b, &nb) == 0);
        CHECK(na == nb && !memcmp(a, b, na * sizeof *a));
        free(b);
        /* add_prefix_space: " Hello" first */
        CHECK(enc(p, txt, strlen(txt), true, &b, &nb) == 0);
        int32_t *c = NULL;
        size_t nc = 0;
        CHECK(enc(q, " Hello", 6, true, &c, &nc) == 0);
        CHECK(nb >= nc && !memcmp(b, c, nc * sizeof *c));
        free(c);
        free(b);
        free(a);
        /* they differ where the regexes differ: GPT-2 keeps digits together */
        CHECK(enc(q, "12345", 5, true, &a, &na) == 0);
        CHECK(enc(g, "12345", 5, true, &b, &nb) == 0);
        CHECK(na == 5);
        char *d = fr_detokenize(g, b, nb, false);
        CHECK_STR(d, "12345");
        free(d);
        free(a);
        free(b);
        /* a literal split pattern: "a::b" -> "a", "::", "b" with no other split */
        CHECK(enc(s, "ab cd::ef", 9, true, &a, &na) == 0);
        d = fr_detokenize(s, a, na, false);
        CHECK_STR(d, "ab cd::ef");
        free(d);
        free(a);
    }
    fr_tokenizer_free(q);
    fr_tokenizer_free(g);
    fr_tokenizer_free(p);
    fr_tokenizer_free(s);
}

/* ---------------------------------------------------------------- white-box: splitters, NFC */

static uint64_t rng_state = 0x12345678ABCDEFull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* Pieces random text is made of: letters, digits, every kind of whitespace the regexes treat
 * specially, contractions (also with U+017F), punctuation, CJK, emoji, combining marks, Hangul
 * syllables and jamo, added-token fragments. */
static const char *const rnd_pieces[] = {
    "a", "Z", "k", "e", "x", "1", "7", "0", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v",
    "\f", "\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xE2\x80\xA9",
    "\xE1\x9A\x80", "\xE1\xA0\x8E", "\xE2\x80\x8B", "\xE2\x80\xAF", "'", "'s", "'S", "'t",
    "'re", "'RE", "'ve", "'m", "'ll", "'Ll", "'d", "'\xC5\xBF", "'x", "!", "?", ".", ",", "$", "(",
    ")", "-", "_", "<", ">", "|", "\\", "\"", "\xE4\xB8\xAD", "\xE6\x96\x87", "\xEF\xBC\x8C",
    "\xE3\x80\x82", "\xE3\x81\x82", "\xF0\x9F\x98\x80", "\xF0\x9F\x8F\xBD", "\xE2\x9D\xA4",
    "\xEF\xB8\x8F", "\xE2\x80\x8D", "\xCC\x81", "\xCC\x88", "\xCD\x85", "\xE3\x82\x99",
    "\xEA\xB0\x80", "\xEC\x84\xB8", "\xE1\x84\x80", "\xE1\x85\xA1", "\xE1\x86\xA8",
    "\xC3\xA9", "\xC3\x85", "\xE2\x84\xAB", "\xCE\xA9", "\xD0\x96", "\xD8\xB9", "\xD9\x8E",
    "\xE0\xA4\x95", "\xE0\xA4\xBF", "\xEF\xBC\xA1", "\xEF\xBC\x91", "\xE2\x85\xA7",
    "\xC2\xB2", "\xE1\xB8\x9B", "\x01", "\x7F", "<|im_end|>", "<|eot_id|>", "<tool_call>"};

static size_t rnd_text(char *buf, size_t cap) {
    size_t n = 0, len = 1 + rng() % 60;
    for (size_t k = 0; k < len; k++) {
        const char *p = rnd_pieces[rng() % FR_ARRAY_LEN(rnd_pieces)];
        size_t l = strlen(p);
        if (n + l >= cap) break;
        memcpy(buf + n, p, l);
        n += l;
    }
    return n;
}

/* Encodes random text with `fast` (hand-written splitters) and `slow` (the same tokenizer forced
 * onto PCRE2); the ids must agree. */
static void check_fast_vs_pcre(fr_tokenizer *fast, fr_tokenizer *slow, int expect_kind) {
    CHECK_EQ_INT(fast->stages[0].fast, expect_kind);
    for (int i = 0; i < slow->n_stages; i++) slow->stages[i].fast = FR_SPLIT_REGEX;
    char buf[512];
    int bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = rnd_text(buf, sizeof buf);
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (enc(fast, buf, n, true, &a, &na) || enc(slow, buf, n, true, &b, &nb) || na != nb ||
            memcmp(a, b, na * sizeof *a)) {
            if (bad++ < 3) {
                fprintf(stderr, "  splitter %d differs from PCRE2 on [%.*s]\n", expect_kind, (int)n,
                        buf);
                print_ids("fast", a, na);
                print_ids("pcre", b, nb);
            }
        }
        free(a);
        free(b);
    }
    CHECK_EQ_INT(bad, 0);
}

static void edit_gpt2_split(cJSON *j) {
    cJSON *pat = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "pre_tokenizer"),
                                               "pretokenizers"), 0), "pattern");
    cJSON_ReplaceItemInObject(pat, "Regex", cJSON_CreateString(fr_tok_gpt2_regex()));
}

TEST(known_regex_splitters_match_pcre2) {
    fr_tokenizer *q[2] = {load_fixture("qwen2-tiny"), load_fixture("qwen2-tiny")};
    fr_tokenizer *l[2] = {load_fixture("llama-tiny"), load_fixture("llama-tiny")};
    fr_tokenizer *g[2] = {qwen_with(edit_gpt2_split), qwen_with(edit_gpt2_split)};
    fr_tokenizer *b[2] = {qwen_with(edit_bare_bytelevel), qwen_with(edit_bare_bytelevel)};
    CHECK(q[0] && q[1] && l[0] && l[1] && g[0] && g[1] && b[0] && b[1]);
    if (q[0] && q[1] && l[0] && l[1] && g[0] && g[1] && b[0] && b[1]) {
        check_fast_vs_pcre(q[0], q[1], FR_SPLIT_QWEN2);
        check_fast_vs_pcre(l[0], l[1], FR_SPLIT_LLAMA3);
        check_fast_vs_pcre(g[0], g[1], FR_SPLIT_GPT2);
        check_fast_vs_pcre(b[0], b[1], FR_SPLIT_GPT2);
    }
    for (int i = 0; i < 2; i++) {
        fr_tokenizer_free(q[i]);
        fr_tokenizer_free(l[i]);
        fr_tokenizer_free(g[i]);
        fr_tokenizer_free(b[i]);
    }
}

TEST(fast_utf8_validation_matches_base) {
    /* random byte strings biased towards UTF-8 structure, compared with base's validator */
    uint8_t buf[64];
    int bad = 0;
    static const uint8_t bytes[] = {'a', ' ', 0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                    0xE0, 0xA0, 0xED, 0x9F, 0xEF, 0xF0, 0x90, 0xF4, 0x8F, 0xF5,
                                    0xFF, 0xBD, 0x9F, 0x98};
    for (int it = 0; it < 200000; it++) {
        size_t n = rng() % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (rng() & 1) ? 'x' : bytes[rng() % sizeof bytes];
        if (fr_tok_utf8_valid((const char *)buf, n) != fr_utf8_valid((const char *)buf, n)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

TEST(segmented_nfc_matches_utf8proc) {
    char buf[512];
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        size_t n = rnd_text(buf, sizeof buf), m = 0;
        utf8proc_uint8_t *want = NULL;
        utf8proc_ssize_t wn = utf8proc_map((const utf8proc_uint8_t *)buf, (utf8proc_ssize_t)n,
                                           &want, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        char *got = fr_tok_nfc(buf, n, &m);
        const char *g = got ? got : buf;
        size_t gn = got ? m : n;
        if (wn < 0 || (size_t)wn != gn || memcmp(g, want, gn)) {
            if (bad++ < 3) fprintf(stderr, "  NFC differs on [%.*s]\n", (int)n, buf);
        }
        free(want);
        free(got);
    }
    CHECK_EQ_INT(bad, 0);
    /* Hangul LV + T composes (an algorithmic composition) */
    size_t m = 0;
    char *c = fr_tok_nfc("\xEC\x84\xB8\xE1\x86\xA8", 6, &m);
    CHECK(c && m == 3 && !memcmp(c, "\xEC\x84\xB9", 3));
    free(c);
}

/* ---------------------------------------------------------------- long inputs, speed, threads */

/* Encodes then decodes; the text must come back (after NFC for qwen2, which this text does not
 * change). Returns seconds taken by the encode. */
static double roundtrip(const fr_tokenizer *t, const char *s, size_t n, const char *label) {
    int32_t *ids = NULL;
    size_t m = 0;
    double t0 = fr_time_s();
    int rc = enc(t, s, n, false, &ids, &m);
    double dt = fr_time_s() - t0;
    CHECK(rc == 0);
    if (rc) return dt;
    char *d = fr_detokenize(t, ids, m, false);
    if (strlen(d) != n || memcmp(d, s, n)) {
        fprintf(stderr, "  %s: round trip differs\n", label);
        t_fail_cur++;
    }
    free(d);
    free(ids);
    if (dt > 5.0) {
        fprintf(stderr, "  %s: encoding %zu bytes took %.2f s\n", label, n, dt);
        t_fail_cur++;
    }
    return dt;
}

TEST(long_inputs_are_fast) {
    fr_tokenizer *ts[2] = {load_fixture("qwen2-tiny"), load_fixture("llama-tiny")};
    CHECK(ts[0] && ts[1]);
    if (!ts[0] || !ts[1]) {
        fr_tokenizer_free(ts[0]);
        fr_tokenizer_free(ts[1]);
        return;
    }
    const size_t N = 100 * 1024;
    char *buf = fr_xmalloc(N + 8);
    static const char *const pieces[] = {"a", " ", "1", "\n", "\xe4\xb8\xad", "!", "'s", "\t",
                                         "\xF0\x9F\x98\x80", " x", "\r\n", "<|im_end|>", "<",
                                         "\xC3\xA9"};
    const char *labels[] = {"100KB 'a'", "100KB spaces", "100KB digits", "100KB newlines",
                            "100KB CJK", "100KB '!'", "100KB random mix", "100KB space/letter",
                            "100KB spaces then letter"};
    for (int kind = 0; kind < 9; kind++) {
        size_t n = 0;
        while (n < N) {
            const char *p;
            switch (kind) {
            case 0: p = "a"; break;
            case 1: p = " "; break;
            case 2: p = "1"; break;
            case 3: p = "\n"; break;
            case 4: p = "\xe4\xb8\xad"; break;
            case 5: p = "!"; break;
            case 6: p = pieces[rng() % FR_ARRAY_LEN(pieces)]; break;
            case 7: p = (n / 2) % 2 ? " " : "b"; break;
            default: p = n + 1 < N ? " " : "z"; break;
            }
            size_t l = strlen(p);
            memcpy(buf + n, p, l);
            n += l;
        }
        for (int k = 0; k < 2; k++) {
            char lab[96];
            snprintf(lab, sizeof lab, "%s (%s)", labels[kind], k ? "llama" : "qwen2");
            double dt = roundtrip(ts[k], buf, n, lab);
            if (k == 0 && getenv("FRUGAL_TOK_VERBOSE")) printf("  %s: %.3f s\n", lab, dt);
        }
    }
    free(buf);
    fr_tokenizer_free(ts[0]);
    fr_tokenizer_free(ts[1]);
}

TEST(throughput_corpus) {
    fr_tokenizer *ts[2] = {load_fixture("qwen2-tiny"), load_fixture("llama-tiny")};
    const char *names[2] = {"qwen2", "llama"};
    const char *files[2] = {"corpus-en.txt", "corpus-zh.txt"};
    CHECK(ts[0] && ts[1]);
    for (int f = 0; f < 2 && ts[0] && ts[1]; f++) {
        char *p = fx_path(files[f]);
        size_t len = 0;
        char *txt = fr_read_file(p, 64u << 20, &len, NULL);
        free(p);
        CHECK(txt != NULL);
        if (!txt) continue;
        for (int k = 0; k < 2; k++) {
            int reps = f == 0 ? 3 : 200;
            double best = 1e9;
            size_t n = 0;
            for (int r = 0; r < reps; r++) {
                int32_t *ids = NULL;
                double t0 = fr_time_s();
                CHECK(enc(ts[k], txt, len, true, &ids, &n) == 0);
                best = FR_MIN(best, fr_time_s() - t0);
                free(ids);
            }
            printf("  encode %s with %s: %.1f MB/s (%zu bytes -> %zu tokens)\n", files[f],
                   names[k], (double)len / best / 1e6, len, n);
        }
        free(txt);
    }
    fr_tokenizer_free(ts[0]);
    fr_tokenizer_free(ts[1]);
}

typedef struct thr_arg {
    const fr_tokenizer *t; /* shared tokenizer */
    const char *txt;       /* shared text */
    size_t len;
    int32_t *ids;          /* result */
    size_t n;
    int rc;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    fr_err e;
    for (int i = 0; i < 3; i++) {
        free(a->ids);
        a->rc |= fr_tokenize(a->t, a->txt, a->len, true, &a->ids, &a->n, &e);
    }
    return NULL;
}

TEST(shared_between_threads) {
    fr_tokenizer *t = load_fixture("qwen2-tiny");
    char *p = fx_path("corpus-zh.txt");
    size_t len = 0;
    char *txt = fr_read_file(p, 64u << 20, &len, NULL);
    free(p);
    CHECK(t && txt);
    if (t && txt) {
        int32_t *ref = NULL;
        size_t nref = 0;
        CHECK(enc(t, txt, len, true, &ref, &nref) == 0);
        thr_arg a[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (thr_arg){t, txt, len, NULL, 0, 0};
            pthread_create(&th[i], NULL, thr_main, &a[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK(a[i].rc == 0 && a[i].n == nref && !memcmp(a[i].ids, ref, nref * sizeof *ref));
            free(a[i].ids);
        }
        free(ref);
    }
    free(txt);
    fr_tokenizer_free(t);
}

int main(void) { return t_main(); }
