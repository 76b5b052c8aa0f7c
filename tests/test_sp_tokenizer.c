/* test_sp_tokenizer.c — SentencePiece-style tokenizers (Llama 2, Mistral, Gemma shapes; Unigram)
 * against HF tokenizers and sentencepiece, from tokenizer.json and from GGUF.
 *
 * Design: tests/fixtures/sp/ is made by scripts/make_sp_fixtures.py on a host with HF
 * `tokenizers` (and `transformers`, `sentencepiece`). Each folder holds tokenizer.json and
 * expect.json: per fixture string the HF ids (add_special_tokens False and True) and HF's decodes
 * (skip_special_tokens False and True); spm/ holds a real SentencePiece BPE model's pieces,
 * scores and types (vocab.json) and sentencepiece's own ids. Every test fails when its fixture
 * is missing. The GGUF tests write a GGUF whose tokenizer is `llama` (the pieces with scores and
 * types) over llama-tiny-f16.gguf's weights, check it with tests/gguf_spec.c (the GGUF
 * specification and llama.cpp's loader rules, no code shared with src/model) and load it with the
 * model loader, so the same code as for a downloaded Llama-2 GGUF runs; its ids must equal
 * sentencepiece's.
 */
#include "t.h"

#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "frugal.h"

#include "base/base.h"
#include "model/chat.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/tok_internal.h"
#include "model/tokenizer.h"

/* ---------------------------------------------------------------- helpers */

static cJSON *sp_json(const char *dir, const char *file) {
    char rel[256];
    snprintf(rel, sizeof rel, "sp/%s/%s", dir, file);
    char *p = fr_path_join(t_fixtures(), rel);
    fr_err e = {0};
    size_t n = 0;
    char *txt = fr_read_file(p, 64u << 20, &n, &e);
    cJSON *j = txt ? cJSON_ParseWithLength(txt, n) : NULL;
    if (!j) fprintf(stderr, "  missing or bad fixture %s (run scripts/make_sp_fixtures.py)\n", p);
    free(txt);
    free(p);
    return j;
}

static fr_tokenizer *sp_load(const char *dir) {
    char rel[256];
    snprintf(rel, sizeof rel, "sp/%s/tokenizer.json", dir);
    char *p = fr_path_join(t_fixtures(), rel);
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_load_json(p, &e);
    if (!t) fprintf(stderr, "  %s: %s\n", p, e.msg);
    free(p);
    return t;
}

/* ids of a JSON array; *n its length. */
static int32_t *json_ids(const cJSON *a, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(a);
    int32_t *v = fr_xmalloc((*n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *x = a ? a->child : NULL; x; x = x->next) v[i++] = (int32_t)x->valueint;
    return v;
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, "%s\n", n > 40 ? " ..." : "");
}

/* Tokenizes `text` and compares with the ids in `want`; prints the first differences. */
static bool ids_match(const fr_tokenizer *t, const char *text, bool special, const cJSON *want,
                      int *shown) {
    int32_t *ids = NULL;
    size_t n = 0, nw = 0;
    fr_err e = {0};
    int rc = fr_tokenize(t, text, strlen(text), special, &ids, &n, &e);
    int32_t *w = json_ids(want, &nw);
    bool ok = rc == 0 && n == nw && (n == 0 || !memcmp(ids, w, n * sizeof *ids));
    if (!ok && (*shown)++ < 4) {
        fprintf(stderr, "  ids differ for [%s] (add_special %d)%s%s\n", text, special,
                rc ? ": " : "", rc ? e.msg : "");
        print_ids("got ", ids, n);
        print_ids("want", w, nw);
    }
    free(ids);
    free(w);
    return ok;
}

/* Decodes the ids in `ids` and compares with the string `want`; also the streaming decoder. */
static bool dec_match(const fr_tokenizer *t, const cJSON *ids, bool skip, const cJSON *want,
                      int *shown) {
    size_t n;
    int32_t *v = json_ids(ids, &n);
    char *got = fr_detokenize(t, v, n, skip);
    fr_detok d = {0};
    fr_buf s = {0};
    for (size_t i = 0; i < n; i++) fr_detok_push(t, &d, v[i], skip, &s);
    fr_detok_flush(&d, &s);
    fr_buf_puts(&s, "");
    bool ok = cJSON_IsString(want) && !strcmp(got, want->valuestring) && !strcmp(s.data, got);
    if (!ok && (*shown)++ < 4)
        fprintf(stderr, "  decode differs (skip %d):\n    got    [%s]\n    stream [%s]\n    want"
                "   [%s]\n", skip, got, s.data, cJSON_IsString(want) ? want->valuestring : "?");
    fr_buf_free(&s);
    free(got);
    free(v);
    return ok;
}

