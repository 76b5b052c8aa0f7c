/* media_parts.c — see media_parts.h. The stages are reached through the assist handler's media
 * table (serve/media.c), so both doors share pools, limits and error mapping. Each stage runs as
 * a CPU step of the request's meter account (base64 + decode + text density: "decode_media";
 * OCR: "ocr"; ASR: "asr"), as the assist door meters the same stages. */
#include "serve/media_parts.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "meter/meter.h"
#include "serve/assist.h"
#include "serve/error.h"
#include "stages/image/density.h"

#define MAX_ENCODED (28u << 20) /* base64 characters of one part (~20 MB of media) */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static fr_assist_media g_media;      /* the stages of this build, set up once */
static double g_threshold = FR_DENSITY_DEFAULT_THRESHOLD; /* OCR when density >= this */
static fr_assist_config g_bounds;    /* the assist defaults: OCR / ASR time limits, pixel budget */

static void media_init(void) {
    fr_assist_media_default(&g_media);
    fr_assist_config_init(&g_bounds); /* only the numbers are used; the strings are freed */
    free(g_bounds.intent_model);
    free(g_bounds.templates);
    g_bounds.intent_model = g_bounds.templates = NULL;
}

/* The request's meter account, if any: a stage is a CPU step on it. */
typedef struct metered {
    fr_meter *m;       /* NULL: not metered */
    fr_meter_req *r;   /* the account */
    fr_meter_step *st; /* the running stage */
    const fr_cancel *cancel; /* OCR / ASR: the door's cancel check, or NULL */
} metered;

static void stage_begin(metered *mt, fr_meter_stage stage) {
    int dev = stage == FR_MSTAGE_OCR ? fr_assist_media_ocr_meter_device() : FR_METER_DEV_CPU;
    mt->st = mt->m && mt->r ? fr_meter_stage_begin(mt->m, mt->r, stage, dev) : NULL;
}

static void stage_end(metered *mt) {
    if (mt->st) fr_meter_step_end(mt->m, mt->st);
    mt->st = NULL;
}

void fr_api_media_set_threshold(double t) { g_threshold = t; }

void fr_api_media_set_bounds(double ocr_time_limit_s, uint64_t ocr_max_pixels,
                             double asr_time_limit_s_per_min) {
    pthread_once(&g_once, media_init); /* the defaults first, so they cannot overwrite these */
    g_bounds.ocr_time_limit_s = ocr_time_limit_s;
    g_bounds.ocr_max_pixels = ocr_max_pixels;
    g_bounds.asr_time_limit_s_per_min = asr_time_limit_s_per_min;
}

/* A media stage's failure → the error answer: status and type from the stage's error code
 * (serve/error.h), the JSON code the stage named (else the code's name), the message prefixed
 * with the part. */
static void media_fail(fr_api_error *err, const fr_assist_media_err *me, const char *param) {
    fr_err e = me->err;
    fr_err_prefix(&e, "%s", param);
    fr_api_error_from_err(err, &e, me->code, param);
}

