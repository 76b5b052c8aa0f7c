/* whisper.c — see whisper.h.
 *
 * Design: both sources are first reduced to a table of found tensors (name, dtype, shape in torch
 * order, bounded data pointer). A list of the tensors the hparams call for (HF and ggml names,
 * expected shape, where the pointer goes) is then walked twice: once to size the one weight block,
 * once to convert each tensor into it. Shapes compare after dropping unit dimensions (ggml keeps
 * the conv biases as (state, 1)). Every value read from a file is bounded before use.
 */
#include "model/whisper.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/safetensors.h"

#define WH_MAX_JSON (64u * 1024u * 1024u)
#define GGML_MAGIC 0x67676d6c
#define GGML_MAX_NAME 256
#define GGML_MAX_TENSORS 4096

static const char *const LANGS[FR_WHISPER_MAX_LANGS] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};

const char *fr_whisper_lang_code(int i) {
    return i >= 0 && i < FR_WHISPER_MAX_LANGS ? LANGS[i] : NULL;
}

int fr_whisper_lang_index(const char *code) {
    if (!code) return -1;
    for (int i = 0; i < FR_WHISPER_MAX_LANGS; i++)
        if (strcmp(code, LANGS[i]) == 0) return i;
    return -1;
}

const char *fr_whisper_token_bytes(const fr_whisper_model *m, int id, size_t *len) {
    const fr_whisper_vocab *v = &m->vocab;
    if (!v->text_off || id < 0 || id >= v->n_text) return NULL;
    *len = v->text_off[id + 1] - v->text_off[id];
    return v->text_bytes + v->text_off[id];
}

/* ---------------------------------------------------------------- found tensors */

typedef struct wh_src {
    const char *name;     /* as stored */
    int dtype;            /* FR_DTYPE_F32 / F16 / BF16, or -1 */
    int n_dims;           /* torch order below */
    int64_t shape[4];
    int64_t n_elem;
    const uint8_t *data;  /* n_elem elements of dtype */
    bool used;            /* taken by a spec (unknown leftovers are errors for ggml) */
} wh_src;

typedef struct wh_srcs {
    wh_src *t;
    int n;
    const char *file; /* for messages */
} wh_srcs;

static wh_src *srcs_find(wh_srcs *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
    return NULL;
}

/* ---------------------------------------------------------------- what the hparams call for */

typedef struct wh_spec {
    char hf[96], gg[96];  /* HF and ggml names */
    int n_dims;
    int64_t shape[3];     /* torch order */
    const float **dst;
    bool optional;        /* proj_out.weight */
} wh_spec;

typedef struct wh_specs {
    wh_spec *s;
    int n, cap;
} wh_specs;

static void spec_add(wh_specs *L, const float **dst, bool optional, int nd, int64_t a, int64_t b,
                     int64_t c, const char *hf, const char *gg) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 64;
        L->s = fr_xrealloc(L->s, (size_t)L->cap * sizeof *L->s);
    }
    wh_spec *s = &L->s[L->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->hf, sizeof s->hf, "%s", hf);
    snprintf(s->gg, sizeof s->gg, "%s", gg);
    s->n_dims = nd;
    s->shape[0] = a;
    s->shape[1] = b;
    s->shape[2] = c;
    s->dst = dst;
    s->optional = optional;
}

static void specs_attn(wh_specs *L, fr_whisper_attn *A, int64_t d, const char *hfp,
                       const char *ggp) {
    char h[96], g[96];
#define ATT(field, nd, hfn, ggn)                                                               \
    snprintf(h, sizeof h, "%s.%s", hfp, hfn);                                                  \
    snprintf(g, sizeof g, "%s.%s", ggp, ggn);                                                  \
    spec_add(L, &A->field, false, nd, d, nd == 2 ? d : 1, 1, h, g);
    ATT(q_w, 2, "q_proj.weight", "query.weight")
    ATT(q_b, 1, "q_proj.bias", "query.bias")
    ATT(k_w, 2, "k_proj.weight", "key.weight")
    ATT(v_w, 2, "v_proj.weight", "value.weight")
    ATT(v_b, 1, "v_proj.bias", "value.bias")
    ATT(o_w, 2, "out_proj.weight", "out.weight")
    ATT(o_b, 1, "out_proj.bias", "out.bias")
#undef ATT
}

