/* assist.c — the assist handler (assist.h): request hardening and parsing, the route, the stages
 * in plan order with per-stage timings, replies from templates or the LLM, the response JSON.
 * Both doors (POST /v1/assist, `frugal assist`) call fr_assist_handle and nothing else. */
#include "serve/assist.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/conf.h"
#include "base/mask.h"
#include "engine/engine.h"
#include "engine/sched.h"
#include "meter/meter.h"
#include "model/chat.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "serve/api.h"
#include "serve/error.h"
#include "serve/vlm.h"
#include "stages/budget/budget.h"
#include "stages/image/density.h"
#include "stages/nlu/attach.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/slots.h"
#include "stages/ocr/fields.h"

#define MAX_TOP_K 20
#define MAX_SLOTS 32
#define NLU_MAX_BYTES (16 * 1024) /* OCR text fed to NLU when there is no question */

struct fr_assist {
    fr_assist_config cfg;        /* settings (owned copy) */
    fr_intent_model *intent;     /* NULL when set-up failed */
    fr_intent_model *nlupp;      /* multi-label NLU++ intents, or NULL (not configured) */
    cJSON *templates;            /* {intent: text} (required at set-up)          */
    fr_assist_media media;       /* media stage entry points */
    struct fr_engine *engine;    /* LLM replies (NULL: templates) */
    const struct fr_model *model;/* the engine's model (tokenizer) */
    const char *tmpl;            /* chat template source */
    struct fr_meter *meter;      /* stage metering, or NULL */
    fr_vlm *vlm;                 /* pictures: a vision-language model (the server's), or NULL */
    struct fr_engine *vlm_engine;/* the engine that runs it (also when text replies are templates) */
    char setup_error[sizeof(fr_err)]; /* non-empty: every request gets 503 with this */
};

/* ---- config ------------------------------------------------------------------------------------ */

void fr_assist_config_init(fr_assist_config *c) {
    memset(c, 0, sizeof *c);
    c->intent_model = fr_data_path("models/intent-banking77.bin"); /* under the data root */
    c->nlupp_model = fr_data_path("models/intent-nlupp.bin");
    c->templates = fr_data_path("models/reply-templates.json");
    c->density_threshold = FR_DENSITY_DEFAULT_THRESHOLD;
    c->max_image_bytes = 20u * 1000u * 1000u;
    c->max_audio_bytes = (size_t)32 << 20;
    c->max_text_bytes = 16 * 1024;
    c->max_history = 64;
    c->max_depth = 32;
    c->top_k = 5;
    c->budget_tokens = 1024;
    c->llm_max_tokens = 256;
    c->ocr_time_limit_s = 10;
    c->ocr_max_pixels = 9000000;
    c->asr_time_limit_s_per_min = 30;
    c->llm = false;
}

void fr_assist_config_free(fr_assist_config *c) {
    free(c->intent_model);
    free(c->templates);
    free(c->nlupp_model);
    c->intent_model = c->templates = c->nlupp_model = NULL;
}

/* The settings file is read by the binary's one configuration loader (base/conf.h): errors name
 * the file, the line and the key. Integer settings must be integers. */
int fr_assist_config_apply(fr_assist_config *c, const fr_conf_doc *d, fr_err *err) {
    const cJSON *it;
    cJSON_ArrayForEach(it, d->root) {
        const char *k = it->string;
        double v = 0;
        long l = 0;
        const char *str;
        if (!strcmp(k, "intent_model") || !strcmp(k, "templates") || !strcmp(k, "nlupp_model")) {
            if (fr_conf_str(d, it, k, !strcmp(k, "nlupp_model"), 0, &str, err)) return -1;
            char **dst = !strcmp(k, "intent_model") ? &c->intent_model
                         : !strcmp(k, "templates") ? &c->templates : &c->nlupp_model;
            free(*dst);
            *dst = fr_xstrdup(str ? str : ""); /* nlupp_model null: off */
        } else if (!strcmp(k, "llm")) {
            if (fr_conf_bool(d, it, k, &c->llm, err)) return -1;
        } else if (!strcmp(k, "density_threshold")) {
            if (fr_conf_num(d, it, k, 0, 1, &v, err)) return -1;
            c->density_threshold = v;
        } else if (!strcmp(k, "max_image_bytes") || !strcmp(k, "max_audio_bytes") ||
                   !strcmp(k, "max_text_bytes")) {
            if (fr_conf_int(d, it, k, 1, 1000000000L, &l, err)) return -1;
            size_t *dst = k[4] == 'i' ? &c->max_image_bytes
                          : k[4] == 'a' ? &c->max_audio_bytes : &c->max_text_bytes;
            *dst = (size_t)l;
        } else if (!strcmp(k, "max_history")) {
            if (fr_conf_int(d, it, k, 0, 4096, &l, err)) return -1;
            c->max_history = (int)l;
        } else if (!strcmp(k, "max_depth")) {
            if (fr_conf_int(d, it, k, 2, 512, &l, err)) return -1;
            c->max_depth = (int)l;
        } else if (!strcmp(k, "top_k")) {
            if (fr_conf_int(d, it, k, 1, MAX_TOP_K, &l, err)) return -1;
            c->top_k = (int)l;
        } else if (!strcmp(k, "budget_tokens")) {
            if (fr_conf_int(d, it, k, 16, 1 << 20, &l, err)) return -1;
            c->budget_tokens = (int)l;
        } else if (!strcmp(k, "ocr_time_limit_s")) {
            if (fr_conf_num(d, it, k, 0.01, 3600, &v, err)) return -1;
            c->ocr_time_limit_s = v;
        } else if (!strcmp(k, "ocr_max_pixels")) {
            if (fr_conf_int(d, it, k, 10000, 1000000000L, &l, err)) return -1;
            c->ocr_max_pixels = (uint64_t)l;
        } else if (!strcmp(k, "asr_time_limit_s_per_min")) {
            if (fr_conf_num(d, it, k, 0.01, 3600, &v, err)) return -1;
            c->asr_time_limit_s_per_min = v;
        } else if (!strcmp(k, "llm_max_tokens")) {
            if (fr_conf_int(d, it, k, 1, 1 << 16, &l, err)) return -1;
            c->llm_max_tokens = (int)l;
        } else {
            return fr_conf_unknown(d, it, "", err);
        }
    }
    return 0;
}

int fr_assist_config_apply_json(fr_assist_config *c, const char *json, size_t len, fr_err *err) {
    fr_conf_doc d;
    int rc = fr_conf_parse(&d, json, len, NULL, err) ? -1 : fr_assist_config_apply(c, &d, err);
    fr_conf_free(&d);
    if (rc) fr_err_prefix(err, "assist config");
    return rc;
}

/* ---- set-up ------------------------------------------------------------------------------------ */

void fr_assist_ocr_free(fr_assist_ocr *o) {
    if (!o) return;
    for (int i = 0; i < o->n_lines; i++) free(o->lines[i].text);
    free(o->lines);
    free(o->text);
    memset(o, 0, sizeof *o);
}

static fr_assist *alloc_assist(const fr_assist_config *cfg) {
    fr_assist *a = fr_xcalloc(1, sizeof *a);
    a->cfg = *cfg;
    a->cfg.intent_model = cfg->intent_model ? fr_xstrdup(cfg->intent_model) : NULL;
    a->cfg.templates = cfg->templates ? fr_xstrdup(cfg->templates) : NULL;
    a->cfg.nlupp_model = cfg->nlupp_model ? fr_xstrdup(cfg->nlupp_model) : NULL;
    fr_assist_media_default(&a->media);
    return a;
}

static int load(fr_assist *a, fr_err *err) {
    if (!a->cfg.intent_model) {
        fr_err_set(err, "assist: no intent model configured");
        return -1;
    }
    a->intent = fr_intent_load(a->cfg.intent_model, err);
    if (!a->intent) return -1;
    if (a->cfg.nlupp_model && a->cfg.nlupp_model[0]) {
        a->nlupp = fr_intent_load(a->cfg.nlupp_model, err);
        if (!a->nlupp) return -1;
        if (!fr_intent_is_multilabel(a->nlupp)) {
            fr_err_set(err, "%s: not a multi-label (NLU++) intent model", a->cfg.nlupp_model);
            return -1;
        }
    }
    if (!a->cfg.templates) {
        fr_err_set(err, "no reply templates file configured");
        return -1;
    }
    if (!fr_path_exists(a->cfg.templates)) {
        fr_err_setc(err, FR_ERR_NOT_FOUND,
                    "reply templates file %s not found (set \"templates\" in the assist config "
                    "or --templates)", a->cfg.templates);
        return -1;
    }
    {
        size_t n = 0;
        char *t = fr_read_file(a->cfg.templates, 4u << 20, &n, err);
        if (!t) return -1;
        a->templates = cJSON_ParseWithLength(t, n);
        free(t);
        if (!cJSON_IsObject(a->templates)) {
            fr_err_set(err, "%s: not a JSON object of intent → reply text", a->cfg.templates);
            return -1;
        }
    }
    /* compile the slot patterns now, not on the first request */
    fr_slot tmp[1];
    if (fr_slots_extract("x", 1, NULL, tmp, 1, err) < 0) return -1;
    return 0;
}

fr_assist *fr_assist_new(const fr_assist_config *cfg, fr_err *err) {
    fr_assist *a = alloc_assist(cfg);
    if (load(a, err)) {
        fr_assist_free(a);
        return NULL;
    }
    return a;
}

