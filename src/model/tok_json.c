/* tok_json.c — HF tokenizer.json -> tok_build (see tok_internal.h), parsed with cJSON.
 *
 * Design. The file is read whole (capped at FR_TOK_MAX_FILE), checked to be UTF-8, parsed into a
 * cJSON tree, and every field we use is type-checked before use; strings in the tok_build point
 * into the tree, which lives until fr_tok_build_finish() has copied them. Anything we do not
 * implement exactly (other models, normalizers, pre-tokenizers, post-processors, split
 * behaviours) is a one-line error naming the file and the construct, never a silent difference.
 *
 * Accepted (the shapes of Qwen2/Qwen2.5/Qwen3 and Llama-3 checkpoints, GPT-2-style files, and
 * the SentencePiece-style files of Llama 2, Mistral and Gemma):
 *   model: BPE; vocab {string: id}; merges ["a b", ...] or [["a", "b"], ...]; ignore_merges;
 *          unk_token/fuse_unk; byte_fallback (SentencePiece shapes only), dropout null, no
 *          subword affixes.  Unigram: vocab [[piece, score], ...], unk_id, byte_fallback.
 *   added_tokens: [{id, content, special, lstrip, rstrip, single_word, normalized}].
 *   normalizer: null, NFC, Prepend("▁"), Replace(" " -> "▁"), or a Sequence of those.
 *   pre_tokenizer, byte-level: ByteLevel{add_prefix_space, use_regex}, Split{pattern
 *          {Regex|String}, behavior Isolated, invert false}, or a Sequence of those ending in one
 *          ByteLevel; SentencePiece: null, Metaspace{replacement "▁", prepend_scheme or
 *          add_prefix_space, split}, Split(" ", MergedWithPrevious) after Replace(" " -> "▁").
 *   decoder, byte-level: ByteLevel; SentencePiece: Replace("▁" -> " "), ByteFallback, Fuse,
 *          Strip(" ", 1, 0) after Fuse, Metaspace, or a Sequence of those.
 *   post_processor: null, ByteLevel, TemplateProcessing (single), Sequence.
 * A file without a ByteLevel stage is read as SentencePiece-style when its model is Unigram or
 * has byte_fallback, or it has Metaspace / Prepend / Replace (parse_sp).
 */
#include "model/tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define MS "\xE2\x96\x81" /* U+2581, SentencePiece's meta space */
#define FR_TOK_MAX_DEPTH 16 /* nesting of Sequence normalizers / pre-tokenizers / processors */

typedef struct jctx {
    const char *name; /* file name for messages */
    fr_err *err;      /* where the first error goes */
    tok_build *b;     /* what is being filled */
} jctx;

static int jfail(jctx *j, const char *fmt, ...) FR_PRINTF(2, 3);
static int jfail(jctx *j, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fr_err_set(j->err, "%s: %s", j->name, msg);
    return -1;
}