/* Decodes base64 (after an optional "data:<type>;base64," prefix) into a malloc'd buffer. */
static uint8_t *decode(const char *s, const char *param, char *mime, size_t mime_cap, size_t *n_out,
                       fr_api_error *err) {
    size_t n = strlen(s);
    mime[0] = 0;
    if (!strncasecmp(s, "data:", 5)) {
        const char *comma = strchr(s, ',');
        const char *b64 = comma ? strstr(s, ";base64") : NULL;
        if (!comma || !b64 || b64 > comma) {
            fr_api_error_set(err, 400, "invalid_request_error", "invalid_data_url", param,
                             "%s: only base64 data URLs are accepted (data:<type>;base64,...)", param);
            return NULL;
        }
        size_t ml = (size_t)(b64 - (s + 5));
        if (ml >= mime_cap) ml = mime_cap - 1;
        memcpy(mime, s + 5, ml);
        mime[ml] = 0;
        n -= (size_t)(comma + 1 - s);
        s = comma + 1;
    } else if (!strncasecmp(s, "http:", 5) || !strncasecmp(s, "https:", 6)) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                         "%s: remote URLs are not fetched; send the image as a base64 data URL", param);
        return NULL;
    }
    if (n == 0) {
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_media", param, "%s: empty media", param);
        return NULL;
    }
    if (n > MAX_ENCODED) {
        fr_api_error_set(err, 413, "invalid_request_error", "media_too_large", param,
                         "%s: %zu base64 characters exceed the limit of %u", param, n, MAX_ENCODED);
        return NULL;
    }
    uint8_t *buf = fr_xmalloc(n / 4 * 3 + 3);
    size_t bad_at = 0;
    long dn = fr_assist_base64_decode(s, n, buf, &bad_at);
    if (dn <= 0) {
        free(buf);
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_base64", param,
                         dn < 0 ? "%s: invalid base64 at offset %zu" : "%s: empty media", param, bad_at);
        return NULL;
    }
    *n_out = (size_t)dn;
    return buf;
}

/* decode() as the start of the "decode_media" stage: the stage is begun on mt and, when decoding
 * fails, ended; on success it is left running for the media decoder. */
static uint8_t *decode_in_stage(metered *mt, const char *s, const char *param, char *mime,
                                size_t mime_cap, size_t *n_out, fr_api_error *err) {
    stage_begin(mt, FR_MSTAGE_DECODE_MEDIA);
    uint8_t *data = decode(s, param, mime, mime_cap, n_out, err);
    if (!data) stage_end(mt);
    return data;
}

/* ---- images for a vision-language model ---- */

typedef struct fetch_buf {
    fr_buf b;     /* the body so far */
    size_t cap;   /* most bytes taken */
    bool over;    /* the body went over cap */
} fetch_buf;

static size_t fetch_write(char *p, size_t size, size_t n, void *user) {
    fetch_buf *f = user;
    size_t k = size * n;
    if (f->b.len + k > f->cap) {
        f->over = true;
        return 0; /* aborts the transfer */
    }
    fr_buf_append(&f->b, p, k);
    return k;
}

/* GET url within the limits; the body malloc'd into *data. */
static int fetch_remote(const char *url, const char *param, const fr_api_limits *lim,
                        uint8_t **data, size_t *len, char *mime, size_t mime_cap,
                        fr_api_error *err) {
    CURL *h = curl_easy_init();
    if (!h) {
        fr_api_error_set(err, 500, "server_error", NULL, param, "%s: cannot start a fetch", param);
        return -1;
    }
    fetch_buf f = {.cap = lim->remote_max_bytes};
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(lim->remote_timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)lim->remote_max_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fetch_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    mime[0] = 0;
    if (ct) snprintf(mime, mime_cap, "%s", ct);
    curl_easy_cleanup(h);
    if (f.over || rc == CURLE_FILESIZE_EXCEEDED) {
        fr_buf_free(&f.b);
        fr_api_error_set(err, 413, "invalid_request_error", "media_too_large", param,
                         "%s: the remote image exceeds %zu bytes", param, lim->remote_max_bytes);
        return -1;
    }
    if (rc != CURLE_OK || status != 200 || f.b.len == 0) {
        fr_buf_free(&f.b);
        fr_api_error_set(err, 400, "invalid_request_error", "remote_image_failed", param,
                         "%s: fetching the image failed (%s, HTTP status %ld)", param,
                         rc != CURLE_OK ? (ebuf[0] ? ebuf : curl_easy_strerror(rc))
                                        : f.b.len ? "not 200" : "empty body",
                         status);
        return -1;
    }
    *data = (uint8_t *)f.b.data;
    *len = f.b.len;
    return 0;
}

