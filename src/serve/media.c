/* media.c — the media stages this build links into the assist handler's media table
 * (serve/assist.h): image decode (stages/image/image.h) with the text-density estimate
 * (stages/image/density.h), OCR on a shared pool of the configured reader (PP-OCR or tesseract,
 * stages/ocr/ocr.h; fr_assist_media_set_ocr), audio decode +
 * resample (stages/audio/audio.h) and ASR on a shared pocketsphinx pool (stages/asr/asr.h).
 *
 * Design: the pools are process-wide, created once (pthread_once) on the first call of
 * fr_assist_media_default, and live until the process ends; the engines inside them are created
 * lazily by the pools themselves, so a server that never sees an image or a recording never
 * loads tesseract or pocketsphinx. A stage whose resources are missing (no tessdata, no acoustic
 * model) gets a NULL entry and a reason, which the route reports as "unavailable: ...".
 * A stage error keeps the code the stage raised it with (fr_err.code: too large, unsupported
 * media, bad request, timeout, ...), which decides the HTTP status (serve/error.h); the adapter
 * adds the JSON code: over a limit "media_too_large", a media type that is not taken or disagrees
 * with the bytes "unsupported_media_type", corrupt / truncated / empty "invalid_image" /
 * "invalid_audio"; a page over the OCR pixel budget that cannot be downscaled legibly
 * "ocr_pixel_budget"; OCR and ASR stopped by the request's fr_assist_bound "ocr_timeout" /
 * "asr_timeout" (time limit), "shutting_down", "client_gone" or "deadline_exceeded".
 *
 * Thread safety: every adapter only touches its arguments and the thread-safe pools.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meter/meter.h"
#include "serve/assist.h"
#include "stages/asr/asr.h"
#include "stages/audio/audio.h"
#include "stages/image/density.h"
#include "stages/image/image.h"
#include "stages/ocr/ocr.h"

static struct {
    pthread_once_t once;   /* set-up guard */
    char engine[16];       /* the configured OCR reader ("" = auto), fr_assist_media_set_ocr */
    char ppocr_dir[1024];  /* the PP-OCR models folder ("" = the default) */
    char device[32];       /* PP-OCR's device ("" = the CPU) */
    int ocr_mdev;          /* the OCR stage's meter device (FR_METER_DEV_CPU unless on CUDA) */
    fr_ocr_pool *ocr;      /* shared OCR engines, or NULL */
    fr_asr_pool *asr;      /* shared ASR decoders, or NULL */
    char why_ocr[300];     /* why OCR is unavailable */
    char why_asr[300];     /* why ASR is unavailable */
} g = {.once = PTHREAD_ONCE_INIT};

const char *fr_assist_media_code(const fr_err *err, const char *invalid_code) {
    return err->code == FR_ERR_TOO_LARGE     ? "media_too_large"
           : err->code == FR_ERR_UNSUPPORTED ? "unsupported_media_type"
           : err->code == FR_ERR_BAD_REQUEST ? invalid_code
                                             : NULL;
}

/* A decoder's error → the media error: the code as raised, the JSON code by that code. */
static void set_err(fr_assist_media_err *e, const fr_err *err, const char *invalid_code) {
    e->err = *err;
    e->code = fr_assist_media_code(err, invalid_code);
}

static void *img_decode(void *ctx, const uint8_t *data, size_t n, const char *mime,
                        fr_assist_media_err *e) {
    (void)ctx;
    fr_image *img = fr_xcalloc(1, sizeof *img);
    fr_err err = {0};
    if (fr_img_decode(data, n, mime, NULL, 1, img, &err)) {
        free(img);
        fr_err_prefix(&err, "image");
        set_err(e, &err, "invalid_image");
        return NULL;
    }
    return img;
}

static double img_density(void *ctx, void *img) {
    (void)ctx;
    fr_density d;
    fr_density_measure(img, &d);
    return d.score;
}

static void img_free(void *ctx, void *img) {
    (void)ctx;
    fr_image_free(img);
    free(img);
}

/* A stage stopped by its bounds → its JSON code (the fr_err code, set by the stage from the
 * reason, decides the status). */