static const cJSON *jget(const cJSON *obj, const char *key) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static bool jabsent(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* Optional boolean field (absent or null -> def). */
static int jbool(jctx *j, const cJSON *obj, const char *key, bool def, bool *out,
                 const char *where) {
    const cJSON *v = jget(obj, key);
    if (jabsent(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return jfail(j, "%s.%s must be true or false", where, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* An integer in [lo, hi]. */
static bool jint(const cJSON *v, double lo, double hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi) return false;
    *out = (int64_t)d;
    return true;
}

/* The "type" string of a component object. */
static const char *jtype(jctx *j, const cJSON *obj, const char *where) {
    if (!cJSON_IsObject(obj)) {
        jfail(j, "%s must be an object or null", where);
        return NULL;
    }
    const cJSON *t = jget(obj, "type");
    if (!cJSON_IsString(t)) {
        jfail(j, "%s has no \"type\" string", where);
        return NULL;
    }
    return t->valuestring;
}

/* model.type "Unigram": vocab [[piece, score], ...] (id = index), unk_id, byte_fallback. */
static int parse_unigram(jctx *j, const cJSON *model) {
    tok_build *b = j->b;
    const cJSON *vocab = jget(model, "vocab"), *unk = jget(model, "unk_id");
    if (!cJSON_IsArray(vocab)) return jfail(j, "model.vocab must be an array (Unigram)");
    size_t n = (size_t)cJSON_GetArraySize(vocab), i = 0;
    if (n >= FR_TOK_MAX_VOCAB) return jfail(j, "model.vocab has too many pieces (%zu)", n);
    b->model = FR_TOKM_UNIGRAM;
    b->unk_id = -1;
    if (jbool(j, model, "byte_fallback", false, &b->byte_fallback, "model")) return -1;
    if (!jabsent(unk)) {
        int64_t u;
        if (!jint(unk, 0, (double)n - 1, &u))
            return jfail(j, "model.unk_id must be an index into model.vocab or null");
        b->unk_id = (int32_t)u;
    }
    b->vocab = fr_xcalloc(n + 1, sizeof *b->vocab);
    for (const cJSON *e = vocab->child; e; e = e->next, i++) {
        const cJSON *p = cJSON_IsArray(e) ? e->child : NULL, *sc = p ? p->next : NULL;
        if (!cJSON_IsString(p) || !cJSON_IsNumber(sc) || sc->next || !isfinite(sc->valuedouble))
            return jfail(j, "model.vocab[%zu] must be [piece, score]", i);
        b->vocab[b->n_vocab++] =
            (tb_vocab){p->valuestring, strlen(p->valuestring), (int32_t)i, sc->valuedouble, true};
    }
    return 0;
}

static int parse_model(jctx *j, const cJSON *root) {
    tok_build *b = j->b;
    const cJSON *model = jget(root, "model");
    if (!cJSON_IsObject(model)) return jfail(j, "missing \"model\" object");
    const cJSON *ty = jget(model, "type");
    if (ty && !cJSON_IsString(ty)) return jfail(j, "model.type must be a string");
    if (ty && !strcmp(ty->valuestring, "Unigram")) return parse_unigram(j, model);
    if (ty && strcmp(ty->valuestring, "BPE") != 0) {
        char q[96];
        const char *s = ty->valuestring;
        return jfail(j, "model type %s is not supported (only BPE and Unigram)",
                     fr_tok_quote(s, strlen(s), q, sizeof q));
    }
    const cJSON *vocab = jget(model, "vocab"), *merges = jget(model, "merges");
    if (!cJSON_IsObject(vocab)) return jfail(j, "model.vocab must be an object");
    if (!ty && !merges) return jfail(j, "model has no type and no merges (not a BPE model)");

    bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
    if (jbool(j, model, "byte_fallback", false, &byte_fallback, "model") ||
        jbool(j, model, "ignore_merges", false, &ignore_merges, "model") ||
        jbool(j, model, "fuse_unk", false, &fuse_unk, "model"))
        return -1;
    b->byte_fallback = byte_fallback;
    b->ignore_merges = ignore_merges;
    b->fuse_unk = fuse_unk;
    const cJSON *dropout = jget(model, "dropout");
    if (!jabsent(dropout)) {
        if (!cJSON_IsNumber(dropout)) return jfail(j, "model.dropout must be a number or null");
        if (dropout->valuedouble != 0.0) return jfail(j, "model.dropout is not supported");
    }
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < FR_ARRAY_LEN(affixes); i++) {
        const cJSON *v = jget(model, affixes[i]);
        if (jabsent(v)) continue;
        if (!cJSON_IsString(v)) return jfail(j, "model.%s must be a string or null", affixes[i]);
        if (v->valuestring[0]) return jfail(j, "model.%s is not supported", affixes[i]);
    }
    const cJSON *unk = jget(model, "unk_token");
    if (!jabsent(unk)) {
        if (!cJSON_IsString(unk)) return jfail(j, "model.unk_token must be a string or null");
        b->unk = (tb_str){unk->valuestring, strlen(unk->valuestring)};
    }

    /* vocab */
    size_t n = (size_t)cJSON_GetArraySize(vocab);
    b->vocab = fr_xcalloc(n + 1, sizeof *b->vocab);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int64_t id;
        if (!jint(e, 0, FR_TOK_MAX_VOCAB - 1, &id)) {
            char q[96];
            return jfail(j, "model.vocab[%s]: id must be an integer in [0, %d)",
                         fr_tok_quote(e->string, strlen(e->string), q, sizeof q),
                         FR_TOK_MAX_VOCAB);
        }
        b->vocab[b->n_vocab++] = (tb_vocab){e->string, strlen(e->string), (int32_t)id, 0.0, true};
    }

    /* merges */
    if (jabsent(merges)) return 0;
    if (!cJSON_IsArray(merges)) return jfail(j, "model.merges must be an array");
    n = (size_t)cJSON_GetArraySize(merges);
    b->merges = fr_xcalloc(n + 1, sizeof *b->merges);
    size_t r = 0;
    for (const cJSON *m = merges->child; m; m = m->next, r++) {
        tb_merge mg;
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return jfail(j, "model.merges[%zu] must be \"left right\" (one space)", r);
            mg.a = (tb_str){s, (size_t)(sp - s)};
            mg.b = (tb_str){sp + 1, strlen(sp + 1)};
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            mg.a = (tb_str){m->child->valuestring, strlen(m->child->valuestring)};
            mg.b = (tb_str){m->child->next->valuestring, strlen(m->child->next->valuestring)};
        } else {
            return jfail(j, "model.merges[%zu] must be a string or a pair of strings", r);
        }
        b->merges[b->n_merges++] = mg;
    }
    return 0;
}

static int parse_added(jctx *j, const cJSON *root) {
    tok_build *b = j->b;
    const cJSON *arr = jget(root, "added_tokens");
    if (jabsent(arr)) return 0;
    if (!cJSON_IsArray(arr)) return jfail(j, "added_tokens must be an array");
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    b->added = fr_xcalloc(n + 1, sizeof *b->added);
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!cJSON_IsObject(e)) return jfail(j, "%s must be an object", where);
        int64_t id;
        if (!jint(jget(e, "id"), 0, FR_TOK_MAX_VOCAB - 1, &id))
            return jfail(j, "%s.id must be an integer in [0, %d)", where, FR_TOK_MAX_VOCAB);
        const cJSON *content = jget(e, "content");
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return jfail(j, "%s.content must be a non-empty string", where);
        tb_added a = {{content->valuestring, strlen(content->valuestring)}, (int32_t)id,
                      false, false, false, false, false};
        if (jbool(j, e, "special", false, &a.special, where) ||
            jbool(j, e, "lstrip", false, &a.lstrip, where) ||
            jbool(j, e, "rstrip", false, &a.rstrip, where) ||
            jbool(j, e, "single_word", false, &a.single_word, where) ||
            jbool(j, e, "normalized", !a.special, &a.normalized, where))
            return -1;
        b->added[b->n_added++] = a;
    }
    return 0;
}