int fr_api_media_image_bytes(const cJSON *part, const char *type, const char *param,
                             const fr_api_limits *lim, uint8_t **data, size_t *len, char *mime,
                             size_t mime_cap, fr_api_error *err) {
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(part, type);
    if (!strcmp(type, "image_url") && cJSON_IsObject(u)) u = cJSON_GetObjectItemCaseSensitive(u, "url");
    if (!cJSON_IsString(u)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s.%s%s must be a string (a base64 data URL)", param, type,
                         !strcmp(type, "image_url") ? ".url" : "");
        return -1;
    }
    const char *s = u->valuestring;
    bool remote = !strncasecmp(s, "http:", 5) || !strncasecmp(s, "https:", 6);
    metered mt = {lim->meter, lim->meter_req, NULL, lim->cancel};
    stage_begin(&mt, FR_MSTAGE_DECODE_MEDIA);
    int rc = 0;
    if (remote && !lim->allow_remote_images) {
        fr_api_error_set(err, 400, "invalid_request_error", "remote_image_refused", param,
                         "%s: remote image URLs are not fetched by this server (vision."
                         "allow_remote_images is off); send the image as a base64 data URL",
                         param);
        rc = -1;
    } else if (remote) {
        rc = fetch_remote(s, param, lim, data, len, mime, mime_cap, err);
    } else {
        *data = decode(s, param, mime, mime_cap, len, err);
        rc = *data ? 0 : -1;
    }
    stage_end(&mt);
    return rc;
}

static int image_part(const cJSON *part, const char *param, metered *mt, fr_buf *out,
                      fr_api_error *err) {
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(part, "image_url");
    const cJSON *url = cJSON_IsObject(iu) ? cJSON_GetObjectItemCaseSensitive(iu, "url") : iu;
    if (!cJSON_IsString(url)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s.image_url.url must be a string (a base64 data URL)", param);
        return -1;
    }
    if (!g_media.image_decode) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                         "%s: image input is unavailable in this build (%s)", param,
                         g_media.why_image ? g_media.why_image : "no image stage");
        return -1;
    }
    char mime[64];
    size_t n = 0;
    uint8_t *data = decode_in_stage(mt, url->valuestring, param, mime, sizeof mime, &n, err);
    if (!data) return -1;
    fr_assist_media_err me;
    memset(&me, 0, sizeof me);
    void *img = g_media.image_decode(g_media.ctx, data, n, mime[0] ? mime : NULL, &me);
    free(data);
    if (!img) {
        stage_end(mt);
        media_fail(err, &me, param);
        return -1;
    }
    double density = g_media.image_density ? g_media.image_density(g_media.ctx, img) : 0.0;
    stage_end(mt);
    int rc = -1;
    if (density < g_threshold) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                         "%s: the image looks like a picture (text density %.2f < %.2f), which needs "
                         "a vision-language model; this server runs none for images",
                         param, density, g_threshold);
    } else if (!g_media.ocr) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                         "%s: OCR is unavailable (%s)", param, g_media.why_ocr ? g_media.why_ocr : "not built");
    } else {
        fr_assist_ocr o;
        memset(&o, 0, sizeof o);
        fr_assist_bound bd = {.time_limit_s = g_bounds.ocr_time_limit_s,
                              .max_pixels = g_bounds.ocr_max_pixels,
                              .cancel = mt->cancel};
        stage_begin(mt, FR_MSTAGE_OCR);
        int orc = g_media.ocr(g_media.ctx, img, &bd, &o, &me); /* a stopped stage is metered too */
        stage_end(mt);
        if (orc == 0) {
            fr_buf_printf(out, "[text of the attached image]\n%s", o.text ? o.text : "");
            rc = 0;
        } else {
            media_fail(err, &me, param);
        }
        fr_assist_ocr_free(&o);
    }
    g_media.image_free(g_media.ctx, img);
    return rc;
}

/* Decoded audio → transcript, with the "decode_media" stage already running on mt (ended here,
 * after decoding) and ASR metered as "asr". *text malloc'd, *seconds the recording's length. */