static void specs_layer(wh_specs *L, fr_whisper_layer *ly, bool dec, int i, int64_t d,
                        int64_t ff) {
    const char *side = dec ? "decoder" : "encoder";
    char hp[64], gp[64], h[96], g[96];
    snprintf(hp, sizeof hp, "model.%s.layers.%d", side, i);
    snprintf(gp, sizeof gp, "%s.blocks.%d", side, i);
#define ONE(field, nd, a, b, hfn, ggn)                                                         \
    snprintf(h, sizeof h, "%s.%s", hp, hfn);                                                   \
    snprintf(g, sizeof g, "%s.%s", gp, ggn);                                                   \
    spec_add(L, &ly->field, false, nd, a, b, 1, h, g);
    ONE(attn_ln_w, 1, d, 1, "self_attn_layer_norm.weight", "attn_ln.weight")
    ONE(attn_ln_b, 1, d, 1, "self_attn_layer_norm.bias", "attn_ln.bias")
    snprintf(h, sizeof h, "%s.self_attn", hp);
    snprintf(g, sizeof g, "%s.attn", gp);
    specs_attn(L, &ly->attn, d, h, g);
    if (dec) {
        ONE(cross_ln_w, 1, d, 1, "encoder_attn_layer_norm.weight", "cross_attn_ln.weight")
        ONE(cross_ln_b, 1, d, 1, "encoder_attn_layer_norm.bias", "cross_attn_ln.bias")
        snprintf(h, sizeof h, "%s.encoder_attn", hp);
        snprintf(g, sizeof g, "%s.cross_attn", gp);
        specs_attn(L, &ly->cross, d, h, g);
    }
    ONE(mlp_ln_w, 1, d, 1, "final_layer_norm.weight", "mlp_ln.weight")
    ONE(mlp_ln_b, 1, d, 1, "final_layer_norm.bias", "mlp_ln.bias")
    ONE(fc1_w, 2, ff, d, "fc1.weight", "mlp.0.weight")
    ONE(fc1_b, 1, ff, 1, "fc1.bias", "mlp.0.bias")
    ONE(fc2_w, 2, d, ff, "fc2.weight", "mlp.2.weight")
    ONE(fc2_b, 1, d, 1, "fc2.bias", "mlp.2.bias")
#undef ONE
}

static void specs_build(wh_specs *L, fr_whisper_model *m) {
    const fr_whisper_hparams *hp = &m->hp;
    int64_t d = hp->n_audio_state;
    spec_add(L, &m->conv1_w, false, 3, d, hp->n_mels, 3, "model.encoder.conv1.weight",
             "encoder.conv1.weight");
    spec_add(L, &m->conv1_b, false, 1, d, 1, 1, "model.encoder.conv1.bias", "encoder.conv1.bias");
    spec_add(L, &m->conv2_w, false, 3, d, d, 3, "model.encoder.conv2.weight",
             "encoder.conv2.weight");
    spec_add(L, &m->conv2_b, false, 1, d, 1, 1, "model.encoder.conv2.bias", "encoder.conv2.bias");
    spec_add(L, &m->enc_pos, false, 2, hp->n_audio_ctx, d, 1, "model.encoder.embed_positions.weight",
             "encoder.positional_embedding");
    for (int i = 0; i < hp->n_audio_layer; i++) specs_layer(L, &m->enc[i], false, i, d, hp->n_audio_ff);
    spec_add(L, &m->enc_ln_w, false, 1, d, 1, 1, "model.encoder.layer_norm.weight",
             "encoder.ln_post.weight");
    spec_add(L, &m->enc_ln_b, false, 1, d, 1, 1, "model.encoder.layer_norm.bias",
             "encoder.ln_post.bias");
    spec_add(L, &m->tok_emb, false, 2, hp->n_vocab, d, 1, "model.decoder.embed_tokens.weight",
             "decoder.token_embedding.weight");
    spec_add(L, &m->dec_pos, false, 2, hp->n_text_ctx, d, 1, "model.decoder.embed_positions.weight",
             "decoder.positional_embedding");
    for (int i = 0; i < hp->n_text_layer; i++) specs_layer(L, &m->dec[i], true, i, d, hp->n_text_ff);
    spec_add(L, &m->dec_ln_w, false, 1, d, 1, 1, "model.decoder.layer_norm.weight",
             "decoder.ln.weight");
    spec_add(L, &m->dec_ln_b, false, 1, d, 1, 1, "model.decoder.layer_norm.bias",
             "decoder.ln.bias");
    spec_add(L, &m->proj, true, 2, hp->n_vocab, d, 1, "proj_out.weight", "decoder.proj.weight");
}

static int64_t spec_elems(const wh_spec *s) {
    int64_t n = 1;
    for (int i = 0; i < s->n_dims; i++) n *= s->shape[i];
    return n;
}