static void stopped_err(fr_assist_media_err *e, fr_cancel_reason why, const char *stage,
                        const fr_err *err) {
    e->err = *err;
    e->code = why == FR_CANCEL_TIMEOUT ? (!strcmp(stage, "ocr") ? "ocr_timeout" : "asr_timeout")
                                       : fr_cancel_reason_name(why);
}

static int run_ocr(void *ctx, void *img, const fr_assist_bound *b, fr_assist_ocr *out,
                   fr_assist_media_err *e) {
    (void)ctx;
    fr_ocr_result r;
    memset(&r, 0, sizeof r);
    fr_err err = {0};
    fr_ocr_limits lim = {0};
    if (b) {
        lim.time_limit_s = b->time_limit_s;
        lim.max_pixels = b->max_pixels;
        lim.cancel = b->cancel;
    }
    fr_ocr_status rc = fr_ocr_pool_run_limited(g.ocr, img, b ? &lim : NULL, &r, &err);
    if (rc == FR_OCR_STOPPED) {
        stopped_err(e, r.stopped, "ocr", &err);
        fr_info("ocr: %s (%s)", fr_cancel_reason_name(r.stopped), err.msg);
        return -1;
    }
    if (rc) {
        e->code = rc == FR_OCR_OVER_BUDGET ? "ocr_pixel_budget" : "ocr_failed";
        e->err = err;
        return -1;
    }
    out->text = r.text ? r.text : fr_xstrdup("");
    r.text = NULL;
    out->scale = r.scale;
    out->engine = fr_ocr_kind_name(fr_ocr_pool_kind(g.ocr));
    out->n_lines = (int)r.n_lines;
    out->lines = fr_xcalloc(r.n_lines ? r.n_lines : 1, sizeof *out->lines);
    for (size_t i = 0; i < r.n_lines; i++) {
        out->lines[i].text = r.lines[i].text;
        r.lines[i].text = NULL;
        out->lines[i].confidence = r.lines[i].conf / 100.0f;
    }
    fr_ocr_result_free(&r);
    return 0;
}

static void *aud_decode(void *ctx, const uint8_t *data, size_t n, const char *mime,
                        fr_assist_media_err *e) {
    (void)ctx;
    (void)mime; /* the request parser already matched the declared type to the magic bytes */
    fr_audio *a = fr_xcalloc(1, sizeof *a);
    fr_err err = {0};
    if (fr_audio_decode(data, n, NULL, FR_ASR_RATE, a, &err)) {
        free(a);
        set_err(e, &err, "invalid_audio");
        return NULL;
    }
    return a;
}

static double aud_seconds(void *ctx, void *a) {
    (void)ctx;
    return ((fr_audio *)a)->seconds;
}

static char *run_asr(void *ctx, void *aud, const fr_assist_bound *b, fr_assist_media_err *e) {
    (void)ctx;
    fr_audio *a = aud;
    int16_t *pcm = fr_xmalloc((a->n ? a->n : 1) * sizeof *pcm);
    if (a->n) fr_audio_to_s16(a->pcm, a->n, pcm);
    fr_asr_result r;
    memset(&r, 0, sizeof r);
    fr_err err = {0};
    fr_asr_limits lim = {0};
    if (b) {
        lim.time_limit_s = b->time_limit_s;
        lim.cancel = b->cancel;
    }
    int rc = fr_asr_pool_transcribe_pcm_limited(g.asr, pcm, a->n, b ? &lim : NULL, &r, &err);
    free(pcm);
    if (rc == FR_ASR_STOPPED) {
        stopped_err(e, r.stopped, "asr", &err);
        fr_info("asr: %s (%s)", fr_cancel_reason_name(r.stopped), err.msg);
        return NULL;
    }
    if (rc) {
        e->code = "asr_failed";
        e->err = err;
        return NULL;
    }
    if (r.vad) /* the VAD runs inside the asr stage: its time is metered there */
        fr_debug("asr: vad %d span(s), %.2f of %.2f s decoded, vad %.3f s", r.vad_spans,
                 r.speech_s, r.audio_s, r.vad_s);
    char *t = r.text ? r.text : fr_xstrdup("");
    r.text = NULL;
    fr_asr_result_free(&r);
    return t;
}

static void aud_free(void *ctx, void *a) {
    (void)ctx;
    fr_audio_free(a);
    free(a);
}