void fr_assist_free(fr_assist *a) {
    if (!a) return;
    fr_intent_free(a->intent);
    fr_intent_free(a->nlupp);
    cJSON_Delete(a->templates);
    fr_assist_config_free(&a->cfg);
    free(a);
}

void fr_assist_set_media(fr_assist *a, const fr_assist_media *m) { a->media = *m; }

void fr_assist_set_llm(fr_assist *a, struct fr_engine *e, const struct fr_model *m,
                       const char *tmpl) {
    a->engine = tmpl ? e : NULL;
    a->model = m;
    a->tmpl = tmpl;
}

void fr_assist_set_meter(fr_assist *a, struct fr_meter *m) { a->meter = m; }
void fr_assist_set_vlm(fr_assist *a, fr_vlm *v, struct fr_engine *e) {
    a->vlm = v;
    a->vlm_engine = v ? e : NULL;
}

const fr_assist_config *fr_assist_config_of(const fr_assist *a) { return &a->cfg; }

fr_assist *fr_assist_for_server(struct fr_engine *e, const struct fr_model *m, const char *tmpl) {
    fr_assist_config cfg;
    fr_assist_config_init(&cfg);
    fr_err err = {0};
    const char *path = getenv("FRUGAL_ASSIST_CONFIG");
    int bad = 0;
    if (path && *path) {
        fr_conf_doc d;
        bad = fr_conf_load(&d, path, &err) || fr_assist_config_apply(&cfg, &d, &err);
        fr_conf_free(&d);
    }
    fr_assist *a = alloc_assist(&cfg);
    fr_assist_config_free(&cfg);
    if (bad || load(a, &err)) {
        snprintf(a->setup_error, sizeof a->setup_error, "%s", err.msg);
        fr_warn("assist: /v1/assist disabled: %s", err.msg);
    } else {
        fr_assist_set_llm(a, a->cfg.llm ? e : NULL, m, tmpl);
    }
    return a;
}

/* ---- hardening helpers ------------------------------------------------------------------------- */

int fr_assist_json_depth(const char *s, size_t n, int limit, char *top_key, size_t key_cap) {
    int depth = 0, maxd = 0;
    size_t ks = 0, ke = 0; /* last string seen at depth 1 */
    if (top_key && key_cap) top_key[0] = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            size_t st = ++i;
            while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
            if (depth == 1) ks = st, ke = i < n ? i : n;
        } else if (c == '{' || c == '[') {
            if (++depth > maxd) {
                maxd = depth;
                if (depth == 2 && top_key && key_cap) {
                    size_t k = FR_MIN(ke - ks, key_cap - 1);
                    memcpy(top_key, s + ks, k);
                    top_key[k] = 0;
                }
                if (maxd > limit) return maxd;
            }
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return maxd;
}

static signed char b64v(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return (signed char)(c - 'A');
    if (c >= 'a' && c <= 'z') return (signed char)(c - 'a' + 26);
    if (c >= '0' && c <= '9') return (signed char)(c - '0' + 52);
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

long fr_assist_base64_decode(const char *s, size_t n, uint8_t *out, size_t *bad_at) {
    uint32_t acc = 0;
    int q = 0, pad = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            if (q < 2 || ++pad > 2) goto bad_i;
            continue;
        }
        signed char v = b64v(c);
        if (v < 0 || pad) goto bad_i;
        acc = acc << 6 | (uint32_t)v;
        if (++q == 4) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
            q = 0;
            acc = 0;
        }
        continue;
    bad_i:
        if (bad_at) *bad_at = i;
        return -1;
    }
    if (q == 1) {
        if (bad_at) *bad_at = n;
        return -1;
    }
    if (pad && q + pad != 4) {
        if (bad_at) *bad_at = n;
        return -1;
    }
    if (q == 2) out[o++] = (uint8_t)(acc >> 4);
    if (q == 3) {
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    return (long)o;
}

/* ---- request ----------------------------------------------------------------------------------- */

typedef struct media_in {
    uint8_t *data;    /* decoded bytes (owned) */
    size_t n;         /* their length */
    char mime[64];    /* declared media type ("" = none) */
    const char *kind; /* sniffed: "PNG", "WAV", ... */
} media_in;

typedef struct areq {
    const char *text;      /* typed text (in root), or NULL */
    media_in image, audio; /* present when data != NULL */
    const cJSON *ticket;   /* object, or NULL */
    fr_budget_turn *hist;  /* history turns (point into root) */
    int n_hist;
    int tier;              /* -1 = not given */
    int top_k;             /* intents to return */
    int budget_tokens;     /* LLM prompt budget */
} areq;

static void areq_free(areq *q) {
    free(q->image.data);
    free(q->audio.data);
    free(q->hist);
}

#define BAD(st, code, param, ...)                                                              \
    do {                                                                                       \
        fr_api_error_set(e, st, "invalid_request_error", code, param, __VA_ARGS__);            \
        return -1;                                                                             \
    } while (0)

static const char *sniff_image(const uint8_t *d, size_t n) {
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return "PNG";
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "JPEG";
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return "WebP";
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) return "TIFF";
    return NULL;
}

static const char *sniff_audio(const uint8_t *d, size_t n) {
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WAVE", 4)) return "WAV";
    if (n >= 4 && !memcmp(d, "fLaC", 4)) return "FLAC";
    if (n >= 4 && !memcmp(d, "OggS", 4)) return "OGG";
    return NULL;
}

/* Declared media type → the sniffed kind it must match, or NULL when we do not take it. */
static const char *mime_kind(const char *mime, bool image) {
    static const char *const img[][2] = {{"image/png", "PNG"},   {"image/jpeg", "JPEG"},
                                         {"image/jpg", "JPEG"},  {"image/pjpeg", "JPEG"},
                                         {"image/webp", "WebP"}, {"image/tiff", "TIFF"},
                                         {"image/tif", "TIFF"}};
    static const char *const aud[][2] = {{"audio/wav", "WAV"},      {"audio/x-wav", "WAV"},
                                         {"audio/wave", "WAV"},     {"audio/vnd.wave", "WAV"},
                                         {"audio/flac", "FLAC"},    {"audio/x-flac", "FLAC"},
                                         {"audio/ogg", "OGG"},      {"application/ogg", "OGG"},
                                         {"audio/vorbis", "OGG"}};
    if (image) {
        for (size_t i = 0; i < FR_ARRAY_LEN(img); i++)
            if (!strcasecmp(mime, img[i][0])) return img[i][1];
    } else {
        for (size_t i = 0; i < FR_ARRAY_LEN(aud); i++)
            if (!strcasecmp(mime, aud[i][0])) return aud[i][1];
    }
    return NULL;
}

/* A base64 string or data URL (or, for audio, {"data", "format"}) into m. */
static int parse_media(const cJSON *it, const char *param, bool image, size_t max_bytes,
                       media_in *m, fr_api_error *e) {
    const char *what = image ? "image" : "audio";
    const char *s = NULL;
    if (!image && cJSON_IsObject(it)) { /* OpenAI input_audio: {"data": b64, "format": "wav"} */
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(it, "data");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "format");
        if (!cJSON_IsString(d))
            BAD(400, NULL, param, "%s.data must be a base64 string", param);
        if (f && !cJSON_IsNull(f)) {
            if (!cJSON_IsString(f)) BAD(400, NULL, param, "%s.format must be a string", param);
            snprintf(m->mime, sizeof m->mime, "audio/%.50s", f->valuestring);
        }
        s = d->valuestring;
    } else if (cJSON_IsString(it)) {
        s = it->valuestring;
    } else {
        BAD(400, NULL, param, "%s must be a string: base64 bytes or a data URL (data:%s/...;base64,...)",
            param, what);
    }
    size_t n = strlen(s);
    if (!strncasecmp(s, "data:", 5)) {
        const char *comma = memchr(s, ',', n);
        if (!comma)
            BAD(400, "invalid_data_url", param, "%s: a data URL needs a ',' before the data", param);
        const char *hdr = s + 5;
        size_t hn = (size_t)(comma - hdr);
        if (hn < 7 || strncasecmp(comma - 7, ";base64", 7))
            BAD(400, "invalid_data_url", param, "%s: only base64 data URLs are accepted (data:<type>;base64,...)", param);
        const char *semi = memchr(hdr, ';', hn);
        size_t mn = (size_t)(semi - hdr);
        snprintf(m->mime, sizeof m->mime, "%.*s", (int)FR_MIN(mn, sizeof m->mime - 1), hdr);
        n -= (size_t)(comma + 1 - s);
        s = comma + 1;
    }
    const char *want = NULL;
    if (m->mime[0]) {
        want = mime_kind(m->mime, image);
        if (!want)
            BAD(415, "unsupported_media_type", param,
                "%s: media type \"%.60s\" is not accepted (%s)", param, m->mime,
                image ? "PNG, JPEG, WebP or TIFF" : "WAV, FLAC or OGG");
    }
    if (n == 0) BAD(400, "empty_media", param, "%s is empty (zero-length %s)", param, what);
    /* size limit on the encoded text, before decoding anything */
    size_t max_enc = max_bytes / 3 * 4 + max_bytes / 32 + 8;
    if (n > max_enc)
        BAD(413, "media_too_large", param, "%s: %zu base64 characters exceed the %s limit of %zu bytes",
            param, n, what, max_bytes);
    m->data = fr_xmalloc(n / 4 * 3 + 3);
    size_t bad_at = 0;
    long dn = fr_assist_base64_decode(s, n, m->data, &bad_at);
    if (dn < 0)
        BAD(400, "invalid_base64", param, "%s is not valid base64 (at character %zu)", param,
            bad_at);
    m->n = (size_t)dn;
    if (m->n == 0) BAD(400, "empty_media", param, "%s is empty (zero-length %s)", param, what);
    if (m->n > max_bytes)
        BAD(413, "media_too_large", param, "%s: %zu bytes exceed the %s limit of %zu bytes",
            param, m->n, what, max_bytes);
    m->kind = image ? sniff_image(m->data, m->n) : sniff_audio(m->data, m->n);
    if (!m->kind) {
        const char *other = image ? sniff_audio(m->data, m->n) : sniff_image(m->data, m->n);
        if (other)
            BAD(415, "unsupported_media_type", param, "%s holds %s data, not %s", param, other,
                image ? "an image" : "audio");
        BAD(415, "unsupported_media_type", param, "%s: the data is not %s (unrecognised header)",
            param, image ? "PNG, JPEG, WebP or TIFF" : "WAV, FLAC or OGG");
    }
    if (want && strcmp(want, m->kind))
        BAD(415, "unsupported_media_type", param, "%s: declared %s but the data is %s", param,
            m->mime, m->kind);
    return 0;
}