static int parse_normalizer(jctx *j, const cJSON *v, int depth) {
    if (jabsent(v)) return 0;
    if (depth > FR_TOK_MAX_DEPTH) return jfail(j, "normalizer nested too deeply");
    const char *ty = jtype(j, v, "normalizer");
    if (!ty) return -1;
    if (!strcmp(ty, "NFC")) {
        j->b->nfc = true;
        return 0;
    }
    if (!strcmp(ty, "Prepend")) {
        const cJSON *p = jget(v, "prepend");
        if (!cJSON_IsString(p) || strcmp(p->valuestring, MS) != 0)
            return jfail(j, "normalizer Prepend is supported only with \"\u2581\"");
        j->b->sp_prepend = FR_SPP_PREPEND;
        return 0;
    }
    if (!strcmp(ty, "Replace")) {
        const cJSON *pat = jget(jget(v, "pattern"), "String"), *to = jget(v, "content");
        if (!cJSON_IsString(pat) || !cJSON_IsString(to) || strcmp(pat->valuestring, " ") ||
            strcmp(to->valuestring, MS))
            return jfail(j, "normalizer Replace is supported only from \" \" to \"\u2581\"");
        j->b->sp_space = true;
        return 0;
    }
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = jget(v, "normalizers");
        if (!cJSON_IsArray(list)) return jfail(j, "normalizer Sequence needs a \"normalizers\" array");
        for (const cJSON *e = list->child; e; e = e->next)
            if (parse_normalizer(j, e, depth + 1)) return -1;
        return 0;
    }
    char q[96];
    return jfail(j, "normalizer type %s is not supported (only NFC, Prepend, Replace)",
                 fr_tok_quote(ty, strlen(ty), q, sizeof q));
}