void fr_assist_media_set_ocr(const char *engine, const char *ppocr_dir, const char *device) {
    snprintf(g.engine, sizeof g.engine, "%s", engine && strcmp(engine, "auto") ? engine : "");
    snprintf(g.ppocr_dir, sizeof g.ppocr_dir, "%s", ppocr_dir ? ppocr_dir : "");
    snprintf(g.device, sizeof g.device, "%s", device ? device : "");
}

/* Set once by setup_ocr; a caller that ran OCR through the default media has passed the
 * pthread_once that wrote it, any other reads the CPU. */
int fr_assist_media_ocr_meter_device(void) { return g.ocr_mdev; }

/* The OCR pool: the configured reader, or the default one (see fr_assist_media_set_ocr). */
static void setup_ocr(void) {
    fr_err err = {0};
    char dir[1024];
    fr_ocr_cfg oc;
    memset(&oc, 0, sizeof oc);
    oc.lang = getenv("FRUGAL_OCR_LANG") ? getenv("FRUGAL_OCR_LANG") : "eng";
    oc.ppocr_dir = g.ppocr_dir[0] ? g.ppocr_dir : NULL;
    oc.device = g.device[0] ? g.device : NULL;
    g.ocr_mdev = FR_METER_DEV_CPU;
    const char *want = g.engine[0] ? g.engine : getenv("FRUGAL_OCR_ENGINE");
    bool asked = want && *want && strcmp(want, "auto");
    if (asked && fr_ocr_kind_parse(want, &oc.kind, &err)) {
        snprintf(g.why_ocr, sizeof g.why_ocr, "unavailable: %.280s", err.msg);
        return;
    }
    if (!asked) oc.kind = fr_ocr_kind_default(oc.ppocr_dir);
    if (oc.kind == FR_OCR_KIND_PPOCR) {
        if ((g.ocr = fr_ocr_pool_new(&oc, 0, &err))) {
            int dev = fr_ocr_pool_cuda_device(g.ocr);
            if (dev >= 0) g.ocr_mdev = fr_meter_dev_gpu(dev);
            return;
        }
        if (asked) {
            snprintf(g.why_ocr, sizeof g.why_ocr, "unavailable: %.280s", err.msg);
            return;
        }
        fr_warn("ocr: ppocr unavailable (%s); using tesseract", err.msg);
        oc.kind = FR_OCR_KIND_TESSERACT;
    }
    if (!fr_ocr_tessdata_dir(&oc, dir, sizeof dir)) {
        snprintf(g.why_ocr, sizeof g.why_ocr,
                 "unavailable: no tesseract language data found (set TESSDATA_PREFIX)");
    } else if (!(g.ocr = fr_ocr_pool_new(&oc, 0, &err))) {
        snprintf(g.why_ocr, sizeof g.why_ocr, "unavailable: %.280s", err.msg);
    }
}

static void setup(void) {
    setup_ocr();
    if (!fr_path_is_dir(FR_ASR_MODEL_DIR)) {
        snprintf(g.why_asr, sizeof g.why_asr,
                 "unavailable: no pocketsphinx acoustic model in %s", FR_ASR_MODEL_DIR);
    } else {
        fr_asr_config ac;
        memset(&ac, 0, sizeof ac);
        /* the project's domain LM when built (`frugal build-lm`), else the generic one */
        const char *lm = getenv("FRUGAL_ASR_LM");
        char *domain = fr_data_path(FR_ASR_DOMAIN_LM);
        ac.lm_kind = (lm && *lm) || fr_path_exists(domain) ? FR_ASR_LM_DOMAIN : FR_ASR_LM_GENERIC;
        free(domain);
        g.asr = fr_asr_pool_new(&ac, 0);
    }
}

void fr_assist_media_default(fr_assist_media *m) {
    pthread_once(&g.once, setup);
    memset(m, 0, sizeof *m);
    m->image_decode = img_decode;
    m->image_density = img_density;
    m->image_free = img_free;
    m->audio_decode = aud_decode;
    m->audio_seconds = aud_seconds;
    m->audio_free = aud_free;
    if (g.ocr) m->ocr = run_ocr;
    else m->why_ocr = g.why_ocr;
    if (g.asr) m->asr = run_asr;
    else m->why_asr = g.why_asr;
}