/* shapes equal once unit dimensions are dropped */
static bool shape_match(const wh_spec *s, const wh_src *t) {
    int64_t a[4], b[4];
    int na = 0, nb = 0;
    for (int i = 0; i < s->n_dims; i++)
        if (s->shape[i] != 1) a[na++] = s->shape[i];
    for (int i = 0; i < t->n_dims; i++)
        if (t->shape[i] != 1) b[nb++] = t->shape[i];
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static void shape_str(char *buf, size_t cap, const int64_t *shape, int nd) {
    size_t o = 0;
    buf[0] = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < nd && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static void convert(float *dst, const wh_src *t) {
    if (t->dtype == FR_DTYPE_F32) {
        memcpy(dst, t->data, (size_t)t->n_elem * 4);
    } else if (t->dtype == FR_DTYPE_F16) {
        for (int64_t i = 0; i < t->n_elem; i++) {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            dst[i] = fr_f16_to_f32(h);
        }
    } else {
        for (int64_t i = 0; i < t->n_elem; i++) {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            dst[i] = fr_bf16_to_f32(h);
        }
    }
}

/* Find, check and convert every tensor into one block. ggml: the names are ggml's and any tensor
 * not asked for is an error; HF: HF names, leftovers ignored. */
static int bind_weights(fr_whisper_model *m, wh_srcs *S, bool ggml, fr_err *err) {
    const fr_whisper_hparams *hp = &m->hp;
    m->enc = fr_xcalloc((size_t)hp->n_audio_layer, sizeof *m->enc);
    m->dec = fr_xcalloc((size_t)hp->n_text_layer, sizeof *m->dec);
    wh_specs L = {0};
    specs_build(&L, m);
    int rc = -1;
    wh_src **found = fr_xcalloc((size_t)L.n, sizeof *found);
    size_t total = 0;
    for (int i = 0; i < L.n; i++) {
        wh_spec *s = &L.s[i];
        wh_src *t = srcs_find(S, ggml ? s->gg : s->hf);
        if (!t) {
            if (s->optional) continue;
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' not found", S->file,
                        ggml ? s->gg : s->hf);
            goto out;
        }
        if (t->used) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' stored twice", S->file, t->name);
            goto out;
        }
        if (t->dtype < 0) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: tensor '%s': dtype not F32, F16 or BF16",
                        S->file, t->name);
            goto out;
        }
        if (!shape_match(s, t)) {
            char want[64], got[64];
            shape_str(want, sizeof want, s->shape, s->n_dims);
            shape_str(got, sizeof got, t->shape, t->n_dims);
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' has shape %s, the config says %s",
                        S->file, t->name, got, want);
            goto out;
        }
        t->used = true;
        found[i] = t;
        total += (size_t)spec_elems(s);
    }
    if (ggml) {
        for (int i = 0; i < S->n; i++)
            if (!S->t[i].used) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: unknown tensor '%s'", S->file,
                            S->t[i].name);
                goto out;
            }
    }
    m->arena = malloc(total * sizeof(float));
    if (!m->arena && total) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: cannot allocate %zu MiB of weights", S->file,
                    total * 4 >> 20);
        goto out;
    }
    m->arena_floats = total;
    size_t o = 0;
    for (int i = 0; i < L.n; i++) {
        if (!found[i]) continue;
        convert(m->arena + o, found[i]);
        *L.s[i].dst = m->arena + o;
        o += (size_t)spec_elems(&L.s[i]);
    }
    m->n_params = (int64_t)total;
    if (!m->proj) m->proj = m->tok_emb;
    rc = 0;
out:
    free(found);
    free(L.s);
    return rc;
}

/* ---------------------------------------------------------------- vocabulary layout */

/* The special ids after n_text text tokens; checks that they fit n_vocab. */
static int vocab_layout(fr_whisper_model *m, int n_text, const char *file, fr_err *err) {
    fr_whisper_vocab *v = &m->vocab;
    int n_vocab = m->hp.n_vocab;
    int n_lang = n_vocab - n_text - 2 - 6 - FR_WHISPER_N_TIMESTAMPS;
    if (n_text < 1 || n_lang < 1 || n_lang > FR_WHISPER_MAX_LANGS) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "%s: %d tokens with %d text tokens is not Whisper's layout (text, "
                    "<|endoftext|>, <|startoftranscript|>, 1..%d languages, 6 task tokens, %d "
                    "timestamps)",
                    file, n_vocab, n_text, FR_WHISPER_MAX_LANGS, FR_WHISPER_N_TIMESTAMPS);
        return -1;
    }
    v->n_text = n_text;
    v->eot = n_text;
    v->sot = n_text + 1;
    v->lang_begin = n_text + 2;
    v->n_lang = n_lang;
    v->translate = v->lang_begin + n_lang;
    v->transcribe = v->translate + 1;
    v->solm = v->translate + 2;
    v->prev = v->translate + 3;
    v->nosp = v->translate + 4;
    v->no_timestamps = v->translate + 5;
    v->ts_begin = v->translate + 6;
    v->max_initial_ts = 50;
    v->multilingual = n_vocab != 51864; /* whisper.cpp's rule: 51864 is the English-only size */
    return 0;
}

static void vocab_default_suppress(fr_whisper_vocab *v, int space_id) {
    /* the special tokens HF's generation configs suppress (openai's SuppressTokens also does) */
    int sup[] = {v->sot, v->translate, v->transcribe, v->solm, v->prev, v->nosp};
    v->n_suppress = 6;
    v->suppress = fr_xmalloc(sizeof sup);
    memcpy(v->suppress, sup, sizeof sup);
    v->n_begin_suppress = 0;
    v->begin_suppress = fr_xmalloc(2 * sizeof(int));
    if (space_id >= 0) v->begin_suppress[v->n_begin_suppress++] = space_id;
    v->begin_suppress[v->n_begin_suppress++] = v->eot;
}