static const cJSON *field(const cJSON *o, const char *k) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

static bool is_int(const cJSON *it) {
    return cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
           it->valuedouble == floor(it->valuedouble);
}

static int parse_request(const fr_assist *a, const cJSON *root, areq *q, fr_api_error *e) {
    const fr_assist_config *c = &a->cfg;
    q->tier = -1;
    q->top_k = c->top_k;
    q->budget_tokens = c->budget_tokens;
    const cJSON *it;
    if ((it = field(root, "text"))) {
        if (!cJSON_IsString(it)) BAD(400, NULL, "text", "text must be a string");
        if (strlen(it->valuestring) > c->max_text_bytes)
            BAD(413, "text_too_long", "text", "text exceeds the limit of %zu bytes",
                c->max_text_bytes);
        if (it->valuestring[0]) q->text = it->valuestring;
    }
    if ((it = field(root, "image")) &&
        parse_media(it, "image", true, c->max_image_bytes, &q->image, e))
        return -1;
    if ((it = field(root, "audio")) &&
        parse_media(it, "audio", false, c->max_audio_bytes, &q->audio, e))
        return -1;
    if ((it = field(root, "ticket"))) {
        if (!cJSON_IsObject(it))
            BAD(400, NULL, "ticket", "ticket must be a JSON object (a bill or a transaction)");
        q->ticket = it;
    }
    if ((it = field(root, "history"))) {
        if (!cJSON_IsArray(it)) BAD(400, NULL, "history", "history must be an array of turns");
        int n = cJSON_GetArraySize(it);
        if (n > c->max_history)
            BAD(400, "too_many_turns", "history", "history has %d turns; the limit is %d", n,
                c->max_history);
        q->hist = fr_xcalloc((size_t)(n ? n : 1), sizeof *q->hist);
        const cJSON *t;
        int i = 0;
        cJSON_ArrayForEach(t, it) {
            char p[32];
            snprintf(p, sizeof p, "history[%d]", i);
            if (cJSON_IsString(t)) {
                q->hist[i].role = i % 2 ? "assistant" : "user";
                q->hist[i].text = t->valuestring;
            } else if (cJSON_IsObject(t)) {
                const cJSON *r = field(t, "role"), *ct = field(t, "content");
                if (!ct) ct = field(t, "text");
                if ((r && !cJSON_IsString(r)) || !cJSON_IsString(ct))
                    BAD(400, NULL, p, "%s must be a string or {\"role\": string, \"content\": string}", p);
                q->hist[i].role = r ? r->valuestring : "user";
                q->hist[i].text = ct->valuestring;
            } else {
                BAD(400, NULL, p, "%s must be a string or {\"role\": string, \"content\": string}", p);
            }
            i++;
        }
        q->n_hist = i;
    }
    if ((it = field(root, "priority"))) {
        if (cJSON_IsString(it)) q->tier = fr_tier_parse(it->valuestring);
        else if (is_int(it) && it->valuedouble >= 0 && it->valuedouble <= 2) q->tier = it->valueint;
        else q->tier = -2;
        if (q->tier < 0) BAD(400, NULL, "priority", "priority must be \"P0\", \"P1\", \"P2\" or 0..2");
    }
    if ((it = field(root, "top_k"))) {
        if (!is_int(it) || it->valuedouble < 1 || it->valuedouble > MAX_TOP_K)
            BAD(400, NULL, "top_k", "top_k must be an integer in 1..%d", MAX_TOP_K);
        q->top_k = it->valueint;
    }
    if ((it = field(root, "budget_tokens"))) {
        if (!is_int(it) || it->valuedouble < 16 || it->valuedouble > (1 << 20))
            BAD(400, NULL, "budget_tokens", "budget_tokens must be an integer in 16..1048576");
        q->budget_tokens = it->valueint;
    }
    return 0;
}

/* ---- stages ------------------------------------------------------------------------------------ */

typedef struct run_state {
    fr_assist *a;
    const fr_assist_call *call;
    double ms[FR_STAGE_COUNT];   /* time per stage */
    bool ran[FR_STAGE_COUNT];    /* actually ran */
    double t0;                   /* current stage start */
    struct fr_meter_step *step;  /* current meter step */
} run_state;

static const fr_meter_stage meter_stage[FR_STAGE_COUNT] = {
    FR_MSTAGE_DECODE_MEDIA, FR_MSTAGE_DECODE_MEDIA, FR_MSTAGE_DECODE_MEDIA, FR_MSTAGE_ASR,
    FR_MSTAGE_OCR,          FR_MSTAGE_VISION,       FR_MSTAGE_NLU,          FR_MSTAGE_BUDGET,
    FR_MSTAGE_OTHER,        FR_MSTAGE_RESPOND};

static void stage_begin(run_state *rs, fr_stage s) {
    rs->step = NULL;
    /* the LLM's own prefill/decode steps are metered by the engine */
    if (rs->a->meter && rs->call && rs->call->meter && s != FR_STAGE_LLM)
        rs->step = fr_meter_stage_begin(rs->a->meter, rs->call->meter, meter_stage[s],
                                        s == FR_STAGE_OCR ? fr_assist_media_ocr_meter_device()
                                                          : FR_METER_DEV_CPU);
    rs->t0 = fr_time_s();
}

static void stage_end(run_state *rs, fr_stage s) {
    rs->ms[s] += (fr_time_s() - rs->t0) * 1000.0;
    rs->ran[s] = true;
    if (rs->step) fr_meter_step_end(rs->a->meter, rs->step);
    rs->step = NULL;
}

/* The request's set of inputs on its meter account (meter.h, fr_meter_modality_name). */
static void meter_modality(const run_state *rs, bool text, bool image, bool audio) {
    if (!rs->a->meter || !rs->call || !rs->call->meter) return;
    unsigned in = (text ? FR_MODALITY_TEXT : 0) | (image ? FR_MODALITY_IMAGE : 0) |
                  (audio ? FR_MODALITY_AUDIO : 0);
    fr_meter_request_set_modality(rs->a->meter, rs->call->meter, fr_meter_modality_name(in));
}

/* {"frugal": {"joules", "usd", "estimated"}}: the energy and cost of the stages run so far, all
 * ended on the CPU, so the figure is the one the ledger row gets (fr_meter_request_peek). */
static void add_frugal(const run_state *rs, cJSON *out) {
    if (!rs->a->meter || !rs->call || !rs->call->meter) return;
    fr_meter_req_summary sum;
    fr_meter_request_peek(rs->a->meter, rs->call->meter, &sum);
    cJSON *f = cJSON_AddObjectToObject(out, "frugal");
    cJSON_AddNumberToObject(f, "joules", sum.joules);
    cJSON_AddNumberToObject(f, "usd", sum.usd);
    cJSON_AddBoolToObject(f, "estimated", sum.estimated);
    cJSON_AddBoolToObject(f, "final", sum.final);
}

/* A media stage's failure → the error answer: status and type from the stage's error code
 * (serve/error.h), the JSON code the stage named, else `fallback` for a bad request, else the
 * code's name. */
static void media_error(const fr_assist_media_err *me, const char *param, const char *fallback,
                        fr_api_error *e) {
    const char *code = me->code                               ? me->code
                       : me->err.code == FR_ERR_BAD_REQUEST ? fallback
                                                              : NULL;
    fr_api_error_from_err(e, &me->err, code, param);
}

/* The value a template placeholder takes from the slots: the first slot of the kind (or, for
 * {currency} and {payee}, of the name); NULL when none. */
static const char *slot_value(const char *key, size_t kl, const fr_slot *sl, int ns) {
    static const struct { const char *key; int kind; } ph[] = {
        {"amount", FR_SLOT_AMOUNT},
        {"date", FR_SLOT_DATE},
        {"time", FR_SLOT_TIME},
        {"card_number", FR_SLOT_CARD_NUMBER},
        {"account_number", FR_SLOT_ACCOUNT_NUMBER},
        {"invoice_number", FR_SLOT_INVOICE_NUMBER},
        {"company_name", FR_SLOT_COMPANY_NAME},
        {"payee", FR_SLOT_COMPANY_NAME},
        {"currency", -1},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(ph); i++) {
        if (strlen(ph[i].key) != kl || strncmp(key, ph[i].key, kl)) continue;
        for (int j = 0; j < ns; j++) {
            bool match = ph[i].kind >= 0 ? (int)sl[j].kind == ph[i].kind
                                         : !strcmp(sl[j].name, ph[i].key);
            if (match) return sl[j].value[0] ? sl[j].value : sl[j].text;
        }
        if (ph[i].kind < 0) /* {currency}: the amount's own */
            for (int j = 0; j < ns; j++)
                if (sl[j].kind == FR_SLOT_AMOUNT && sl[j].currency[0]) return sl[j].currency;
        return NULL;
    }
    return NULL;
}