static int add_stage(jctx *j, tb_stage st) {
    tok_build *b = j->b;
    if (b->n_stages >= FR_TOK_MAX_STAGES) return jfail(j, "pre_tokenizer has too many stages");
    b->stages[b->n_stages++] = st;
    return 0;
}

/* Metaspace's prepend_scheme (or the older add_prefix_space) as FR_SPP_*, or -1. */
static int ms_scheme(jctx *j, const cJSON *v, const char *where) {
    const cJSON *sch = jget(v, "prepend_scheme");
    if (cJSON_IsString(sch)) {
        const char *s = sch->valuestring;
        if (!strcmp(s, "always")) return FR_SPP_ALWAYS;
        if (!strcmp(s, "first")) return FR_SPP_FIRST;
        if (!strcmp(s, "never")) return FR_SPP_NONE;
        return jfail(j, "%s prepend_scheme must be always, first or never", where);
    }
    if (!jabsent(sch)) return jfail(j, "%s prepend_scheme must be a string", where);
    bool add = true;
    if (jbool(j, v, "add_prefix_space", true, &add, where)) return -1;
    return add ? FR_SPP_ALWAYS : FR_SPP_NONE;
}

static int ms_replacement(jctx *j, const cJSON *v, const char *where) {
    const cJSON *r = jget(v, "replacement");
    if (!cJSON_IsString(r) || strcmp(r->valuestring, MS) != 0)
        return jfail(j, "%s is supported only with replacement \"\u2581\"", where);
    return 0;
}

static int parse_metaspace(jctx *j, const cJSON *v) {
    tok_build *b = j->b;
    const char *w = "pre_tokenizer Metaspace";
    if (b->ms) return jfail(j, "pre_tokenizer has two Metaspace stages");
    int sch = ms_scheme(j, v, w);
    if (sch < 0 || ms_replacement(j, v, w) || jbool(j, v, "split", true, &b->ms_split, w))
        return -1;
    b->ms = true;
    b->ms_prepend = sch;
    return 0;
}

/* Split(" ", MergedWithPrevious) after a normalizer that replaced every space: it has nothing
 * to split (Gemma's tokenizer.json). True when v is that. */
static bool space_split(jctx *j, const cJSON *v) {
    const cJSON *str = jget(jget(v, "pattern"), "String"), *beh = jget(v, "behavior");
    return j->b->sp_space && cJSON_IsString(str) && !strcmp(str->valuestring, " ") &&
           cJSON_IsString(beh) && !strcmp(beh->valuestring, "MergedWithPrevious") &&
           !cJSON_IsTrue(jget(v, "invert"));
}