/* ---------------------------------------------------------------- HF folder */

static const cJSON *jget(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* integer field in [lo, hi]; absent: def (or an error when def < lo) */
static int jint(const cJSON *o, const char *key, int lo, int hi, int def, int *out,
                const char *file, fr_err *err) {
    const cJSON *v = jget(o, key);
    if (!v) {
        if (def < lo) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: missing '%s'", file, key);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' must be an integer in [%d, %d]", file, key,
                    lo, hi);
        return -1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

static cJSON *read_json(const char *dir, const char *name, bool required, fr_err *err) {
    char *p = fr_path_join(dir, name);
    if (!fr_path_exists(p)) {
        if (required) fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: not found", p);
        free(p);
        return NULL;
    }
    size_t len;
    char *txt = fr_read_file(p, WH_MAX_JSON, &len, err);
    if (!txt) {
        free(p);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(txt, len);
    free(txt);
    if (!j || !cJSON_IsObject(j)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a JSON object", p);
        cJSON_Delete(j);
        j = NULL;
    }
    free(p);
    return j;
}

static int parse_hf_config(fr_whisper_model *m, const cJSON *c, const char *file, fr_err *err) {
    fr_whisper_hparams *hp = &m->hp;
    const cJSON *mt = jget(c, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "whisper") != 0)) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: model_type is not \"whisper\"", file);
        return -1;
    }
    int d = 0;
    if (jint(c, "vocab_size", 1, FR_WHISPER_MAX_VOCAB, -1, &hp->n_vocab, file, err) ||
        jint(c, "num_mel_bins", 1, FR_WHISPER_MAX_MELS, -1, &hp->n_mels, file, err) ||
        jint(c, "d_model", 1, FR_WHISPER_MAX_STATE, -1, &d, file, err) ||
        jint(c, "encoder_layers", 1, FR_WHISPER_MAX_LAYERS, -1, &hp->n_audio_layer, file, err) ||
        jint(c, "decoder_layers", 1, FR_WHISPER_MAX_LAYERS, -1, &hp->n_text_layer, file, err) ||
        jint(c, "encoder_attention_heads", 1, FR_WHISPER_MAX_STATE, -1, &hp->n_audio_head, file,
             err) ||
        jint(c, "decoder_attention_heads", 1, FR_WHISPER_MAX_STATE, -1, &hp->n_text_head, file,
             err) ||
        jint(c, "encoder_ffn_dim", 1, 8 * FR_WHISPER_MAX_STATE, -1, &hp->n_audio_ff, file, err) ||
        jint(c, "decoder_ffn_dim", 1, 8 * FR_WHISPER_MAX_STATE, -1, &hp->n_text_ff, file, err) ||
        jint(c, "max_source_positions", 1, FR_WHISPER_N_FRAMES, 1500, &hp->n_audio_ctx, file,
             err) ||
        jint(c, "max_target_positions", 1, FR_WHISPER_MAX_TEXT_CTX, 448, &hp->n_text_ctx, file,
             err))
        return -1;
    hp->n_audio_state = hp->n_text_state = d;
    const cJSON *act = jget(c, "activation_function");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu") != 0)) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: activation_function must be \"gelu\"", file);
        return -1;
    }
    const cJSON *se = jget(c, "scale_embedding");
    if (se && cJSON_IsTrue(se)) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: scale_embedding true is not supported", file);
        return -1;
    }
    return 0;
}

static int *int_list(const cJSON *a, int n_vocab, int *n, const char *file, const char *key,
                     fr_err *err) {
    *n = 0;
    if (!a) return fr_xmalloc(sizeof(int));
    if (!cJSON_IsArray(a)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' must be a list of token ids", file, key);
        return NULL;
    }
    int cnt = cJSON_GetArraySize(a);
    int *out = fr_xmalloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(int));
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= n_vocab ||
            e->valuedouble != floor(e->valuedouble)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' holds a value that is not a token id",
                        file, key);
            free(out);
            return NULL;
        }
        out[(*n)++] = (int)e->valuedouble;
    }
    return out;
}