/* All fixture strings of dir's expect.json against tokenizer t: ids both ways and decodes. */
static void check_hf_cases(const char *dir, const fr_tokenizer *t) {
    cJSON *x = sp_json(dir, "expect.json");
    CHECK(x != NULL && t != NULL);
    if (!x || !t) {
        cJSON_Delete(x);
        return;
    }
    int bad = 0, n = 0, shown = 0;
    const cJSON *cases = cJSON_GetObjectItem(x, "cases");
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, n++) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        bool ok = ids_match(t, text, false, cJSON_GetObjectItem(c, "ids"), &shown);
        ok &= ids_match(t, text, true, cJSON_GetObjectItem(c, "ids_special"), &shown);
        ok &= dec_match(t, cJSON_GetObjectItem(c, "ids"), false,
                        cJSON_GetObjectItem(c, "decoded"), &shown);
        ok &= dec_match(t, cJSON_GetObjectItem(c, "ids_special"), false,
                        cJSON_GetObjectItem(c, "decoded_special"), &shown);
        ok &= dec_match(t, cJSON_GetObjectItem(c, "ids_special"), true,
                        cJSON_GetObjectItem(c, "decoded_skip"), &shown);
        bad += !ok;
    }
    if (bad) fprintf(stderr, "  %s: %d of %d fixture strings differ from HF\n", dir, bad, n);
    CHECK(n >= 40);
    CHECK_EQ_INT(bad, 0);
    cJSON_Delete(x);
}

static void check_dir(const char *dir) {
    fr_tokenizer *t = sp_load(dir);
    check_hf_cases(dir, t);
    fr_tokenizer_free(t);
}

/* What the fixture generator had: its "tool" versions (strings.json). */
static bool generator_had(const char *module) {
    char *p = fr_path_join(t_fixtures(), "sp/strings.json");
    fr_err e = {0};
    size_t n = 0;
    char *txt = fr_read_file(p, 1u << 20, &n, &e);
    cJSON *j = txt ? cJSON_ParseWithLength(txt, n) : NULL;
    bool had = cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tool"), module));
    if (!j) fprintf(stderr, "  missing fixture %s (run scripts/make_sp_fixtures.py)\n", p);
    CHECK(j != NULL);
    cJSON_Delete(j);
    free(txt);
    free(p);
    return had;
}

/* ---------------------------------------------------------------- tokenizer.json vs HF */

TEST(json_unigram_matches_hf) { check_dir("unigram"); }
TEST(json_bpe_llama2_shape_matches_hf) { check_dir("bpe-llama2"); }
TEST(json_bpe_metaspace_shape_matches_hf) { check_dir("bpe-metaspace"); }
TEST(json_bpe_gemma_shape_matches_hf) { check_dir("bpe-gemma"); }

/* tokenizer.json files that transformers converted from the SentencePiece model itself. */
TEST(json_transformers_conversions_match_hf) {
    if (!generator_had("transformers") || !generator_had("sentencepiece")) {
        fprintf(stderr, "  the fixture generator had no transformers/sentencepiece: not run\n");
        return;
    }
    check_dir("spm-llama");
    check_dir("spm-llama-nolegacy");
    check_dir("spm-gemma");
}

/* ---------------------------------------------------------------- GGUF llama */

typedef struct spm_vocab {
    cJSON *root;          /* vocab.json (owns the strings) */
    int n;                /* pieces */
    const char **tok;     /* piece strings */
    size_t *len;          /* their lengths */
    float *score;         /* scores */
    int32_t *type;        /* GGUF token types */
} spm_vocab;