/* Template text with {amount}, {currency}, {date}, {time}, {card_number}, {account_number},
 * {invoice_number}, {company_name}, {payee}, {intent} and {document} filled from the slots (or
 * neutral words); {document} is `document` (the attachment's fields, or "" when none). */
static void render_template(const char *t, const char *intent, const fr_slot *sl, int ns,
                            const char *document, fr_buf *o) {
    static const struct { const char *key; const char *dflt; } dflt[] = {
        {"amount", "the amount"},       {"currency", "the currency"},
        {"date", "that date"},          {"time", "that time"},
        {"card_number", "your card"},   {"account_number", "your account"},
        {"invoice_number", "the invoice"}, {"company_name", "the merchant"},
        {"payee", "the payee"},
    };
    while (*t) {
        const char *b = strchr(t, '{');
        if (!b) {
            fr_buf_puts(o, t);
            return;
        }
        fr_buf_append(o, t, (size_t)(b - t));
        const char *en = strchr(b, '}');
        if (!en) {
            fr_buf_puts(o, b);
            return;
        }
        size_t kl = (size_t)(en - b - 1);
        bool done = false;
        if (kl == 6 && !strncmp(b + 1, "intent", 6)) {
            for (const char *p = intent; *p; p++) fr_buf_append(o, *p == '_' ? " " : p, 1);
            done = true;
        } else if (kl == 8 && !strncmp(b + 1, "document", 8)) {
            fr_buf_puts(o, document ? document : "");
            done = true;
        }
        for (size_t i = 0; !done && i < FR_ARRAY_LEN(dflt); i++) {
            if (strlen(dflt[i].key) != kl || strncmp(b + 1, dflt[i].key, kl)) continue;
            const char *v = slot_value(b + 1, kl, sl, ns);
            fr_buf_puts(o, v ? v : dflt[i].dflt);
            done = true;
        }
        if (!done) fr_buf_append(o, b, kl + 2);
        t = en + 1;
    }
}

static size_t count_tokens(void *ctx, const char *s, size_t n) {
    const struct fr_model *m = ctx;
    int32_t *ids = NULL;
    size_t nid = 0;
    fr_err err = {0};
    if (fr_tokenize(m->tok, s, n, false, &ids, &nid, &err)) return fr_budget_estimate(s, n);
    free(ids);
    return nid;
}

/* The LLM reply through the engine's submit path. 0 with text in *o, or -1 with *e. */
static int llm_reply(fr_assist *a, const char *prompt, const char *intent, int tier,
                     double t_arrival, double deadline, fr_buf *o, int *n_prompt,
                     fr_api_error *e) {
    cJSON *msgs = cJSON_CreateArray();
    cJSON *sys = cJSON_CreateObject();
    cJSON_AddStringToObject(sys, "role", "system");
    char sp[512];
    snprintf(sp, sizeof sp,
             "You are a concise, polite customer-service assistant of a bank. The customer's "
             "intent looks like: %s. Answer in two or three sentences; never repeat card or "
             "account numbers.",
             intent ? intent : "unknown");
    cJSON_AddStringToObject(sys, "content", sp);
    cJSON_AddItemToArray(msgs, sys);
    cJSON *usr = cJSON_CreateObject();
    cJSON_AddStringToObject(usr, "role", "user");
    cJSON_AddStringToObject(usr, "content", prompt);
    cJSON_AddItemToArray(msgs, usr);
    const struct fr_model *m = a->model;
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "",
                       .tools = NULL};
    fr_err ferr = {0};
    char *rendered = fr_chat_render(a->tmpl, msgs, &co, &ferr);
    cJSON_Delete(msgs);
    if (!rendered) {
        fr_api_error_set(e, 500, "server_error", "chat_template_error", NULL,
                         "Cannot render the chat template: %s", ferr.msg);
        return -1;
    }
    int32_t *ids = NULL;
    size_t nid = 0;
    int rc = fr_tokenize(m->tok, rendered, strlen(rendered), false, &ids, &nid, &ferr);
    free(rendered);
    if (rc || nid == 0) {
        free(ids);
        fr_api_error_set(e, 500, "server_error", NULL, NULL, "Cannot tokenize the prompt: %s",
                         ferr.msg);
        return -1;
    }
    int ctx = fr_engine_max_ctx(a->engine);
    int max_tokens = fr_api_max_tokens(-1, a->cfg.llm_max_tokens, ctx, nid, "budget_tokens", e);
    if (max_tokens < 0) { /* the assembled prompt fills the context: lower budget_tokens */
        free(ids);
        return -1;
    }
    *n_prompt = (int)nid;
    fr_req_params p;
    fr_api_req_params_init(&p, ids, nid, max_tokens, tier, t_arrival, deadline);
    p.sampling.temperature = 0; /* the reply of a support assistant is greedy */
    fr_admission adm;
    fr_req *r = fr_engine_submit(a->engine, &p, &adm);
    free(ids);
    if (!r) {
        fr_api_error_from_admission(e, &adm);
        return -1;
    }
    fr_req_info info;
    while (!fr_req_wait(r, o, 0.05, &info)) {
    }
    fr_req_release(r);
    if (info.end == FR_END_DEADLINE) {
        fr_api_error_set(e, 504, "timeout_error", "deadline_exceeded", NULL,
                         "The request's deadline (X-Deadline-Ms) passed before the LLM reply "
                         "finished; it was cancelled.");
        return -1;
    }
    if (info.end != FR_END_STOP && info.end != FR_END_LENGTH) {
        fr_api_error_set(e, info.end == FR_END_SHUTDOWN ? 503 : 500, "server_error",
                         fr_end_name(info.end), NULL, "The LLM reply did not finish (%s)%s%s",
                         fr_end_name(info.end), info.error[0] ? ": " : "", info.error);
        return -1;
    }
    return 0;
}

/* ---- the handler ------------------------------------------------------------------------------- */

/* Add a string that came from the client or from a stage: card numbers and IBANs masked
 * (base/mask.h; same length, so slot offsets into the question stay valid). */
static void add_masked(cJSON *o, const char *key, const char *text) {
    char *m = fr_mask_dup(text);
    cJSON_AddStringToObject(o, key, m);
    free(m);
}

static int error_out(const fr_api_error *e, char **json) {
    *json = fr_api_error_json(e);
    return e->status;
}

static void add_conf(cJSON *o, const char *k, double v) {
    cJSON_AddNumberToObject(o, k, round(v * 1e4) / 1e4);
}

/* Per-request state shared by the handler's steps. */
typedef struct areq_state {
    areq q;                         /* the parsed request */
    int tier;                       /* P0..P2 after door / body / default */
    run_state rs;                   /* per-stage timings and meter steps */
    fr_route_input ri;              /* what the route was told */
    fr_route_plan plan;             /* what it decided */
    void *img, *aud;                /* decoded media (media stage handles), or NULL */
    char *transcript;               /* ASR output (malloc'd), or NULL */
    fr_assist_ocr ocr;              /* OCR output */
    fr_assist_media_err me;         /* the last media stage error (the error's code points here) */
    fr_buf question;                /* text + transcript, card/account numbers masked */
    size_t tr_off;                  /* offset of the transcript in question */
    const char *nlu_src;            /* what NLU ran on: "text", "transcript", "ocr", ... */
    fr_intent_pred preds[MAX_TOP_K];/* in-scope intents, best first */
    fr_intent_pred nlupp[48];       /* NLU++ intents present in the question, most probable first */
    int n_nlupp;                    /* entries; -1: no NLU++ model (no "nlupp" block) */
    int n_pred;
    fr_intent_verdict verdict;      /* calibrated confidence and the out-of-scope rule */
    bool in_scope;                  /* NLU ran and found a confident in-scope intent */
    const char *oos_reason;         /* why not (static), when !in_scope */
    fr_slot slots[MAX_SLOTS];       /* slots found: the question's, then the document's */
    const char *slot_src[MAX_SLOTS];/* input of each slot: "text", "audio" or "image" */
    bool slot_has_span[MAX_SLOTS];  /* start/end are offsets into question */
    int n_slots;
    fr_fields fields;               /* key fields of the OCR text */
    bool have_fields;               /* any field found */
    bool fused;                     /* the intent was computed on question + OCR text */
    bool doc_in_reply;              /* the reply names the document's fields */
    fr_buf reply;                   /* the reply text */
    const char *reply_src;          /* "template" | "llm" | "handoff" | "vision" */
    fr_vlm_prompt vp;               /* the vision stage's prompt (image tokens before / after) */
    fr_budget_result br;            /* the LLM prompt (budget path) */
    int llm_prompt_tokens;          /* prompt tokens sent to the LLM (-1: none) */
} areq_state;

static void areq_state_free(const fr_assist *a, areq_state *x) {
    const fr_assist_media *md = &a->media;
    if (x->img) md->image_free(md->ctx, x->img);
    if (x->aud) md->audio_free(md->ctx, x->aud);
    free(x->transcript);
    fr_assist_ocr_free(&x->ocr);
    fr_buf_free(&x->question);
    fr_buf_free(&x->reply);
    fr_budget_result_free(&x->br);
    fr_vlm_prompt_free(&x->vp);
    areq_free(&x->q);
}