/* generation_config.json: the ids it names must sit where the layout puts them. */
static int parse_hf_generation(fr_whisper_model *m, const cJSON *c, const cJSON *g,
                               const char *file, fr_err *err) {
    fr_whisper_vocab *v = &m->vocab;
    int n_vocab = m->hp.n_vocab;
    const cJSON *src = g ? g : c;
    int eot = -1, sot = -1;
    if (jint(src, "eos_token_id", 0, n_vocab - 1, -1, &eot, file, err) ||
        jint(src, "decoder_start_token_id", 0, n_vocab - 1, -1, &sot, file, err))
        return -1;
    if (vocab_layout(m, eot, file, err)) return -1;
    if (sot != v->sot) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "%s: decoder_start_token_id %d is not <|endoftext|> + 1 (%d)", file, sot,
                    v->sot);
        return -1;
    }
    if (g) {
        int nt = -1;
        if (jint(g, "no_timestamps_token_id", 0, n_vocab - 1, v->no_timestamps, &nt, file, err))
            return -1;
        if (nt != v->no_timestamps) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED,
                        "%s: no_timestamps_token_id %d disagrees with the layout (%d)", file, nt,
                        v->no_timestamps);
            return -1;
        }
        const cJSON *l2i = jget(g, "lang_to_id");
        const cJSON *ml = jget(g, "is_multilingual");
        v->multilingual = ml ? cJSON_IsTrue(ml) : l2i != NULL;
        if (l2i) {
            if (!cJSON_IsObject(l2i)) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: 'lang_to_id' must be an object", file);
                return -1;
            }
            const cJSON *e;
            cJSON_ArrayForEach(e, l2i) {
                char code[16];
                size_t kl = e->string ? strlen(e->string) : 0;
                int idx = -1;
                if (kl > 4 && kl < sizeof code + 4 && strncmp(e->string, "<|", 2) == 0) {
                    memcpy(code, e->string + 2, kl - 4);
                    code[kl - 4] = 0;
                    idx = fr_whisper_lang_index(code);
                }
                if (idx < 0 || idx >= v->n_lang || !cJSON_IsNumber(e) ||
                    e->valuedouble != v->lang_begin + idx) {
                    fr_err_setc(err, FR_ERR_UNSUPPORTED,
                                "%s: lang_to_id entry '%s' disagrees with the layout", file,
                                e->string ? e->string : "?");
                    return -1;
                }
            }
        }
        const cJSON *t2i = jget(g, "task_to_id");
        if (t2i) {
            const cJSON *tr = jget(t2i, "translate"), *tc = jget(t2i, "transcribe");
            if ((tr && (!cJSON_IsNumber(tr) || tr->valuedouble != v->translate)) ||
                (tc && (!cJSON_IsNumber(tc) || tc->valuedouble != v->transcribe))) {
                fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: task_to_id disagrees with the layout",
                            file);
                return -1;
            }
        }
        int mi = 0;
        const cJSON *mij = jget(g, "max_initial_timestamp_index");
        if (mij) {
            if (jint(g, "max_initial_timestamp_index", 0, FR_WHISPER_N_TIMESTAMPS, 0, &mi, file,
                     err))
                return -1;
            v->max_initial_ts = mi;
        } else {
            v->max_initial_ts = -1;
        }
    }
    v->suppress = int_list(jget(src, "suppress_tokens"), n_vocab, &v->n_suppress, file,
                           "suppress_tokens", err);
    if (!v->suppress) return -1;
    v->begin_suppress = int_list(jget(src, "begin_suppress_tokens"), n_vocab,
                                 &v->n_begin_suppress, file, "begin_suppress_tokens", err);
    if (!v->begin_suppress) return -1;
    return 0;
}

/* The byte-level alphabet's inverse: inv[code point] = byte, -1 when not in the table (code
 * points 0..323). */
static void bl_table(int inv[324]) {
    for (int i = 0; i < 324; i++) inv[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (direct) inv[b] = b;
        else inv[256 + n++] = b;
    }
}

/* tokenizer.json's model.vocab: the bytes of each text token (ByteLevel strings decoded). */
static int load_text_vocab_json(fr_whisper_model *m, const char *dir, fr_err *err) {
    fr_whisper_vocab *v = &m->vocab;
    cJSON *j = read_json(dir, "tokenizer.json", false, err);
    if (!j) return err->msg[0] ? -1 : 0;
    int rc = -1;
    const cJSON *vocab = jget(jget(j, "model"), "vocab");
    if (!cJSON_IsObject(vocab)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s/tokenizer.json: no model.vocab object", dir);
        goto out;
    }
    const char **strs = fr_xcalloc((size_t)v->n_text, sizeof *strs);
    size_t bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || !e->string) continue;
        double id = e->valuedouble;
        if (id >= 0 && id < v->n_text && id == floor(id)) {
            strs[(int)id] = e->string;
            bytes += strlen(e->string);
        }
    }
    v->text_bytes = fr_xmalloc(bytes + 1);
    v->text_off = fr_xmalloc(((size_t)v->n_text + 1) * sizeof *v->text_off);
    int inv[324];
    bl_table(inv);
    size_t o = 0;
    for (int i = 0; i < v->n_text; i++) {
        v->text_off[i] = (uint32_t)o;
        const unsigned char *s = (const unsigned char *)(strs[i] ? strs[i] : "");
        while (*s) { /* UTF-8 decode one code point, map it back to its byte */
            uint32_t cp;
            int k;
            if (s[0] < 0x80) cp = s[0], k = 1;
            else if ((s[0] & 0xE0) == 0xC0 && s[1]) cp = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu), k = 2;
            else cp = 0xFFFF, k = 1;
            int b = cp < 324 ? inv[cp] : -1;
            if (b < 0) { /* not a byte-level string: keep its bytes */
                for (int q = 0; q < k; q++) v->text_bytes[o++] = (char)s[q];
            } else {
                v->text_bytes[o++] = (char)b;
            }
            s += k;
        }
    }
    v->text_off[v->n_text] = (uint32_t)o;
    free(strs);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