static bool spm_vocab_load(spm_vocab *v) {
    memset(v, 0, sizeof *v);
    v->root = sp_json("spm", "vocab.json");
    const cJSON *pieces = cJSON_GetObjectItem(v->root, "pieces");
    v->n = cJSON_GetArraySize(pieces);
    if (v->n < 300) return false;
    v->tok = fr_xcalloc((size_t)v->n, sizeof *v->tok);
    v->len = fr_xcalloc((size_t)v->n, sizeof *v->len);
    v->score = fr_xcalloc((size_t)v->n, sizeof *v->score);
    v->type = fr_xcalloc((size_t)v->n, sizeof *v->type);
    int i = 0;
    for (const cJSON *p = pieces->child; p; p = p->next, i++) {
        v->tok[i] = p->child->valuestring;
        v->len[i] = strlen(v->tok[i]);
        v->score[i] = (float)p->child->next->valuedouble;
        v->type[i] = p->child->next->next->valueint;
    }
    return true;
}

static void spm_vocab_free(spm_vocab *v) {
    free(v->tok), free(v->len), free(v->score), free(v->type);
    cJSON_Delete(v->root);
}

/* ---- a GGUF with a `llama` tokenizer over llama-tiny-f16.gguf's weights ---- */

static void w_u32(fr_buf *b, uint32_t v) { fr_buf_append(b, &v, 4); }
static void w_u64(fr_buf *b, uint64_t v) { fr_buf_append(b, &v, 8); }
static void w_str(fr_buf *b, const char *s, size_t n) { w_u64(b, n), fr_buf_append(b, s, n); }
static void w_key(fr_buf *b, const char *k, uint32_t type) { w_str(b, k, strlen(k)), w_u32(b, type); }

/* The tokenizer keys: v's pieces, padded with unused "[PADi]" tokens to `rows` (llama.cpp wants
 * exactly one token per embedding row). Returns the key count. */
static int w_tokenizer_kv(fr_buf *b, const spm_vocab *v, int rows) {
    int n = FR_MAX(rows, v->n);
    char pad[32];
    w_key(b, "tokenizer.ggml.model", FR_GGUF_STR);
    w_str(b, "llama", 5);
    w_key(b, "tokenizer.ggml.tokens", FR_GGUF_ARR);
    w_u32(b, FR_GGUF_STR), w_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        if (i < v->n) w_str(b, v->tok[i], v->len[i]);
        else w_str(b, pad, (size_t)snprintf(pad, sizeof pad, "[PAD%d]", i));
    }
    w_key(b, "tokenizer.ggml.scores", FR_GGUF_ARR);
    w_u32(b, FR_GGUF_F32), w_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        float sc = i < v->n ? v->score[i] : 0.0f;
        fr_buf_append(b, &sc, 4);
    }
    w_key(b, "tokenizer.ggml.token_type", FR_GGUF_ARR);
    w_u32(b, FR_GGUF_I32), w_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        int32_t ty = i < v->n ? v->type[i] : 5;
        fr_buf_append(b, &ty, 4);
    }
    w_key(b, "tokenizer.ggml.bos_token_id", FR_GGUF_U32), w_u32(b, 1);
    w_key(b, "tokenizer.ggml.eos_token_id", FR_GGUF_U32), w_u32(b, 2);
    w_key(b, "tokenizer.ggml.unknown_token_id", FR_GGUF_U32), w_u32(b, 0);
    w_key(b, "tokenizer.ggml.add_bos_token", FR_GGUF_BOOL), fr_buf_append(b, "\1", 1);
    w_key(b, "tokenizer.ggml.add_eos_token", FR_GGUF_BOOL), fr_buf_append(b, "\0", 1);
    return 9;
}

/* The base file with its tokenizer.ggml.* keys replaced by v's (kv and tensor-info bytes are
 * copied as they are; the data section keeps its alignment). */