/* Step 1: body hardening before and around the JSON parse. The parsed object, or NULL with *e. */
static cJSON *parse_body(const fr_assist *a, const char *body, size_t len, fr_api_error *e) {
    if (!fr_utf8_valid(body, len)) {
        fr_api_error_set(e, 400, "invalid_request_error", "invalid_utf8", NULL,
                         "The request body is not valid UTF-8.");
        return NULL;
    }
    char top[48];
    int depth = fr_assist_json_depth(body, len, a->cfg.max_depth, top, sizeof top);
    if (depth > a->cfg.max_depth) {
        fr_api_error_set(e, 400, "invalid_request_error", "nesting_too_deep",
                         top[0] ? top : NULL,
                         "JSON nested deeper than %d levels%s%s%s; flatten the %s.",
                         a->cfg.max_depth, top[0] ? " (in \"" : "", top, top[0] ? "\")" : "",
                         !strcmp(top, "ticket") ? "ticket" : "request");
        return NULL;
    }
    /* the same strict parse as chat: one object, no trailing bytes, no NUL */
    return fr_api_parse_object(body, len, 0, e);
}

/* The tier: the door's (X-Priority), else the body's, else the door's default, else P1; never
 * better than the caller's cap (the API key's highest tier). */
static int pick_tier(const fr_assist_call *call, const areq *q) {
    int tier = call && call->tier >= 0 ? call->tier
               : q->tier >= 0          ? q->tier
               : call                  ? call->default_tier
                                       : FR_TIER_P1;
    if (tier < 0 || tier >= FR_N_TIERS) tier = FR_TIER_P1;
    if (call && tier < call->highest_tier) tier = call->highest_tier;
    return tier;
}

/* The OCR / ASR stages' cancel check (ctx: the fr_assist_call): the door's (client gone,
 * shutdown), then the caller's deadline (X-Deadline-Ms), so a stage stops when it passes. */
static fr_cancel_reason call_cancel(void *ctx) {
    const fr_assist_call *call = ctx;
    fr_cancel_reason r = fr_cancel_check(&call->cancel);
    if (!r && call->deadline > 0 && fr_time_s() >= call->deadline) r = FR_CANCEL_DEADLINE;
    return r;
}

/* 0 while the caller's deadline (X-Deadline-Ms) has not passed; else -1 with the 504 in *e. */
static int check_deadline(const fr_assist_call *call, const char *when, fr_api_error *e) {
    if (!call || call->deadline <= 0 || fr_time_s() < call->deadline) return 0;
    fr_api_error_set(e, 504, "timeout_error", "deadline_exceeded", NULL,
                     "The request's deadline (X-Deadline-Ms) passed %s.", when);
    return -1;
}

/* Step 2: the route's first pass (what to decode) from the request and stage availability. */
static void plan_route(const fr_assist *a, areq_state *x) {
    const fr_assist_media *md = &a->media;
    fr_route_input *ri = &x->ri;
    fr_route_input_init(ri);
    ri->has_text = x->q.text != NULL;
    ri->has_image = x->q.image.data != NULL;
    ri->has_audio = x->q.audio.data != NULL;
    ri->has_ticket = x->q.ticket != NULL;
    ri->threshold = a->cfg.density_threshold;
    ri->llm = a->engine != NULL;
    ri->available[FR_STAGE_DECODE_IMAGE] = md->image_decode && md->image_free;
    ri->available[FR_STAGE_DENSITY] = md->image_density != NULL;
    ri->available[FR_STAGE_OCR] = md->ocr != NULL;
    ri->available[FR_STAGE_DECODE_AUDIO] = md->audio_decode && md->audio_free;
    ri->available[FR_STAGE_ASR] = md->asr != NULL;
    ri->available[FR_STAGE_NLU] = a->intent != NULL;
    ri->unavailable_reason[FR_STAGE_DECODE_IMAGE] = md->why_image;
    ri->unavailable_reason[FR_STAGE_DENSITY] = md->why_image;
    ri->unavailable_reason[FR_STAGE_OCR] = md->why_ocr;
    ri->unavailable_reason[FR_STAGE_DECODE_AUDIO] = md->why_audio;
    ri->unavailable_reason[FR_STAGE_ASR] = md->why_asr;
    ri->available[FR_STAGE_VISION] = a->vlm && a->vlm_engine && a->tmpl && a->model;
    if (!ri->available[FR_STAGE_VISION])
        ri->unavailable_reason[FR_STAGE_VISION] =
            "unavailable: no vision-language model is served (pictures are not described)";
    ri->question_visual = fr_route_question_visual(x->q.text, NULL);
    fr_route_plan_make(ri, &x->plan);
}

/* Step 3a: decode the image, measure its density, re-plan (OCR vs vision). 0, or -1 with *e. */
static int run_image(const fr_assist *a, areq_state *x, fr_api_error *e) {
    const fr_assist_media *md = &a->media;
    if (!x->plan.run[FR_STAGE_DECODE_IMAGE]) return 0;
    fr_assist_media_err *me = &x->me; /* outlives the step: *e may point into it */
    memset(me, 0, sizeof *me);
    stage_begin(&x->rs, FR_STAGE_DECODE_IMAGE);
    x->img = md->image_decode(md->ctx, x->q.image.data, x->q.image.n,
                              x->q.image.mime[0] ? x->q.image.mime : NULL, me);
    stage_end(&x->rs, FR_STAGE_DECODE_IMAGE);
    if (!x->img) {
        media_error(me, "image", "invalid_image", e);
        return -1;
    }
    if (x->plan.run[FR_STAGE_DENSITY]) {
        stage_begin(&x->rs, FR_STAGE_DENSITY);
        x->ri.density = md->image_density(md->ctx, x->img);
        stage_end(&x->rs, FR_STAGE_DENSITY);
        x->ri.image_decoded = isfinite(x->ri.density);
    }
    fr_route_plan_make(&x->ri, &x->plan); /* second pass: the density decides OCR vs vision */
    return 0;
}

/* Step 3b: decode the audio and transcribe it. 0, or -1 with *e. */
static int run_audio(const fr_assist *a, areq_state *x, fr_api_error *e) {
    const fr_assist_media *md = &a->media;
    if (!x->plan.run[FR_STAGE_DECODE_AUDIO]) return 0;
    fr_assist_media_err *me = &x->me; /* outlives the step: *e may point into it */
    memset(me, 0, sizeof *me);
    stage_begin(&x->rs, FR_STAGE_DECODE_AUDIO);
    x->aud = md->audio_decode(md->ctx, x->q.audio.data, x->q.audio.n,
                              x->q.audio.mime[0] ? x->q.audio.mime : NULL, me);
    stage_end(&x->rs, FR_STAGE_DECODE_AUDIO);
    if (!x->aud) {
        media_error(me, "audio", "invalid_audio", e);
        return -1;
    }
    if (!x->plan.run[FR_STAGE_ASR]) return 0;
    memset(me, 0, sizeof *me);
    fr_cancel cc = {call_cancel, (void *)x->rs.call};
    double secs = md->audio_seconds ? md->audio_seconds(md->ctx, x->aud) : 0;
    fr_assist_bound bd = {.time_limit_s = FR_MAX(FR_ASSIST_ASR_MIN_LIMIT_S,
                                                 a->cfg.asr_time_limit_s_per_min * secs / 60),
                          .cancel = x->rs.call ? &cc : NULL};
    stage_begin(&x->rs, FR_STAGE_ASR);
    x->transcript = md->asr(md->ctx, x->aud, &bd, me); /* a stopped stage is metered too */
    stage_end(&x->rs, FR_STAGE_ASR);
    if (!x->transcript) {
        media_error(me, "audio", "asr_failed", e);
        return -1;
    }
    return 0;
}

/* Step 3c: OCR of a decoded text-like image. 0, or -1 with *e. Vision is never faked: the plan
 * reports it unavailable. */
static int run_ocr(const fr_assist *a, areq_state *x, fr_api_error *e) {
    const fr_assist_media *md = &a->media;
    if (!x->plan.run[FR_STAGE_OCR]) return 0;
    fr_assist_media_err *me = &x->me; /* outlives the step: *e may point into it */
    memset(me, 0, sizeof *me);
    fr_cancel cc = {call_cancel, (void *)x->rs.call};
    fr_assist_bound bd = {.time_limit_s = a->cfg.ocr_time_limit_s,
                          .max_pixels = a->cfg.ocr_max_pixels,
                          .cancel = x->rs.call ? &cc : NULL};
    stage_begin(&x->rs, FR_STAGE_OCR);
    int orc = md->ocr(md->ctx, x->img, &bd, &x->ocr, me); /* a stopped stage is metered too */
    stage_end(&x->rs, FR_STAGE_OCR);
    if (orc) {
        media_error(me, "image", "ocr_failed", e);
        return -1;
    }
    return 0;
}

/* Step 4 helpers. */

/* Which input a byte range of the question came from. */
static const char *question_source(const areq_state *x, size_t start) {
    if (x->transcript && x->transcript[0] && start >= x->tr_off) return "audio";
    return "text";
}

/* Appends a slot taken from the attachment's OCR fields (no offsets: it is not in question). */
static void add_field_slot(areq_state *x, fr_slot_kind kind, const char *name, const char *value) {
    if (!value[0] || x->n_slots >= MAX_SLOTS) return;
    fr_slot *s = &x->slots[x->n_slots];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->name = name;
    snprintf(s->text, sizeof s->text, "%s", value);
    snprintf(s->value, sizeof s->value, "%s", value);
    x->slot_src[x->n_slots] = "image";
    x->slot_has_span[x->n_slots] = false;
    x->n_slots++;
}