static int feature_config_check(const fr_whisper_model *m, const char *dir, fr_err *err) {
    cJSON *p = read_json(dir, "preprocessor_config.json", false, err);
    if (!p) return err->msg[0] ? -1 : 0;
    int fs = 0, nfft = 0, hop = 0, sr = 0, chunk = 0, rc = -1;
    char file[64];
    snprintf(file, sizeof file, "preprocessor_config.json");
    if (jint(p, "feature_size", 1, FR_WHISPER_MAX_MELS, m->hp.n_mels, &fs, file, err) ||
        jint(p, "n_fft", 1, 1 << 16, FR_WHISPER_N_FFT, &nfft, file, err) ||
        jint(p, "hop_length", 1, 1 << 16, FR_WHISPER_HOP, &hop, file, err) ||
        jint(p, "sampling_rate", 1, 1 << 20, FR_WHISPER_SAMPLE_RATE, &sr, file, err) ||
        jint(p, "chunk_length", 1, 1 << 10, FR_WHISPER_CHUNK_S, &chunk, file, err))
        goto out;
    if (fs != m->hp.n_mels || nfft != FR_WHISPER_N_FFT || hop != FR_WHISPER_HOP ||
        sr != FR_WHISPER_SAMPLE_RATE || chunk != FR_WHISPER_CHUNK_S) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "%s/%s: features must be %d mels, n_fft 400, hop 160, 16 kHz, 30 s chunks",
                    dir, file, m->hp.n_mels);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(p);
    return rc;
}

static fr_whisper_model *load_hf(const char *dir, fr_err *err) {
    fr_whisper_model *m = fr_xcalloc(1, sizeof *m);
    m->path = fr_xstrdup(dir);
    m->format = FR_WHISPER_HF;
    char *cfg_path = fr_path_join(dir, "config.json");
    cJSON *c = read_json(dir, "config.json", true, err);
    cJSON *g = NULL;
    fr_st_set st = {0};
    wh_srcs S = {0};
    bool ok = false;
    if (!c) goto out;
    if (parse_hf_config(m, c, cfg_path, err)) goto out;
    g = read_json(dir, "generation_config.json", false, err);
    if (!g && err->msg[0]) goto out;
    if (parse_hf_generation(m, c, g, g ? "generation_config.json" : cfg_path, err)) goto out;
    if (feature_config_check(m, dir, err)) goto out;
    if (m->hp.n_audio_state % m->hp.n_audio_head || m->hp.n_text_state % m->hp.n_text_head) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: d_model is not a multiple of the heads",
                    cfg_path);
        goto out;
    }
    if (m->hp.n_audio_ctx * 2 != FR_WHISPER_N_FRAMES) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: max_source_positions must be 1500 (30 s)",
                    cfg_path);
        goto out;
    }
    if (fr_st_set_open(&st, dir, err)) goto out;
    int total = 0;
    for (int f = 0; f < st.n_files; f++) total += st.files[f].n_tensors;
    S.t = fr_xcalloc((size_t)(total ? total : 1), sizeof *S.t);
    S.file = st.where;
    for (int f = 0; f < st.n_files; f++)
        for (int i = 0; i < st.files[f].n_tensors; i++) {
            const fr_st_tensor *t = &st.files[f].tensors[i];
            wh_src *s = &S.t[S.n++];
            s->name = t->name;
            s->dtype = t->dtype;
            s->n_dims = t->n_dims > 4 ? 4 : t->n_dims;
            for (int k = 0; k < s->n_dims; k++) s->shape[k] = t->shape[k];
            if (t->n_dims > 4) s->shape[3] = -1; /* never matches */
            s->n_elem = t->n_elem;
            s->data = t->data;
        }
    if (bind_weights(m, &S, false, err)) goto out;
    const cJSON *tie = jget(c, "tie_word_embeddings");
    if (tie && cJSON_IsFalse(tie) && m->proj == m->tok_emb) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: proj_out.weight not found (not tied)", st.where);
        goto out;
    }
    if (load_text_vocab_json(m, dir, err)) goto out;
    ok = true;
out:
    free(S.t);
    fr_st_set_close(&st);
    cJSON_Delete(c);
    cJSON_Delete(g);
    free(cfg_path);
    if (!ok) {
        fr_whisper_free(m);
        return NULL;
    }
    return m;
}

/* ---------------------------------------------------------------- ggml */

typedef struct rd {
    const uint8_t *p;
    size_t n, o;
} rd;

static bool rd_i32(rd *r, int32_t *v) {
    if (r->n - r->o < 4) return false;
    memcpy(v, r->p + r->o, 4);
    r->o += 4;
    return true;
}