static int parse_pretok(jctx *j, const cJSON *v, bool *have_bl, int depth) {
    if (depth > FR_TOK_MAX_DEPTH) return jfail(j, "pre_tokenizer nested too deeply");
    const char *ty = jtype(j, v, "pre_tokenizer");
    if (!ty) return -1;
    char q[96];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = jget(v, "pretokenizers");
        if (!cJSON_IsArray(list))
            return jfail(j, "pre_tokenizer Sequence needs a \"pretokenizers\" array");
        for (const cJSON *e = list->child; e; e = e->next)
            if (parse_pretok(j, e, have_bl, depth + 1)) return -1;
        return 0;
    }
    if (!strcmp(ty, "Metaspace")) return parse_metaspace(j, v);
    if (!strcmp(ty, "Split") && space_split(j, v)) return 0;
    if (!strcmp(ty, "Split")) {
        if (*have_bl) return jfail(j, "pre_tokenizer: Split after ByteLevel is not supported");
        const cJSON *pat = jget(v, "pattern");
        const cJSON *re = jget(pat, "Regex"), *str = jget(pat, "String");
        bool literal = false;
        if (cJSON_IsString(re)) literal = false;
        else if (cJSON_IsString(str)) {
            literal = true;
            re = str;
        } else return jfail(j, "pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}");
        if (!re->valuestring[0]) return jfail(j, "pre_tokenizer Split has an empty pattern");
        const cJSON *beh = jget(v, "behavior");
        if (!cJSON_IsString(beh)) return jfail(j, "pre_tokenizer Split needs a \"behavior\" string");
        if (strcmp(beh->valuestring, "Isolated") != 0)
            return jfail(j, "pre_tokenizer Split behavior %s is not supported (only Isolated)",
                         fr_tok_quote(beh->valuestring, strlen(beh->valuestring), q, sizeof q));
        bool invert = false;
        if (jbool(j, v, "invert", false, &invert, "pre_tokenizer Split")) return -1;
        if (invert) return jfail(j, "pre_tokenizer Split with invert=true is not supported");
        return add_stage(j, (tb_stage){{re->valuestring, strlen(re->valuestring)}, literal, false});
    }
    if (!strcmp(ty, "ByteLevel")) {
        if (*have_bl) return jfail(j, "pre_tokenizer has two ByteLevel stages");
        *have_bl = true;
        bool prefix = true, use_regex = true;
        if (jbool(j, v, "add_prefix_space", true, &prefix, "pre_tokenizer ByteLevel") ||
            jbool(j, v, "use_regex", true, &use_regex, "pre_tokenizer ByteLevel"))
            return -1;
        if (!prefix && !use_regex) return 0;
        const char *g = fr_tok_gpt2_regex();
        tb_stage st = {{use_regex ? g : NULL, use_regex ? strlen(g) : 0}, false, prefix};
        return add_stage(j, st);
    }
    return jfail(j, "pre_tokenizer type %s is not supported (only Split, ByteLevel, Metaspace, "
                 "Sequence)",
                 fr_tok_quote(ty, strlen(ty), q, sizeof q));
}

/* One decoder of a SentencePiece-style tokenizer (Sequence, Replace, ByteFallback, Fuse, Strip,
 * Metaspace); *fused: a Fuse came before. */
static int sp_decoder(jctx *j, const cJSON *v, bool *fused, int depth) {
    tok_build *b = j->b;
    if (depth > FR_TOK_MAX_DEPTH) return jfail(j, "decoder nested too deeply");
    const char *ty = jtype(j, v, "decoder");
    if (!ty) return -1;
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = jget(v, "decoders");
        if (!cJSON_IsArray(list)) return jfail(j, "decoder Sequence needs a \"decoders\" array");
        for (const cJSON *e = list->child; e; e = e->next)
            if (sp_decoder(j, e, fused, depth + 1)) return -1;
        return 0;
    }
    if (!strcmp(ty, "Replace")) {
        const cJSON *pat = jget(jget(v, "pattern"), "String"), *to = jget(v, "content");
        if (!cJSON_IsString(pat) || !cJSON_IsString(to) || strcmp(pat->valuestring, MS) ||
            strcmp(to->valuestring, " "))
            return jfail(j, "decoder Replace is supported only from \"\u2581\" to \" \"");
        b->sp_dec |= FR_SPD_SPACE;
        return 0;
    }
    if (!strcmp(ty, "ByteFallback")) {
        if (*fused) return jfail(j, "decoder ByteFallback after Fuse is not supported");
        b->sp_dec |= FR_SPD_BYTES;
        return 0;
    }
    if (!strcmp(ty, "Fuse")) {
        *fused = true;
        return 0;
    }
    if (!strcmp(ty, "Strip")) {
        const cJSON *ct = jget(v, "content");
        int64_t st = -1, sp = -1;
        if (!cJSON_IsString(ct) || strcmp(ct->valuestring, " ") ||
            !jint(jget(v, "start"), 0, 1, &st) || !jint(jget(v, "stop"), 0, 0, &sp) ||
            (st && !*fused))
            return jfail(j, "decoder Strip is supported only as Strip(\" \", 1, 0) after Fuse");
        if (st) b->sp_dec |= FR_SPD_STRIP1;
        return 0;
    }
    if (!strcmp(ty, "Metaspace")) {
        int sch = ms_scheme(j, v, "decoder Metaspace");
        if (sch < 0 || ms_replacement(j, v, "decoder Metaspace")) return -1;
        b->sp_dec |= FR_SPD_SPACE | (sch != FR_SPP_NONE ? FR_SPD_MSFIRST : 0);
        return 0;
    }
    char q[96];
    return jfail(j, "decoder %s is not supported with a SentencePiece-style model",
                 fr_tok_quote(ty, strlen(ty), q, sizeof q));
}