/* The OCR fields (amount, currency, date, invoice number, payee) as slots from the image. */
static void add_ocr_fields(areq_state *x) {
    fr_fields_extract(x->ocr.text, &x->fields);
    const fr_fields *f = &x->fields;
    x->have_fields = f->amount[0] || f->currency[0] || f->date[0] || f->invoice_no[0] || f->payee[0];
    if (f->amount[0]) {
        char v[64];
        snprintf(v, sizeof v, "%s%s%s", f->amount, f->currency[0] ? " " : "", f->currency);
        add_field_slot(x, FR_SLOT_AMOUNT, "amount", v);
        if (x->n_slots) {
            fr_slot *s = &x->slots[x->n_slots - 1];
            s->amount = strtod(f->amount, NULL);
            snprintf(s->currency, sizeof s->currency, "%s", f->currency);
        }
    }
    add_field_slot(x, FR_SLOT_N_KINDS, "currency", f->currency);
    add_field_slot(x, FR_SLOT_DATE, "date", f->date);
    add_field_slot(x, FR_SLOT_INVOICE_NUMBER, "invoice_number", f->invoice_no);
    add_field_slot(x, FR_SLOT_COMPANY_NAME, "payee", f->payee);
}

/* The in-scope intents (top-k) of one text and the out-of-scope verdict. */
typedef struct nlu_result {
    fr_intent_pred preds[MAX_TOP_K]; /* best first */
    int n_pred;                      /* entries */
    fr_intent_verdict v;             /* calibrated confidence, out-of-scope rule */
} nlu_result;

/* 0, or -1 with *ferr. */
static int classify(const fr_assist *a, const areq_state *x, const char *t, size_t n,
                    nlu_result *r, fr_err *ferr) {
    r->n_pred = fr_intent_assess(a->intent, t, n, r->preds, x->q.top_k, &r->v, ferr);
    return r->n_pred < 0 ? -1 : 0;
}

static void take_result(areq_state *x, const nlu_result *r) {
    memcpy(x->preds, r->preds, sizeof x->preds);
    x->n_pred = r->n_pred;
    x->verdict = r->v;
    x->in_scope = r->n_pred > 0 && r->v.in_scope;
    x->oos_reason = x->in_scope ? NULL : r->v.reason;
}

/* Step 4, part 1: the question is the typed text, then the transcript on a line of its own
 * (x->tr_off marks where it starts). */
static void nlu_question(areq_state *x) {
    if (x->q.text) fr_buf_puts(&x->question, x->q.text);
    if (x->transcript && x->transcript[0]) {
        if (x->question.len) fr_buf_puts(&x->question, "\n");
        x->tr_off = x->question.len;
        fr_buf_puts(&x->question, x->transcript);
    }
}

/* Step 4, part 2: the intent and the slots of the question alone (*have_q: qr holds its intent).
 * 0, or -1 with ferr set. */
static int nlu_on_question(const fr_assist *a, areq_state *x, nlu_result *qr, bool *have_q,
                           fr_err *ferr) {
    *have_q = false;
    if (!x->question.len) return 0;
    int rc = classify(a, x, x->question.data, x->question.len, qr, ferr);
    if (!rc && a->nlupp) {
        int k = fr_intent_select(a->nlupp, x->question.data, x->question.len, x->nlupp,
                                 (int)FR_ARRAY_LEN(x->nlupp), ferr);
        if (k < 0) rc = -1;
        x->n_nlupp = FR_MIN(k, (int)FR_ARRAY_LEN(x->nlupp));
    }
    *have_q = !rc;
    int ns = rc ? -1 : fr_slots_extract(x->question.data, x->question.len, NULL, x->slots,
                                        MAX_SLOTS, ferr);
    if (ns < 0) rc = -1;
    for (int i = 0; i < ns; i++) {
        x->slot_src[i] = question_source(x, x->slots[i].start);
        x->slot_has_span[i] = true;
    }
    x->n_slots = ns < 0 ? 0 : ns;
    if (*have_q) take_result(x, qr);
    return rc;
}

/* Step 4, part 3: the document's fields become slots; the OCR text joins the question for the
 * intent when the question refers to the attachment, has no in-scope intent of its own, or is
 * absent, and that joined intent is kept unless it is out of scope while the question alone is in
 * scope. 0, or -1 with ferr set. */
static int nlu_with_document(const fr_assist *a, areq_state *x, const nlu_result *qr, bool have_q,
                             fr_err *ferr) {
    add_ocr_fields(x);
    bool refers = x->question.len && fr_nlu_refers_to_attachment(x->question.data, x->question.len);
    x->doc_in_reply = refers || !x->question.len || !x->in_scope;
    if (!x->doc_in_reply) return 0;
    fr_buf t = {0};
    if (x->question.len) {
        fr_buf_append(&t, x->question.data, x->question.len);
        fr_buf_puts(&t, "\n");
    }
    fr_buf_append(&t, x->ocr.text, FR_MIN(strlen(x->ocr.text), (size_t)NLU_MAX_BYTES));
    nlu_result fr = {0};
    int rc = classify(a, x, t.data, t.len, &fr, ferr);
    fr_buf_free(&t);
    if (!rc && (fr.v.in_scope || !have_q || !qr->v.in_scope)) {
        bool typed = x->q.text != NULL, spoken = x->transcript && x->transcript[0];
        take_result(x, &fr);
        x->fused = true;
        x->nlu_src = typed && spoken ? "text+audio+image"
                     : typed         ? "text+image"
                     : spoken        ? "audio+image"
                                     : "image";
    }
    return rc;
}

/* Step 4, part 4: card / account numbers never leave in clear: mask them in the question we
 * echo (same length, so the slot spans stay valid). */
static void mask_question_numbers(areq_state *x) {
    for (int i = 0; i < x->n_slots; i++) {
        const fr_slot *s = &x->slots[i];
        if (!x->slot_has_span[i]) continue;
        if (s->kind != FR_SLOT_CARD_NUMBER && s->kind != FR_SLOT_ACCOUNT_NUMBER) continue;
        char tmp[FR_SLOT_TEXT_MAX * 4];
        size_t sl = s->end - s->start;
        if (sl >= sizeof tmp) continue;
        size_t mlen = fr_slot_mask(x->question.data + s->start, sl, tmp, sizeof tmp);
        if (mlen == sl) memcpy(x->question.data + s->start, tmp, sl);
    }
}

/* Step 4: NLU. The question is the typed text + the transcript; its slots come from it (source
 * "text" or "audio"). When OCR ran, the document's fields become slots (source "image") and the
 * OCR text may join the question for the intent (nlu_with_document). Card / account numbers are
 * masked in the question we echo. Sets the cascade's input (ri.nlu). 0, or -1 with *e. */
static int run_nlu(const fr_assist *a, areq_state *x, fr_api_error *e) {
    nlu_question(x);
    bool has_ocr = x->ocr.text && x->ocr.text[0];
    x->ri.nlu = FR_ROUTE_NLU_UNSURE;
    x->oos_reason = "nothing to understand: no text, transcript or OCR text";
    if (x->plan.run[FR_STAGE_NLU] && !x->question.len && !has_ocr) {
        x->plan.run[FR_STAGE_NLU] = false;
        x->plan.reason[FR_STAGE_NLU] = "no text: the transcript / OCR text is empty";
    }
    if (!x->plan.run[FR_STAGE_NLU]) {
        if (x->q.image.data && !x->rs.ran[FR_STAGE_OCR])
            x->oos_reason = "nothing to understand: the image is a picture without text and "
                            "vision is unavailable";
        fr_route_plan_reply(&x->ri, &x->plan);
        return 0;
    }
    fr_err ferr = {0};
    stage_begin(&x->rs, FR_STAGE_NLU);
    bool typed = x->q.text != NULL, spoken = x->transcript && x->transcript[0];
    x->nlu_src = typed && spoken ? "text+audio" : typed ? "text" : "audio";
    nlu_result qr = {0};
    bool have_q = false;
    int rc = nlu_on_question(a, x, &qr, &have_q, &ferr);
    if (!rc && has_ocr) rc = nlu_with_document(a, x, &qr, have_q, &ferr);
    x->ri.nlu = x->in_scope ? FR_ROUTE_NLU_CONFIDENT : FR_ROUTE_NLU_UNSURE;
    fr_route_plan_reply(&x->ri, &x->plan);
    stage_end(&x->rs, FR_STAGE_NLU);
    if (rc) {
        fr_err_prefix(&ferr, "NLU failed");
        fr_api_error_from_err(e, &ferr, "nlu_failed", NULL);
        return -1;
    }
    mask_question_numbers(x);
    return 0;
}

/* Step 4b: the picture through the vision-language model (serve/vlm.h) at the route's keep
 * ratio: one user message holding the image, then the question; its greedy generation is the
 * reply. Metered as the request's vision stage (image and generation). 0, or -1 with *e. */