static int transcribe(metered *mt, const uint8_t *data, size_t n, const char *mime,
                      const char *param, char **text, double *seconds, fr_api_error *err) {
    if (!g_media.audio_decode || !g_media.asr) {
        stage_end(mt);
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                         "%s: speech input is unavailable in this build (%s)", param,
                         g_media.why_asr ? g_media.why_asr : g_media.why_audio ? g_media.why_audio : "no ASR stage");
        return -1;
    }
    fr_assist_media_err me;
    memset(&me, 0, sizeof me);
    void *au = g_media.audio_decode(g_media.ctx, data, n, mime, &me);
    stage_end(mt);
    if (!au) {
        media_fail(err, &me, param);
        return -1;
    }
    double secs = g_media.audio_seconds ? g_media.audio_seconds(g_media.ctx, au) : 0;
    fr_assist_bound bd = {.time_limit_s = FR_MAX(FR_ASSIST_ASR_MIN_LIMIT_S,
                                                 g_bounds.asr_time_limit_s_per_min * secs / 60),
                          .cancel = mt->cancel};
    stage_begin(mt, FR_MSTAGE_ASR);
    char *t = g_media.asr(g_media.ctx, au, &bd, &me);
    stage_end(mt);
    g_media.audio_free(g_media.ctx, au);
    if (!t) {
        media_fail(err, &me, param);
        return -1;
    }
    *text = t;
    *seconds = secs;
    return 0;
}

static int audio_part(const cJSON *part, const char *param, metered *mt, fr_buf *out,
                      fr_api_error *err) {
    const cJSON *ia = cJSON_GetObjectItemCaseSensitive(part, "input_audio");
    const cJSON *d = cJSON_IsObject(ia) ? cJSON_GetObjectItemCaseSensitive(ia, "data") : NULL;
    const cJSON *f = cJSON_IsObject(ia) ? cJSON_GetObjectItemCaseSensitive(ia, "format") : NULL;
    if (!cJSON_IsString(d) || (f && !cJSON_IsString(f))) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s.input_audio must be {\"data\": base64, \"format\": \"wav\"|\"flac\"|\"ogg\"}", param);
        return -1;
    }
    char mime[64];
    size_t n = 0;
    uint8_t *data = decode_in_stage(mt, d->valuestring, param, mime, sizeof mime, &n, err);
    if (!data) return -1;
    if (!mime[0] && f) snprintf(mime, sizeof mime, "audio/%.40s", f->valuestring);
    char *t = NULL;
    double secs = 0;
    int rc = transcribe(mt, data, n, mime[0] ? mime : NULL, param, &t, &secs, err);
    free(data);
    if (rc) return -1;
    fr_buf_printf(out, "[transcript of the attached audio]\n%s", t);
    free(t);
    return 0;
}

int fr_api_media_transcribe(const uint8_t *data, size_t n, const char *mime, const char *param,
                            struct fr_meter *m, struct fr_meter_req *r, const fr_cancel *cancel,
                            char **text, double *seconds, fr_api_error *err) {
    pthread_once(&g_once, media_init);
    metered mt = {m, r, NULL, cancel};
    stage_begin(&mt, FR_MSTAGE_DECODE_MEDIA);
    return transcribe(&mt, data, n, mime, param, text, seconds, err);
}

int fr_api_media_part_text(const cJSON *part, const char *type, const char *param, fr_buf *out,
                           fr_api_error *err) {
    return fr_api_media_part_text_metered(part, type, param, NULL, NULL, NULL, out, err);
}

int fr_api_media_part_text_metered(const cJSON *part, const char *type, const char *param,
                                   struct fr_meter *m, struct fr_meter_req *r,
                                   const fr_cancel *cancel, fr_buf *out, fr_api_error *err) {
    pthread_once(&g_once, media_init);
    metered mt = {m, r, NULL, cancel};
    if (!strcmp(type, "image_url")) return image_part(part, param, &mt, out, err);
    if (!strcmp(type, "input_audio")) return audio_part(part, param, &mt, out, err);
    fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                     "content part type \"%.64s\" (%s) is not supported: text, image_url and "
                     "input_audio parts are", type, param);
    return -1;
}