/* A tokenizer without a ByteLevel stage: the SentencePiece shapes (Llama 2, Mistral, Gemma,
 * Unigram). Checks the rest of the file fits and reads its decoder. */
static int parse_sp(jctx *j, const cJSON *root) {
    tok_build *b = j->b;
    if (!(b->model == FR_TOKM_UNIGRAM || b->byte_fallback || b->ms || b->sp_space ||
          b->sp_prepend))
        return jfail(j, "pre_tokenizer has no ByteLevel or Metaspace stage (neither a byte-level "
                        "BPE nor a SentencePiece-style tokenizer)");
    if (b->n_stages) return jfail(j, "pre_tokenizer Split with a SentencePiece-style model is "
                                     "not supported");
    if (b->nfc) return jfail(j, "normalizer NFC with a SentencePiece-style model is not supported");
    const cJSON *dec = jget(root, "decoder");
    if (jabsent(dec)) return jfail(j, "decoder is null (tokens would be joined by spaces; not "
                                      "supported)");
    bool fused = false;
    if (sp_decoder(j, dec, &fused, 0)) return -1;
    b->sp = true;
    b->sp_dec |= FR_SPD_SP;
    return 0;
}

/* ids of one special token of a TemplateProcessing */
static int template_ids(jctx *j, const cJSON *specials, const char *tok, int32_t *ids, int *n) {
    char q[96];
    const cJSON *sp = jget(specials, tok);
    const cJSON *arr = jget(sp, "ids");
    if (!cJSON_IsArray(arr))
        return jfail(j, "post_processor: special token %s has no \"ids\" array",
                     fr_tok_quote(tok, strlen(tok), q, sizeof q));
    for (const cJSON *e = arr->child; e; e = e->next) {
        int64_t id;
        if (!jint(e, 0, FR_TOK_MAX_VOCAB - 1, &id))
            return jfail(j, "post_processor: special token %s has a bad id",
                         fr_tok_quote(tok, strlen(tok), q, sizeof q));
        if (*n >= FR_TOK_MAX_TEMPLATE) return jfail(j, "post_processor template too long");
        ids[(*n)++] = (int32_t)id;
    }
    return 0;
}

static int parse_template(jctx *j, const cJSON *v) {
    tok_build *b = j->b;
    const cJSON *single = jget(v, "single"), *specials = jget(v, "special_tokens");
    if (!cJSON_IsArray(single))
        return jfail(j, "post_processor TemplateProcessing needs a \"single\" array");
    int32_t pre[FR_TOK_MAX_TEMPLATE], suf[FR_TOK_MAX_TEMPLATE];
    int npre = 0, nsuf = 0, nseq = 0;
    for (const cJSON *e = single->child; e; e = e->next) {
        const cJSON *st = jget(e, "SpecialToken"), *sq = jget(e, "Sequence");
        if (cJSON_IsObject(st)) {
            const cJSON *id = jget(st, "id");
            if (!cJSON_IsString(id))
                return jfail(j, "post_processor: SpecialToken needs an \"id\" string");
            if (template_ids(j, specials, id->valuestring, nseq ? suf : pre, nseq ? &nsuf : &npre))
                return -1;
        } else if (cJSON_IsObject(sq)) {
            const cJSON *id = jget(sq, "id");
            if (!cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0 || nseq)
                return jfail(j, "post_processor: the single template must hold $A once");
            nseq++;
        } else {
            return jfail(j, "post_processor: template items must be SpecialToken or Sequence");
        }
    }
    if (nseq != 1) return jfail(j, "post_processor: the single template must hold $A once");
    if (npre + b->n_prefix > FR_TOK_MAX_TEMPLATE || nsuf + b->n_suffix > FR_TOK_MAX_TEMPLATE)
        return jfail(j, "post_processor template too long");
    /* this template wraps what earlier processors produced */
    memmove(b->prefix + npre, b->prefix, (size_t)b->n_prefix * sizeof *b->prefix);
    memcpy(b->prefix, pre, (size_t)npre * sizeof *pre);
    b->n_prefix += npre;
    memcpy(b->suffix + b->n_suffix, suf, (size_t)nsuf * sizeof *suf);
    b->n_suffix += nsuf;
    return 0;
}