static uint8_t *gguf_with_spm(const fr_gguf *g, const spm_vocab *v, size_t *size) {
    fr_buf kv = {0}, out = {0};
    int64_t nkv = 0;
    const uint8_t *ti = (const uint8_t *)g->tensors[0].name.p - 8; /* infos follow the kvs */
    for (int64_t i = 0; i < g->n_kv; i++) {
        const fr_gguf_kv *k = &g->kv[i];
        const uint8_t *from = (const uint8_t *)k->key.p - 8;
        const uint8_t *to = i + 1 < g->n_kv ? (const uint8_t *)g->kv[i + 1].key.p - 8 : ti;
        if (k->key.n >= 14 && !memcmp(k->key.p, "tokenizer.ggml", 14)) continue;
        fr_buf_append(&kv, from, (size_t)(to - from));
        nkv++;
    }
    const fr_gguf_tensor *emb = fr_gguf_find_tensor(g, "token_embd.weight");
    nkv += w_tokenizer_kv(&kv, v, emb ? (int)emb->ne[1] : v->n);
    const fr_gguf_tensor *last = &g->tensors[g->n_tensors - 1];
    const uint8_t *ti_end = (const uint8_t *)last->name.p + last->name.n + 4 +
                            8 * (size_t)last->n_dims + 4 + 8;
    fr_buf_append(&out, "GGUF", 4);
    w_u32(&out, g->version), w_u64(&out, (uint64_t)g->n_tensors), w_u64(&out, (uint64_t)nkv);
    fr_buf_append(&out, kv.data, kv.len);
    fr_buf_append(&out, ti, (size_t)(ti_end - ti));
    while (out.len % g->alignment) fr_buf_append(&out, "", 1);
    fr_buf_append(&out, g->data + g->data_offset, g->size - g->data_offset);
    fr_buf_free(&kv);
    *size = out.len;
    return (uint8_t *)out.data;
}

/* A model whose GGUF tokenizer is spm/vocab.json's, loaded by the model loader. *buf owns the
 * file image (free after the model). */
int gguf_spec_check(const char *name, const uint8_t *data, size_t size, FILE *out);

static fr_model *spm_gguf_model(uint8_t **buf) {
    *buf = NULL;
    spm_vocab v;
    char *p = fr_path_join(t_fixtures(), "llama-tiny-f16.gguf");
    fr_err e = {0};
    size_t n = 0;
    char *base = fr_read_file(p, 64u << 20, &n, &e);
    free(p);
    fr_gguf g;
    fr_model *m = NULL;
    if (spm_vocab_load(&v) && base && fr_gguf_parse(&g, "base", (const uint8_t *)base, n, &e) == 0) {
        size_t sz = 0;
        *buf = gguf_with_spm(&g, &v, &sz);
        fr_gguf_free(&g);
        /* the independent checker (tests/gguf_spec.c) accepts it as llama.cpp would */
        CHECK_EQ_INT(gguf_spec_check("spm.gguf", *buf, sz, stderr), 0);
        const char *out = getenv("FRUGAL_SP_GGUF_OUT"); /* tests/cli_gguf.sh: for llama.cpp */
        FILE *f = out ? fopen(out, "wb") : NULL;
        if (out) CHECK(f && fwrite(*buf, 1, sz, f) == sz);
        if (f) fclose(f);
        m = fr_model_load_gguf_buffer(*buf, sz, "spm.gguf", &e);
        if (!m) fprintf(stderr, "  spm.gguf: %s\n", e.msg);
    }
    spm_vocab_free(&v);
    free(base);
    return m;
}

static bool has_special_text(const char *s) {
    return strstr(s, "<s>") || strstr(s, "</s>") || strstr(s, "<unk>");
}

/* sentencepiece's ids (sp_ids) and decode for every fixture string sentencepiece reads as plain
 * text (it does not match control tokens in the text; those strings are checked against HF's
 * Llama conversion in gguf_llama_control_tokens_split_out). */
TEST(gguf_llama_tokenizer_matches_sentencepiece) {
    uint8_t *buf;
    fr_model *m = spm_gguf_model(&buf);
    cJSON *x = sp_json("spm", "expect.json");
    CHECK(m != NULL && x != NULL);
    int bad = 0, n = 0, shown = 0;
    const cJSON *cases = cJSON_GetObjectItem(x, "cases");
    for (const cJSON *c = m && cases ? cases->child : NULL; c; c = c->next) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        if (has_special_text(text)) continue;
        n++;
        bool ok = ids_match(m->tok, text, false, cJSON_GetObjectItem(c, "sp_ids"), &shown);
        ok &= dec_match(m->tok, cJSON_GetObjectItem(c, "sp_ids"), false,
                        cJSON_GetObjectItem(c, "sp_decoded"), &shown);
        bad += !ok;
    }
    if (bad) fprintf(stderr, "  %d of %d strings differ from sentencepiece\n", bad, n);
    CHECK(n >= 40);
    CHECK_EQ_INT(bad, 0);
    if (m) { /* add_bos_token: one BOS in front, add_eos_token false: none behind */
        int32_t *ids;
        size_t k;
        fr_err e = {0};
        CHECK(fr_tokenize(m->tok, "Hello", 5, true, &ids, &k, &e) == 0);
        CHECK(k >= 2 && ids[0] == 1 && ids[1] != 1 && ids[k - 1] != 2);
        free(ids);
        CHECK_EQ_INT(m->hp.bos_id, 1);
        CHECK_STR(m->bos_token_str, "<s>");
    }
    cJSON_Delete(x);
    fr_model_free(m);
    free(buf);
}