static int run_vision(fr_assist *a, areq_state *x, double t_arrival, fr_api_error *e) {
    if (!x->plan.run[FR_STAGE_VISION]) return 0;
    const struct fr_model *m = a->model;
    cJSON *msgs = cJSON_CreateArray(), *usr = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    cJSON *ip = cJSON_CreateObject(), *tp = cJSON_CreateObject();
    cJSON_AddStringToObject(ip, "type", "image");
    cJSON_AddItemToArray(parts, ip);
    cJSON_AddStringToObject(tp, "type", "text");
    cJSON_AddStringToObject(tp, "text", x->q.text ? x->q.text : "Describe this picture.");
    cJSON_AddItemToArray(parts, tp);
    cJSON_AddStringToObject(usr, "role", "user");
    cJSON_AddItemToObject(usr, "content", parts);
    cJSON_AddItemToArray(msgs, usr);
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = m->bos_token_str ? m->bos_token_str : "",
                       .eos_token = m->eos_token_str ? m->eos_token_str : "",
                       .tools = NULL};
    fr_err ferr = {0};
    stage_begin(&x->rs, FR_STAGE_VISION);
    char *rendered = fr_chat_render(a->tmpl, msgs, &co, &ferr);
    cJSON_Delete(msgs);
    int32_t *raw = NULL;
    size_t n_raw = 0;
    int rc = -1;
    fr_req *r = NULL;
    if (!rendered || fr_tokenize(m->tok, rendered, strlen(rendered), false, &raw, &n_raw, &ferr)) {
        fr_api_error_set(e, 500, "server_error", "chat_template_error", NULL,
                         "Cannot render or tokenize the picture's prompt: %s", ferr.msg);
        goto out;
    }
    fr_api_image im = {.data = x->q.image.data, .len = x->q.image.n};
    snprintf(im.mime, sizeof im.mime, "%s", x->q.image.mime);
    snprintf(im.param, sizeof im.param, "image");
    fr_cancel cc = {call_cancel, (void *)x->rs.call};
    fr_vlm_opts o = {.keep_ratio = x->plan.vision_keep_ratio,
                     .cancel = x->rs.call ? &cc : NULL,
                     .time_limit_s = FR_ASSIST_VISION_LIMIT_S};
    if (fr_vlm_prepare(a->vlm, raw, n_raw, &im, 1, &o, NULL, NULL, &x->vp, e)) goto out;
    int ctx = fr_engine_max_ctx(a->vlm_engine);
    int max_tokens = fr_api_max_tokens(-1, a->cfg.llm_max_tokens, ctx, x->vp.n, "image", e);
    if (max_tokens < 0) goto out;
    fr_req_params p;
    fr_api_req_params_init(&p, x->vp.ids, x->vp.n, max_tokens, x->tier, t_arrival,
                           x->rs.call ? x->rs.call->deadline : 0);
    p.sampling.temperature = 0;
    p.img_embd = x->vp.embd;
    p.n_img_rows = x->vp.n_rows;
    p.image_token_id = m->hp.image_token_id;
    p.rope_pos = x->vp.rope_pos;
    fr_admission adm;
    r = fr_engine_submit(a->vlm_engine, &p, &adm);
    if (!r) {
        fr_api_error_from_admission(e, &adm);
        goto out;
    }
    fr_req_info info;
    while (!fr_req_wait(r, &x->reply, 0.05, &info)) {
    }
    if (info.end != FR_END_STOP && info.end != FR_END_LENGTH) {
        fr_api_error_set(e, info.end == FR_END_DEADLINE ? 504 : info.end == FR_END_SHUTDOWN ? 503 : 500,
                         info.end == FR_END_DEADLINE ? "timeout_error" : "server_error",
                         info.end == FR_END_DEADLINE ? "deadline_exceeded" : fr_end_name(info.end),
                         NULL, "The picture's answer did not finish (%s)%s%s",
                         fr_end_name(info.end), info.error[0] ? ": " : "", info.error);
        goto out;
    }
    x->llm_prompt_tokens = (int)x->vp.n;
    x->reply_src = "vision";
    rc = 0;
out:
    fr_req_release(r);
    stage_end(&x->rs, FR_STAGE_VISION);
    free(rendered);
    free(raw);
    return rc;
}

/* Step 5a: the LLM reply: budget assembler, then the engine. 0, or -1 with *e. */
static int reply_llm(fr_assist *a, areq_state *x, const char *intent, double t_arrival,
                     fr_api_error *e) {
    fr_err ferr = {0};
    stage_begin(&x->rs, FR_STAGE_BUDGET);
    fr_budget_input bi = {.question = x->question.len ? x->question.data : NULL,
                          .ocr_text = x->ocr.text,
                          .ticket = x->q.ticket,
                          .history = x->q.hist,
                          .n_history = x->q.n_hist,
                          .budget_tokens = x->q.budget_tokens,
                          .count = a->model && a->model->tok ? count_tokens : NULL,
                          .count_ctx = (void *)a->model};
    int brc = fr_budget_assemble(&bi, &x->br, &ferr);
    stage_end(&x->rs, FR_STAGE_BUDGET);
    if (brc) {
        fr_api_error_from_err(e, &ferr, NULL, "budget_tokens");
        return -1;
    }
    stage_begin(&x->rs, FR_STAGE_LLM);
    int lrc = llm_reply(a, x->br.text, intent, x->tier, t_arrival,
                        x->rs.call ? x->rs.call->deadline : 0, &x->reply,
                        &x->llm_prompt_tokens, e);
    stage_end(&x->rs, FR_STAGE_LLM);
    if (lrc) return -1;
    x->reply_src = "llm";
    return 0;
}

/* "amount 1210.00 USD, date 2024-03-15, invoice number INV-7, payee Acme Ltd" from the slots
 * that came from the image ("" when none). */
static void document_summary(const areq_state *x, fr_buf *o) {
    for (int i = 0; i < x->n_slots; i++) {
        if (strcmp(x->slot_src[i], "image")) continue;
        const fr_slot *s = &x->slots[i];
        if (!strcmp(s->name, "currency") && x->fields.amount[0]) continue; /* in the amount */
        if (o->len) fr_buf_puts(o, ", ");
        for (const char *p = s->name; *p; p++) fr_buf_append(o, *p == '_' ? " " : p, 1);
        fr_buf_puts(o, " ");
        fr_buf_puts(o, s->value);
    }
}

/* A template by key, or NULL. */
static const char *template_of(const fr_assist *a, const char *key) {
    const cJSON *t = a->templates ? cJSON_GetObjectItemCaseSensitive(a->templates, key) : NULL;
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Step 5b: the template reply for the intent (or "_no_intent" / "_default"), followed, when the
 * attachment joined NLU and its fields were read, by "_attachment" naming them. */
static void reply_template(const fr_assist *a, areq_state *x, const char *intent) {
    stage_begin(&x->rs, FR_STAGE_TEMPLATE);
    const char *tt = x->plan.handoff ? template_of(a, "_handoff")
                     : intent        ? template_of(a, intent)
                                     : template_of(a, "_no_intent");
    if (!tt && !x->plan.handoff) tt = template_of(a, "_default");
    if (!tt) tt = x->plan.handoff ? "I can't answer this one myself, so I have passed your message "
                                    "to a colleague who will get back to you shortly."
                  : intent ? "Thanks for reaching out about {intent}. An agent will look into it "
                             "and get back to you shortly."
                           : "Thanks for your message. An agent will look into it and get back to "
                             "you shortly.";
    fr_buf doc = {0};
    document_summary(x, &doc);
    render_template(tt, intent ? intent : "", x->slots, x->n_slots, doc.data, &x->reply);
    if (x->doc_in_reply && doc.len) {
        const char *at = template_of(a, "_attachment");
        fr_buf_puts(&x->reply, " ");
        render_template(at ? at : "On the document I read: {document}.", intent ? intent : "",
                        x->slots, x->n_slots, doc.data, &x->reply);
    }
    fr_buf_free(&doc);
    stage_end(&x->rs, FR_STAGE_TEMPLATE);
    x->reply_src = x->plan.handoff ? "handoff" : "template";
}

/* Step 5: the reply cascade, as run_nlu left the plan: the intent's template when it is in scope
 * and confident; else the LLM when one is configured; else the hand-off reply. 0, or -1 with *e. */
static int make_reply(fr_assist *a, areq_state *x, double t_arrival, fr_api_error *e) {
    const char *intent = x->in_scope ? x->preds[0].name : NULL;
    if (x->rs.ran[FR_STAGE_VISION]) return 0; /* the vision-language model answered */
    if (x->plan.run[FR_STAGE_LLM]) return reply_llm(a, x, intent, t_arrival, e);
    reply_template(a, x, intent);
    return 0;
}

/* Step 6 helpers: the response's parts. */
static void add_route(cJSON *out, const areq_state *x) {
    cJSON *route = cJSON_AddObjectToObject(out, "route");
    cJSON *mods = cJSON_AddArrayToObject(route, "modalities");
    if (x->q.text) cJSON_AddItemToArray(mods, cJSON_CreateString("text"));
    if (x->q.audio.data) cJSON_AddItemToArray(mods, cJSON_CreateString("audio"));
    if (x->q.image.data) cJSON_AddItemToArray(mods, cJSON_CreateString("image"));
    if (x->q.ticket) cJSON_AddItemToArray(mods, cJSON_CreateString("ticket"));
    if (x->q.n_hist) cJSON_AddItemToArray(mods, cJSON_CreateString("history"));
    cJSON *run = cJSON_AddArrayToObject(route, "stages_run");
    cJSON *skip = cJSON_AddArrayToObject(route, "stages_skipped");
    for (int s = 0; s < FR_STAGE_COUNT; s++) {
        if (x->rs.ran[s]) {
            cJSON_AddItemToArray(run, cJSON_CreateString(fr_stage_name((fr_stage)s)));
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "stage", fr_stage_name((fr_stage)s));
            cJSON_AddStringToObject(o, "reason",
                                    x->plan.reason[s] ? x->plan.reason[s] : "not needed");
            cJSON_AddItemToArray(skip, o);
        }
    }
    if (x->ri.image_decoded) {
        add_conf(route, "density", x->ri.density);
        cJSON_AddStringToObject(route, "image_is", x->plan.image_is_text ? "text" : "picture");
    }
    cJSON_AddNumberToObject(route, "threshold", x->ri.threshold);
    if (x->rs.ran[FR_STAGE_VISION]) {
        cJSON *v = cJSON_AddObjectToObject(route, "vision");
        cJSON_AddStringToObject(v, "why", x->plan.vision_why);
        cJSON_AddNumberToObject(v, "keep_ratio", x->plan.vision_keep_ratio);
        cJSON_AddNumberToObject(v, "image_tokens", (double)x->vp.image_tokens);
        cJSON_AddNumberToObject(v, "image_tokens_kept", (double)x->vp.image_tokens_kept);
    }
    cJSON_AddStringToObject(route, "tier", fr_tier_name(x->tier));
}