static int parse_post(jctx *j, const cJSON *v, int depth) {
    if (jabsent(v)) return 0;
    if (depth > FR_TOK_MAX_DEPTH) return jfail(j, "post_processor nested too deeply");
    const char *ty = jtype(j, v, "post_processor");
    if (!ty) return -1;
    if (!strcmp(ty, "ByteLevel")) return 0; /* offsets only */
    if (!strcmp(ty, "TemplateProcessing")) return parse_template(j, v);
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = jget(v, "processors");
        if (!cJSON_IsArray(list))
            return jfail(j, "post_processor Sequence needs a \"processors\" array");
        for (const cJSON *e = list->child; e; e = e->next)
            if (parse_post(j, e, depth + 1)) return -1;
        return 0;
    }
    char q[96];
    return jfail(j, "post_processor type %s is not supported",
                 fr_tok_quote(ty, strlen(ty), q, sizeof q));
}

static int parse_bl_decoder(jctx *j, const cJSON *root) {
    const cJSON *dec = jget(root, "decoder");
    const char *dty = jabsent(dec) ? NULL : jtype(j, dec, "decoder");
    if (!jabsent(dec) && !dty) return -1;
    if (!dty || strcmp(dty, "ByteLevel") != 0) {
        char q[96];
        return jfail(j, "decoder %s is not supported (only ByteLevel)",
                     dty ? fr_tok_quote(dty, strlen(dty), q, sizeof q) : "null");
    }
    return 0;
}

fr_tokenizer *fr_tokenizer_from_json(const char *name, const char *json, size_t len,
                                     fr_err *err) {
    tok_build b = {0};
    b.bos = b.eos = b.unk_id = -1;
    b.name = name ? name : "tokenizer.json";
    jctx j = {b.name, err, &b};
    if (len > FR_TOK_MAX_FILE) {
        jfail(&j, "file too large (%zu bytes, limit %u)", len, FR_TOK_MAX_FILE);
        return NULL;
    }
    if (!json || !fr_tok_utf8_valid(json, len)) {
        jfail(&j, "not valid UTF-8");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        jfail(&j, "not valid JSON (error near byte %zu)", at);
        return NULL;
    }
    fr_tokenizer *t = NULL;
    bool have_bl = false;
    if (!cJSON_IsObject(root)) {
        jfail(&j, "top level is not a JSON object");
        goto done;
    }
    while (end && end < json + len && (*end == ' ' || *end == '\n' || *end == '\r' ||
                                       *end == '\t' || *end == 0))
        end++;
    if (end && end < json + len) {
        jfail(&j, "trailing data after the JSON object (byte %zu)", (size_t)(end - json));
        goto done;
    }
    if (parse_model(&j, root) || parse_added(&j, root) ||
        parse_normalizer(&j, jget(root, "normalizer"), 0))
        goto done;
    const cJSON *pre = jget(root, "pre_tokenizer");
    if (!jabsent(pre) && parse_pretok(&j, pre, &have_bl, 0)) goto done;
    if (!have_bl) {
        if (parse_sp(&j, root)) goto done;
    } else if (b.model != FR_TOKM_BPE || b.byte_fallback || b.ms || b.sp_space || b.sp_prepend) {
        jfail(&j, "a ByteLevel pre-tokenizer with a SentencePiece-style %s is not supported",
              b.byte_fallback ? "model (model.byte_fallback is true)" : "model or normalizer");
        goto done;
    } else if (parse_bl_decoder(&j, root)) {
        goto done;
    }
    if (parse_post(&j, jget(root, "post_processor"), 0)) goto done;
    if (b.n_prefix) b.bos = b.prefix[0];
    t = fr_tok_build_finish(&b, err);
done:
    fr_tok_build_free(&b);
    cJSON_Delete(root);
    return t;
}

fr_tokenizer *fr_tokenizer_load_json(const char *path, fr_err *err) {
    size_t len = 0;
    char *buf = fr_read_file(path, FR_TOK_MAX_FILE, &len, err);
    if (!buf) return NULL;
    fr_tokenizer *t = fr_tokenizer_from_json(path, buf, len, err);
    free(buf);
    return t;
}