/* Control tokens in the text are split out (llama.cpp's parse_special, HF's added tokens) and
 * the text after one gets the space prefix again, as HF's legacy Llama tokenizer.json does. */
TEST(gguf_llama_control_tokens_split_out) {
    uint8_t *buf;
    fr_model *m = spm_gguf_model(&buf);
    fr_tokenizer *hf = sp_load("bpe-llama2"); /* only for the shape of the expectation */
    CHECK(m != NULL && hf != NULL);
    if (m) {
        int32_t *a, *b;
        size_t na, nb;
        fr_err e = {0};
        const char *t1 = "text with<s>inside</s>it", *t2 = "text with";
        CHECK(fr_tokenize(m->tok, t1, strlen(t1), false, &a, &na, &e) == 0);
        CHECK(fr_tokenize(m->tok, t2, strlen(t2), false, &b, &nb, &e) == 0);
        CHECK(na > nb + 2 && !memcmp(a, b, nb * sizeof *a) && a[nb] == 1);
        size_t i = nb + 1;
        while (i < na && a[i] != 2) i++;
        CHECK(i < na); /* </s> found */
        free(a), free(b);
        CHECK(fr_tokenize(m->tok, "<unk>", 5, false, &a, &na, &e) == 0);
        CHECK(na == 1 && a[0] == 0);
        free(a);
        char *d = fr_detokenize(m->tok, (const int32_t[]){1, 0, 2}, 3, true);
        CHECK_STR(d, "");
        free(d);
    }
    fr_tokenizer_free(hf);
    fr_model_free(m);
    free(buf);
}

/* The GGUF path against HF's own conversion of the same model (transformers' LlamaTokenizer,
 * legacy): equal ids wherever the two rules agree, i.e. for text that does not start with a
 * space or U+2581 (HF's Metaspace then adds no U+2581, SentencePiece and llama.cpp do), control
 * tokens included. */
TEST(gguf_llama_tokenizer_matches_hf_conversion) {
    if (!generator_had("transformers")) {
        fprintf(stderr, "  the fixture generator had no transformers: not run\n");
        return;
    }
    uint8_t *buf;
    fr_model *m = spm_gguf_model(&buf);
    cJSON *x = sp_json("spm-llama", "expect.json");
    CHECK(m != NULL && x != NULL);
    int bad = 0, n = 0, shown = 0;
    const cJSON *cases = cJSON_GetObjectItem(x, "cases");
    for (const cJSON *c = m && cases ? cases->child : NULL; c; c = c->next) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        if (text[0] == ' ' || !strncmp(text, "\xE2\x96\x81", 3) || strstr(text, "> ")) continue;
        n++;
        bad += !ids_match(m->tok, text, true, cJSON_GetObjectItem(c, "ids_special"), &shown);
    }
    if (bad) fprintf(stderr, "  %d of %d strings differ from HF's conversion\n", bad, n);
    CHECK(n >= 35);
    CHECK_EQ_INT(bad, 0);
    cJSON_Delete(x);
    fr_model_free(m);
    free(buf);
}

/* The same pieces through fr_tokenizer_from_vocab directly, with add_space_prefix false: no
 * prefix and no stripped space. */