static void add_ocr(cJSON *out, const areq_state *x) {
    if (!x->rs.ran[FR_STAGE_OCR]) {
        cJSON_AddNullToObject(out, "ocr");
        return;
    }
    cJSON *oc = cJSON_AddObjectToObject(out, "ocr");
    add_masked(oc, "text", x->ocr.text ? x->ocr.text : "");
    cJSON *lines = cJSON_AddArrayToObject(oc, "lines");
    for (int i = 0; i < x->ocr.n_lines; i++) {
        cJSON *l = cJSON_CreateObject();
        add_masked(l, "text", x->ocr.lines[i].text ? x->ocr.lines[i].text : "");
        add_conf(l, "confidence", x->ocr.lines[i].confidence);
        cJSON_AddItemToArray(lines, l);
    }
    if (x->ocr.engine) cJSON_AddStringToObject(oc, "engine", x->ocr.engine);
    if (x->ocr.scale > 0 && x->ocr.scale < 1) /* downscaled to the OCR pixel budget */
        cJSON_AddNumberToObject(oc, "scale", round(x->ocr.scale * 1000) / 1000);
}

static void add_nlu(cJSON *out, const areq_state *x) {
    cJSON *in = cJSON_AddObjectToObject(out, "intent");
    if (x->in_scope) {
        cJSON_AddStringToObject(in, "name", x->preds[0].name);
        add_conf(in, "confidence", x->preds[0].confidence);
    } else {
        /* out of scope: the confidence is that of the verdict (1 - the best in-scope intent's) */
        cJSON_AddStringToObject(in, "name", "out_of_scope");
        add_conf(in, "confidence", x->n_pred > 0 ? 1.0 - x->verdict.confidence : 1.0);
        cJSON_AddStringToObject(in, "reason", x->oos_reason ? x->oos_reason : "");
    }
    if (x->nlu_src) cJSON_AddStringToObject(in, "input", x->nlu_src);
    else cJSON_AddNullToObject(in, "input");
    cJSON *alts = cJSON_AddArrayToObject(out, "alternatives");
    for (int i = x->in_scope ? 1 : 0; i < x->n_pred; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", x->preds[i].name);
        add_conf(o, "confidence", x->preds[i].confidence);
        cJSON_AddItemToArray(alts, o);
    }
    cJSON *sa = cJSON_AddArrayToObject(out, "slots");
    for (int i = 0; i < x->n_slots; i++) {
        const fr_slot *s = &x->slots[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s->name);
        add_masked(o, "text", s->text);
        add_masked(o, "value", s->value);
        cJSON_AddStringToObject(o, "source", x->slot_src[i]);
        if (x->slot_has_span[i]) {
            cJSON_AddNumberToObject(o, "start", (double)s->start);
            cJSON_AddNumberToObject(o, "end", (double)s->end);
        }
        cJSON_AddItemToArray(sa, o);
    }
    if (x->n_nlupp < 0) return;
    /* the structured ticket's label sets: NLU++ intents and the question's slots by NLU++ name */
    cJSON *np = cJSON_AddObjectToObject(out, "nlupp");
    cJSON *ni = cJSON_AddArrayToObject(np, "intents");
    for (int i = 0; i < x->n_nlupp; i++) cJSON_AddItemToArray(ni, cJSON_CreateString(x->nlupp[i].name));
    cJSON *ns = cJSON_AddArrayToObject(np, "slots");
    for (int i = 0; i < x->n_slots; i++) {
        const fr_slot *s = &x->slots[i];
        if (!x->slot_has_span[i] || s->kind == FR_SLOT_CARD_NUMBER || s->kind == FR_SLOT_ACCOUNT_NUMBER ||
            s->kind == FR_SLOT_INVOICE_NUMBER)
            continue; /* not NLU++ slot types */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s->kind == FR_SLOT_AMOUNT ? "amount_of_money" : s->name);
        add_masked(o, "text", s->text);
        add_masked(o, "value", s->value);
        cJSON_AddNumberToObject(o, "start", (double)s->start);
        cJSON_AddNumberToObject(o, "end", (double)s->end);
        cJSON_AddItemToArray(ns, o);
    }
}

/* Step 6: the response JSON (docs/ASSIST.md). */
static cJSON *build_response(const areq_state *x, double t_start) {
    cJSON *out = cJSON_CreateObject();
    char id[48];
    fr_api_new_id(id, sizeof id, "assist-");
    cJSON_AddStringToObject(out, "id", id);
    add_route(out, x);
    if (x->question.len) add_masked(out, "question", x->question.data);
    else cJSON_AddNullToObject(out, "question");
    if (x->transcript) add_masked(out, "transcript", x->question.data + x->tr_off);
    else cJSON_AddNullToObject(out, "transcript");
    add_ocr(out, x);
    add_nlu(out, x);
    add_masked(out, "response", x->reply.data ? x->reply.data : "");
    cJSON_AddStringToObject(out, "response_source", x->reply_src);
    if (x->rs.ran[FR_STAGE_BUDGET]) {
        cJSON *b = cJSON_AddObjectToObject(out, "budget");
        cJSON_AddNumberToObject(b, "budget_tokens", x->q.budget_tokens);
        cJSON_AddNumberToObject(b, "tokens", x->br.tokens);
        cJSON_AddNumberToObject(b, "key_fields_kept", x->br.key_fields_kept);
        cJSON_AddNumberToObject(b, "key_fields_total", x->br.key_fields_total);
        cJSON_AddNumberToObject(b, "turns_kept", x->br.turns_kept);
        cJSON_AddNumberToObject(b, "prompt_tokens", x->llm_prompt_tokens);
    }
    cJSON *tm = cJSON_AddObjectToObject(out, "timings_ms");
    for (int s = 0; s < FR_STAGE_COUNT; s++)
        if (x->rs.ran[s])
            cJSON_AddNumberToObject(tm, fr_stage_name((fr_stage)s), round(x->rs.ms[s] * 1000) / 1000);
    cJSON_AddNumberToObject(tm, "total", round((fr_time_s() - t_start) * 1e6) / 1000);
    return out;
}

/* The handler: a list of named steps; the first that fails writes *e and ends the request. */
int fr_assist_handle(fr_assist *a, const char *body, size_t len, const fr_assist_call *call,
                     char **json) {
    fr_api_error ebuf, *e = &ebuf;
    double t_start = fr_time_s();
    if (a->setup_error[0]) {
        fr_api_error_set(e, 503, "server_error", "assist_unavailable", NULL,
                         "The assist endpoint is not available: %s", a->setup_error);
        return error_out(e, json);
    }
    cJSON *root = parse_body(a, body, len, e);
    if (!root) return error_out(e, json);
    areq_state *x = fr_xcalloc(1, sizeof *x);
    x->n_nlupp = a->nlupp ? 0 : -1;
    x->rs.a = a;
    x->rs.call = call;
    x->reply_src = "template";
    x->llm_prompt_tokens = -1;
    double t_arrival = call && call->t_arrival > 0 ? call->t_arrival : t_start;
    int status = 200;
    cJSON *out = NULL;
    if (parse_request(a, root, &x->q, e)) goto fail;
    meter_modality(&x->rs, x->q.text || x->q.ticket || x->q.n_hist, x->q.image.data != NULL,
                   x->q.audio.data != NULL);
    if (!x->q.text && !x->q.image.data && !x->q.audio.data && !x->q.ticket && !x->q.n_hist) {
        fr_api_error_set(e, 400, "invalid_request_error", "empty_request", NULL,
                         "The request carries nothing to work on: give text, image, audio, "
                         "ticket or history.");
        goto fail;
    }
    x->tier = pick_tier(call, &x->q);
    if (check_deadline(call, "before work began", e)) goto fail;
    plan_route(a, x);
    if (run_image(a, x, e) || run_audio(a, x, e) || run_ocr(a, x, e) || run_nlu(a, x, e) ||
        run_vision(a, x, t_arrival, e) || make_reply(a, x, t_arrival, e) || check_deadline(call, "before it finished", e))
        goto fail;
    out = build_response(x, t_start);
    add_frugal(&x->rs, out);
    *json = cJSON_PrintUnformatted(out);
    if (!*json) {
        fr_api_error_set(e, 500, "server_error", NULL, NULL, "cannot serialise the response");
        goto fail;
    }
    goto done;
fail:
    status = error_out(e, json);
done:
    cJSON_Delete(out);
    areq_state_free(a, x);
    free(x);
    cJSON_Delete(root);
    return status;
}