fr_whisper_model *fr_whisper_load_ggml_buffer(const uint8_t *data, size_t size, const char *name,
                                              fr_err *err) {
    fr_whisper_model *m = fr_xcalloc(1, sizeof *m);
    m->path = fr_xstrdup(name);
    m->format = FR_WHISPER_GGML;
    fr_whisper_hparams *hp = &m->hp;
    rd r = {data, size, 0};
    wh_srcs S = {0};
    char (*names)[GGML_MAX_NAME + 1] = NULL;
    bool ok = false;
    int32_t magic = 0, h[11];
    if (!rd_i32(&r, &magic) || magic != GGML_MAGIC) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a whisper.cpp ggml file (bad magic)", name);
        goto out;
    }
    for (int i = 0; i < 11; i++)
        if (!rd_i32(&r, &h[i])) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated hparams", name);
            goto out;
        }
    hp->n_vocab = h[0];
    hp->n_audio_ctx = h[1];
    hp->n_audio_state = h[2];
    hp->n_audio_head = h[3];
    hp->n_audio_layer = h[4];
    hp->n_text_ctx = h[5];
    hp->n_text_state = h[6];
    hp->n_text_head = h[7];
    hp->n_text_layer = h[8];
    hp->n_mels = h[9];
    int ftype = h[10] % 1000; /* whisper.cpp adds a quantisation version * 1000 */
    if (hp->n_vocab < 1 || hp->n_vocab > FR_WHISPER_MAX_VOCAB || hp->n_audio_ctx != FR_WHISPER_N_FRAMES / 2 ||
        hp->n_audio_state < 1 || hp->n_audio_state > FR_WHISPER_MAX_STATE ||
        hp->n_text_state != hp->n_audio_state || hp->n_audio_head < 1 ||
        hp->n_audio_state % hp->n_audio_head || hp->n_text_head < 1 ||
        hp->n_text_state % hp->n_text_head || hp->n_audio_layer < 1 ||
        hp->n_audio_layer > FR_WHISPER_MAX_LAYERS || hp->n_text_layer < 1 ||
        hp->n_text_layer > FR_WHISPER_MAX_LAYERS || hp->n_text_ctx < 1 ||
        hp->n_text_ctx > FR_WHISPER_MAX_TEXT_CTX || hp->n_mels < 1 ||
        hp->n_mels > FR_WHISPER_MAX_MELS || ftype < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: hparams out of range", name);
        goto out;
    }
    if (ftype > 1) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: ftype %d (quantised) is not supported: F32 or F16",
                    name, ftype);
        goto out;
    }
    hp->n_audio_ff = hp->n_text_ff = 4 * hp->n_audio_state;
    int32_t nm = 0, nf = 0;
    if (!rd_i32(&r, &nm) || !rd_i32(&r, &nf) || nm != hp->n_mels ||
        nf != FR_WHISPER_N_FFT / 2 + 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: mel filters must be n_mels x 201", name);
        goto out;
    }
    size_t fb = (size_t)nm * (size_t)nf * 4;
    if (r.n - r.o < fb) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated mel filters", name);
        goto out;
    }
    m->mel_filters = fr_xmalloc(fb);
    memcpy(m->mel_filters, r.p + r.o, fb);
    for (size_t i = 0; i < fb / 4; i++)
        if (!isfinite(m->mel_filters[i])) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: mel filters hold a non-finite value", name);
            goto out;
        }
    r.o += fb;
    int32_t n_words = 0;
    /* each word takes at least 4 bytes: bound the count by what is left */
    if (!rd_i32(&r, &n_words) || n_words < 1 || n_words > hp->n_vocab ||
        (size_t)n_words > (r.n - r.o) / 4) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: bad vocabulary size", name);
        goto out;
    }
    size_t vstart = r.o, vbytes = 0;
    for (int i = 0; i < n_words; i++) {
        int32_t len;
        if (!rd_i32(&r, &len) || len < 0 || (size_t)len > r.n - r.o) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated vocabulary (word %d)", name, i);
            goto out;
        }
        r.o += (size_t)len;
        vbytes += (size_t)len;
    }
    int n_text = n_words;
    {
        /* convert-h5-to-ggml.py writes vocab.json, whose last entry can be <|endoftext|> */
        size_t o = vstart;
        int32_t len = 0;
        for (int i = 0; i < n_words; i++) {
            memcpy(&len, r.p + o, 4);
            o += 4;
            if (i == n_words - 1 && len == 13 && memcmp(r.p + o, "<|endoftext|>", 13) == 0)
                n_text = n_words - 1;
            o += (size_t)len;
        }
    }
    if (vocab_layout(m, n_text, name, err)) goto out;
    {
        fr_whisper_vocab *v = &m->vocab;
        v->text_bytes = fr_xmalloc(vbytes + 1);
        v->text_off = fr_xmalloc(((size_t)n_text + 1) * sizeof *v->text_off);
        size_t o = vstart, t = 0;
        int space = -1;
        for (int i = 0; i < n_text; i++) {
            int32_t len;
            memcpy(&len, r.p + o, 4);
            o += 4;
            v->text_off[i] = (uint32_t)t;
            memcpy(v->text_bytes + t, r.p + o, (size_t)len);
            if (len == 1 && r.p[o] == ' ' && space < 0) space = i;
            t += (size_t)len;
            o += (size_t)len;
        }
        v->text_off[n_text] = (uint32_t)t;
        vocab_default_suppress(v, space);
    }
    /* tensors until the end */
    int cap = 0;
    while (r.o < r.n) {
        int32_t nd, nl, ty;
        if (!rd_i32(&r, &nd) || !rd_i32(&r, &nl) || !rd_i32(&r, &ty)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated tensor header", name);
            goto out;
        }
        if (nd < 1 || nd > 4 || nl < 1 || nl > GGML_MAX_NAME || (ty != 0 && ty != 1)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: bad tensor header (dims %d, name length %d, type %d)",
                        name, nd, nl, ty);
            goto out;
        }
        if (S.n == GGML_MAX_TENSORS) {
            fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: more than %d tensors", name, GGML_MAX_TENSORS);
            goto out;
        }
        int32_t ne[4];
        int64_t cnt = 1;
        for (int i = 0; i < nd; i++) {
            if (!rd_i32(&r, &ne[i]) || ne[i] < 1 || ne[i] > (1 << 30)) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: bad tensor dimension", name);
                goto out;
            }
            cnt *= ne[i];
            if (cnt > ((int64_t)1 << 34)) {
                fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: tensor too large", name);
                goto out;
            }
        }
        if ((size_t)nl > r.n - r.o) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated tensor name", name);
            goto out;
        }
        if (S.n == cap) {
            cap = cap ? 2 * cap : 64;
            S.t = fr_xrealloc(S.t, (size_t)cap * sizeof *S.t);
            names = fr_xrealloc(names, (size_t)cap * sizeof *names);
        }
        memcpy(names[S.n], r.p + r.o, (size_t)nl);
        names[S.n][nl] = 0;
        if (strlen(names[S.n]) != (size_t)nl) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor name holds a NUL byte", name);
            goto out;
        }
        for (int i = 0; i < nl; i++) /* names go into one-line messages */
            if ((unsigned char)names[S.n][i] < 0x20 || names[S.n][i] == 0x7f) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor name holds a control byte",
                            name);
                goto out;
            }
        r.o += (size_t)nl;
        size_t nbytes = (size_t)cnt * (ty ? 2u : 4u);
        if (nbytes > r.n - r.o) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s': truncated data", name,
                        names[S.n]);
            goto out;
        }
        wh_src *s = &S.t[S.n];
        memset(s, 0, sizeof *s);
        s->dtype = ty ? FR_DTYPE_F16 : FR_DTYPE_F32;
        s->n_dims = nd;
        for (int i = 0; i < nd; i++) s->shape[i] = ne[nd - 1 - i];
        s->n_elem = cnt;
        s->data = r.p + r.o;
        r.o += nbytes;
        S.n++;
    }
    for (int i = 0; i < S.n; i++) S.t[i].name = names[i];
    for (int i = 0; i < S.n; i++)
        for (int k = i + 1; k < S.n; k++)
            if (strcmp(S.t[i].name, S.t[k].name) == 0) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: tensor '%s' stored twice", name,
                            S.t[i].name);
                goto out;
            }
    S.file = name;
    if (bind_weights(m, &S, true, err)) goto out;
    ok = true;