TEST(gguf_llama_no_space_prefix) {
    spm_vocab v;
    bool ok = spm_vocab_load(&v);
    CHECK(ok);
    if (ok) {
        fr_vocab_spec s = {0};
        s.n_tokens = v.n, s.tokens = v.tok, s.token_lens = v.len, s.token_types = v.type;
        s.scores = v.score, s.model = "llama", s.bos_id = 1, s.eos_id = 2, s.pad_id = -1;
        s.no_space_prefix = true;
        fr_err e = {0};
        fr_tokenizer *t = fr_tokenizer_from_vocab(&s, &e);
        CHECK(t != NULL);
        int32_t *ids;
        size_t n;
        if (t && fr_tokenize(t, " Hello world", 12, false, &ids, &n, &e) == 0) {
            char *d = fr_detokenize(t, ids, n, false);
            CHECK_STR(d, " Hello world");
            free(d);
            int32_t *ids2;
            size_t n2;
            CHECK(fr_tokenize(t, "Hello", 5, false, &ids2, &n2, &e) == 0);
            char *d2 = fr_detokenize(t, ids2, n2, false);
            CHECK_STR(d2, "Hello");
            CHECK(n2 > 0 && fr_token_data(t, ids2[0], &n) && n > 0);
            free(d2), free(ids2), free(ids);
        }
        fr_tokenizer_free(t);
    }
    spm_vocab_free(&v);
}

/* ---------------------------------------------------------------- chat, BOS */

/* The fixture's Llama-2 / Mistral templates render as transformers' apply_chat_template does,
 * and the rendered text tokenized (no add_special, as frugal does for chats) holds exactly one
 * BOS, the template's. */
static void check_chat(const char *dir) {
    cJSON *x = sp_json(dir, "expect.json"), *cfg = sp_json(dir, "tokenizer_config.json");
    fr_tokenizer *t = sp_load(dir);
    CHECK(x && cfg && t);
    const cJSON *tmpl = cJSON_GetObjectItem(cfg, "chat_template");
    const cJSON *chats = cJSON_GetObjectItem(x, "chat");
    int n = 0;
    for (const cJSON *c = chats && t && cJSON_IsString(tmpl) ? chats->child : NULL; c; c = c->next) {
        const cJSON *want = cJSON_GetObjectItem(c, "rendered");
        if (!cJSON_IsString(want)) continue; /* a conversation the template refuses */
        fr_chat_opts o = {false, "<s>", "</s>", NULL};
        fr_err e = {0};
        char *r = fr_chat_render(tmpl->valuestring, cJSON_GetObjectItem(c, "messages"), &o, &e);
        CHECK_STR(r, want->valuestring);
        int32_t *ids;
        size_t k, n_bos = 0;
        if (r && fr_tokenize(t, r, strlen(r), false, &ids, &k, &e) == 0) {
            for (size_t i = 0; i < k; i++) n_bos += ids[i] == 1;
            CHECK(k > 0 && ids[0] == 1);
            CHECK_EQ_INT(n_bos, strstr(r, "</s><s>") ? 2 : 1); /* one per user turn */
            free(ids);
        }
        free(r);
        n++;
    }
    CHECK(n >= 2);
    fr_tokenizer_free(t);
    cJSON_Delete(x);
    cJSON_Delete(cfg);
}

TEST(chat_llama2_template_renders_with_one_bos) { check_chat("bpe-llama2"); }
TEST(chat_mistral_template_renders_with_one_bos) { check_chat("bpe-metaspace"); }

/* Through the public API: an HF folder with llama-tiny's weights and the bpe-llama2 tokenizer
 * (tokenizer.json + tokenizer_config.json with the Llama-2 template): frugal_render_chat equals
 * transformers' rendering, frugal_tokenize_chat holds one BOS per user turn (the template's),
 * equals tokenizing the rendered text without add_special, and add_special = 1 prepends one more
 * BOS, as HF's Tokenizer.encode does. */
static bool link_into(const char *dir, const char *from_dir, const char *name) {
    char *src = fr_path_join(from_dir, name), *dst = fr_path_join(dir, name);
    char *abs = realpath(src, NULL);
    bool ok = abs && symlink(abs, dst) == 0;
    free(abs), free(src), free(dst);
    return ok;
}

static bool make_sp_folder(char *dir) {
    static const char *const w[] = {"config.json", "generation_config.json",
                                    "model.safetensors.index.json",
                                    "model-00001-of-00003.safetensors",
                                    "model-00002-of-00003.safetensors",
                                    "model-00003-of-00003.safetensors"};
    if (!mkdtemp(dir)) return false;
    char *tiny = fr_path_join(t_fixtures(), "llama-tiny"), *sp = fr_path_join(t_fixtures(), "sp/bpe-llama2");
    bool ok = true;
    for (size_t i = 0; i < FR_ARRAY_LEN(w); i++) ok &= link_into(dir, tiny, w[i]);
    ok &= link_into(dir, sp, "tokenizer.json") && link_into(dir, sp, "tokenizer_config.json");
    free(tiny), free(sp);
    return ok;
}

static void rm_folder(const char *dir) {
    static const char *const names[] = {"config.json", "generation_config.json",
        "model.safetensors.index.json", "model-00001-of-00003.safetensors",
        "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "tokenizer.json",
        "tokenizer_config.json"};
    for (size_t i = 0; i < FR_ARRAY_LEN(names); i++) {
        char *p = fr_path_join(dir, names[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

TEST(api_hf_folder_with_sentencepiece_tokenizer_one_bos) {
    char dir[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/frugal-sp-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    bool made = make_sp_folder(dir);
    CHECK(made);
    frugal_error err;
    frugal_model *m = made ? frugal_model_load(dir, frugal_model_default_params(), &err) : NULL;
    if (made && !m) fprintf(stderr, "  load: %s\n", err.message);
    cJSON *x = sp_json("bpe-llama2", "expect.json");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(x, "chat"), 1); /* two user turns */
    CHECK(m != NULL && c != NULL);
    if (m && c) {
        char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "messages"));
        char *text = frugal_render_chat(m, msgs, NULL, &err);
        CHECK_STR(text, cJSON_GetObjectItem(c, "rendered")->valuestring);
        int32_t *ids = NULL, *ids0 = NULL, *ids1 = NULL;
        size_t n = 0, n0 = 0, n1 = 0, n_bos = 0;
        CHECK_EQ_INT(frugal_tokenize_chat(m, msgs, NULL, &ids, &n, &err), FRUGAL_OK);
        for (size_t i = 0; i < n; i++) n_bos += ids[i] == 1;
        CHECK(n > 4 && ids[0] == 1 && ids[1] != 1);
        CHECK_EQ_INT(n_bos, 2);
        if (text) {
            CHECK_EQ_INT(frugal_tokenize(m, text, 0, &ids0, &n0, &err), FRUGAL_OK);
            CHECK(n0 == n && !memcmp(ids0, ids, n * sizeof *ids));
            CHECK_EQ_INT(frugal_tokenize(m, text, 1, &ids1, &n1, &err), FRUGAL_OK);
            CHECK(n1 == n + 1 && ids1[0] == 1 && !memcmp(ids1 + 1, ids, n * sizeof *ids));
        }
        frugal_free(ids), frugal_free(ids0), frugal_free(ids1), frugal_free(text);
        free(msgs);
    }
    cJSON_Delete(x);
    frugal_model_free(m);
    if (made) rm_folder(dir);
}

/* ---------------------------------------------------------------- long text */

/* corpus-en.txt (670 KB, one segment for the Llama-2 shape and GGUF) and corpus-zh.txt encode
 * and decode back to themselves with byte fallback; prints the encoding throughput. */
static void round_trip(const char *what, const fr_tokenizer *t, const char *corpus) {
    char *p = fr_path_join(t_fixtures(), corpus);
    fr_err e = {0};
    size_t n = 0;
    char *txt = fr_read_file(p, 8u << 20, &n, &e);
    free(p);
    CHECK(txt != NULL && t != NULL);
    if (!txt || !t) {
        free(txt);
        return;
    }
    int32_t *ids = NULL;
    size_t k = 0;
    double t0 = fr_time_s();
    CHECK(fr_tokenize(t, txt, n, false, &ids, &k, &e) == 0);
    double dt = fr_time_s() - t0;
    char *back = fr_detokenize(t, ids, k, false);
    CHECK(back && strlen(back) == n && !memcmp(back, txt, n));
    fprintf(stderr, "  encode %s with %s: %.1f MB/s (%zu bytes -> %zu tokens)\n", corpus, what,
            (double)n / 1e6 / (dt > 0 ? dt : 1e-9), n, k);
    free(back);
    free(ids);
    free(txt);
}

TEST(long_text_round_trips) {
    fr_tokenizer *a = sp_load("bpe-llama2"), *b = sp_load("bpe-gemma");
    uint8_t *buf;
    fr_model *m = spm_gguf_model(&buf);
    CHECK(m != NULL);
    const char *corp[] = {"corpus-en.txt", "corpus-zh.txt"};
    for (int i = 0; i < 2; i++) {
        round_trip("bpe-llama2", a, corp[i]);
        round_trip("bpe-gemma", b, corp[i]);
        if (m) round_trip("gguf llama", m->tok, corp[i]);
    }
    fr_tokenizer_free(a);
    fr_tokenizer_free(b);
    fr_model_free(m);
    free(buf);
}

/* ---------------------------------------------------------------- errors */

static void json_err(const char *json, const char *want) {
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_from_json("t.json", json, strlen(json), &e);
    CHECK(t == NULL);
    if (!t && !strstr(e.msg, want)) fprintf(stderr, "  message [%s] lacks [%s]\n", e.msg, want);
    CHECK(t == NULL && strstr(e.msg, want) != NULL);
    fr_tokenizer_free(t);
}

#define SPJ(model, norm, pre, dec)                                                             \
    "{\"model\":" model ",\"normalizer\":" norm ",\"pre_tokenizer\":" pre ",\"decoder\":" dec "}"
#define UNI "{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],[\"\\u2581a\",-1]]}"
#define MSP "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"always\"}"

TEST(sp_json_errors_name_the_construct) {
    json_err(SPJ(UNI, "null", MSP, "null"), "decoder is null");
    json_err(SPJ(UNI, "{\"type\":\"Precompiled\"}", MSP, MSP), "Precompiled");
    json_err(SPJ(UNI, "null", "{\"type\":\"Metaspace\",\"replacement\":\"_\"}", MSP),
             "replacement");
    json_err(SPJ(UNI, "null", MSP, "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}"),
             "Strip");
    json_err(SPJ("{\"type\":\"Unigram\",\"vocab\":[[\"a\"]]}", "null", MSP, MSP), "vocab[0]");
    json_err(SPJ("{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",0]]}", "null", MSP, MSP),
             "unk_id");
    json_err(SPJ("{\"type\":\"WordPiece\",\"vocab\":{}}", "null", MSP, MSP), "WordPiece");
    fr_err e = {0};
    const char *ok = SPJ(UNI, "null", MSP, MSP);
    fr_tokenizer *t = fr_tokenizer_from_json("t.json", ok, strlen(ok), &e);
    CHECK(t != NULL);
    int32_t *ids;
    size_t n;
    if (t && fr_tokenize(t, "a a", 3, false, &ids, &n, &e) == 0) {
        CHECK(n == 2 && ids[0] == 1 && ids[1] == 1);
        free(ids);
    }
    fr_tokenizer_free(t);
    fr_vocab_spec s = {0};
    const char *tk[] = {"a"};
    s.n_tokens = 1, s.tokens = tk, s.model = "t5", s.bos_id = s.eos_id = s.pad_id = -1;
    CHECK(fr_tokenizer_from_vocab(&s, &e) == NULL && strstr(e.msg, "t5") &&
          e.code == FR_ERR_UNSUPPORTED);
}