out:
    free(S.t);
    free(names);
    if (!ok) {
        fr_whisper_free(m);
        return NULL;
    }
    return m;
}

fr_whisper_model *fr_whisper_load(const char *path, fr_err *err) {
    double t0 = fr_time_s();
    fr_whisper_model *m = NULL;
    if (fr_path_is_dir(path)) {
        m = load_hf(path, err);
    } else {
        if (!fr_path_exists(path)) {
            fr_err_setc(err, FR_ERR_NOT_FOUND, "%s: no such file or folder", path);
            return NULL;
        }
        fr_mmap map;
        if (fr_mmap_open(&map, path, err)) return NULL;
        m = fr_whisper_load_ggml_buffer(map.data, map.size, path, err);
        fr_mmap_close(&map);
    }
    if (m)
        fr_log(FR_LOG_INFO, "whisper: %s: %d+%d layers, d_model %d, %d mels, %d tokens, %.1f MiB "
               "of F32 weights, %.2f s",
               path, m->hp.n_audio_layer, m->hp.n_text_layer, m->hp.n_audio_state, m->hp.n_mels,
               m->hp.n_vocab, (double)m->arena_floats * 4 / 1048576.0, fr_time_s() - t0);
    return m;
}

void fr_whisper_free(fr_whisper_model *m) {
    if (!m) return;
    free(m->path);
    free(m->mel_filters);
    free(m->enc);
    free(m->dec);
    free(m->arena);
    free(m->vocab.suppress);
    free(m->vocab.begin_suppress);
    free(m->vocab.text_bytes);
    free(m->vocab.text_off);
    free(m);
}