/* A Unigram vocabulary with one 60 000-byte piece: the Viterbi tries only the lengths pieces
 * have, and the long piece is found where the text holds it. */
TEST(unigram_long_piece) {
    fr_buf j = {0}, text = {0};
    fr_buf_puts(&j, "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],"
                    "[\"\xE2\x96\x81" "a\",-1],[\"a\",-2],[\"\xE2\x96\x81\",-3],[\"");
    for (int i = 0; i < 60000; i++) fr_buf_puts(&j, "x");
    fr_buf_puts(&j, "\",-5]]},\"pre_tokenizer\":" MSP ",\"decoder\":" MSP "}");
    for (int i = 0; i < 20000; i++) fr_buf_puts(&text, "a ");
    for (int i = 0; i < 60000; i++) fr_buf_puts(&text, "x");
    fr_err e = {0};
    fr_tokenizer *t = fr_tokenizer_from_json("long.json", j.data, j.len, &e);
    CHECK(t != NULL);
    int32_t *ids = NULL;
    size_t n = 0;
    if (t && fr_tokenize(t, text.data, text.len, false, &ids, &n, &e) == 0) {
        CHECK_EQ_INT(n, 20002); /* 20000 x "▁a", then "▁" and the long piece */
        CHECK(n == 20002 && ids[0] == 1 && ids[19999] == 1 && ids[20000] == 3 && ids[20001] == 4);
    } else {
        CHECK(0);
    }
    free(ids);
    fr_tokenizer_free(t);
    fr_buf_free(&j);
    fr_buf_free(&text);
}

int main(void) { return t_main(); }
