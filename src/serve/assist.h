/* assist.h — the customer-service assist handler shared by both doors: POST /v1/assist (http.c)
 * and `frugal assist` (one JSON request per stdin line). Same function, same bytes out.
 *
 * Design: fr_assist_handle takes the raw request body and returns a status and a JSON body (a
 * response, or an OpenAI-shaped error). Work, in order:
 *   1. hardening before parsing: UTF-8 check, a nesting-depth scan of the raw bytes (a ticket
 *      nested 10,000 deep is refused by the scan, cJSON never sees it), one JSON object;
 *   2. field checks: text (string), image (base64 or a data URL; PNG, JPEG, WebP, TIFF), audio
 *      (base64 or data URL; WAV, FLAC, OGG), ticket (object), history (array of strings or
 *      {role, content}), priority ("P0".."P2" or 0..2), top_k, budget_tokens; wrong types are a
 *      400 naming the field; base64 length is checked against the limit BEFORE decoding (413),
 *      invalid base64 is a 400, a declared media type we do not take (or one that disagrees with
 *      the bytes' magic) is a 415, zero-length media a 400;
 *   3. the route (route/route.h): modalities, image density, stage availability;
 *   4. stages in plan order, each timed (and metered when a meter is attached): decode_image,
 *      density, decode_audio, asr, ocr, nlu (intent top-k + slots + the out-of-scope verdict;
 *      the OCR fields as slots; the OCR text joins the question when it refers to the
 *      attachment or has no intent of its own), then the reply cascade: the template when the
 *      intent is in scope and confident, else budget + llm (the engine's submit path) when an
 *      LLM is attached, else a hand-off (intent "out_of_scope", response_source "handoff");
 *   5. the response JSON (docs/ASSIST.md).
 * Media stages are reached through fr_assist_media (function pointers): a build or server
 * without them reports the stage "unavailable" in the route with the reason, and a media error
 * from a stage (corrupt image, two-hour recording) becomes the status its error code maps to
 * (serve/error.h).
 *
 * Thread safety: an fr_assist is read-only after set-up; fr_assist_handle runs on many threads
 * at once (the intent model and slot extractor are thread-safe, the engine has its own lock).
 */
#ifndef FRUGAL_SERVE_ASSIST_H
#define FRUGAL_SERVE_ASSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "route/route.h"

struct fr_engine;
struct fr_model;
struct fr_meter;
struct fr_meter_req;

/* Settings; fr_assist_config_init fills the defaults shown. */
typedef struct fr_assist_config {
    char *intent_model;        /* intent model file (<data root>/models/intent-banking77.bin,
                                  base.h fr_data_dir) */
    char *nlupp_model;         /* multi-label NLU++ intent model (<data root>/models/intent-nlupp.bin);
                                  "" turns the "nlupp" block of the response off */
    char *templates;           /* reply templates JSON (<data root>/models/reply-templates.json;
                                  required: a missing file is a set-up error) */
    double density_threshold;  /* image text density >= this → OCR, else vision (FR_DENSITY_DEFAULT_THRESHOLD) */
    size_t max_image_bytes;    /* decoded image bytes (20 MB) */
    size_t max_audio_bytes;    /* decoded audio bytes (32 MiB) */
    size_t max_text_bytes;     /* typed text (16 KiB) */
    int max_history;           /* history turns (64) */
    int max_depth;             /* JSON nesting of the whole body, ticket included (32) */
    int top_k;                 /* intents returned: the best + alternatives (5) */
    int budget_tokens;         /* LLM prompt budget in tokens (1024) */
    int llm_max_tokens;        /* LLM reply length (256) */
    double ocr_time_limit_s;   /* OCR wall-clock limit per page (10 s; 504 ocr_timeout) */
    uint64_t ocr_max_pixels;   /* OCR pixel budget (9,000,000 ≈ A4 at 300 dpi): larger pages are
                                  downscaled to fit when that keeps >= half their linear
                                  resolution, else refused (413 ocr_pixel_budget) */
    double asr_time_limit_s_per_min; /* ASR wall-clock limit per minute of audio (30 s; at least
                                  FR_ASSIST_ASR_MIN_LIMIT_S per call; 504 asr_timeout) */
    bool llm;                  /* the LLM answers what NLU is unsure about when an engine is
                                  attached (false: hand-off; `frugal assist --model` turns it
                                  on); confident intents always get their template */
} fr_assist_config;

#define FR_ASSIST_ASR_MIN_LIMIT_S 5.0 /* the ASR limit of a short clip */
#define FR_ASSIST_VISION_LIMIT_S 60.0 /* the VLM's vision stage (decode, tower, pruning) per picture */

void fr_assist_config_init(fr_assist_config *c);
void fr_assist_config_free(fr_assist_config *c);
/* Applies a settings document (base/conf.h, the binary's one configuration format) of the keys
 * above: an unknown key, a wrong type or a value out of range is -1 with err "<file>:<line>: key:
 * …". The server reads the file named by $FRUGAL_ASSIST_CONFIG this way. */
struct fr_conf_doc;
int fr_assist_config_apply(fr_assist_config *c, const struct fr_conf_doc *d, fr_err *err);
/* The same from JSON text; messages start "assist config: line N: …". */
int fr_assist_config_apply_json(fr_assist_config *c, const char *json, size_t len, fr_err *err);

/* ---- media stages (bound by the image / OCR / audio / ASR stages when built) ---------------- */

/* One OCR line. */
typedef struct fr_assist_ocr_line {
    char *text;       /* malloc'd */
    float confidence; /* 0..1 */
} fr_assist_ocr_line;

/* OCR output. */
typedef struct fr_assist_ocr {
    char *text;                 /* all lines joined with '\n' (malloc'd) */
    fr_assist_ocr_line *lines;  /* malloc'd array */
    int n_lines;                /* entries */
    double scale;               /* factor the page was downscaled by for the pixel budget (0 or
                                   1 = not downscaled) */
    const char *engine;         /* the reader that ran: "ppocr" or "tesseract" (static; NULL:
                                   not said) */
} fr_assist_ocr;

/* Bounds of one OCR / ASR stage call (fr_assist_handle fills them from the config and the call):
 * the stage stops when the limit passes or the cancel check fires, and fails with 504
 * ocr_timeout / asr_timeout (limit), 503 shutting_down (server stopping) or 499 client_gone. */
typedef struct fr_assist_bound {
    double time_limit_s;     /* wall-clock limit of the stage; 0 = none */
    uint64_t max_pixels;     /* OCR pixel budget; 0 = none */
    const fr_cancel *cancel; /* the door's check (client gone, shutdown), or NULL */
} fr_assist_bound;

/* A media stage failure: the stage's error, whose code decides the HTTP status (serve/error.h:
 * bad request 400, too large 413, unsupported media 415, internal 500, and when stopped, see
 * fr_assist_bound, unavailable 503 / timeout 504 / cancelled 499), and the JSON code. */
typedef struct fr_assist_media_err {
    fr_err err;       /* message and code */
    const char *code; /* JSON "code", a static string (e.g. "invalid_image"), or NULL: the
                         caller's default */
} fr_assist_media_err;

/* Stage entry points; a NULL entry means the stage is unavailable in this build. Handles are
 * opaque to the assist handler. Every entry must be thread-safe. */
typedef struct fr_assist_media {
    void *ctx; /* passed to every entry */
    /* image bytes (declared media type or NULL) → decoded image, or NULL with *e */
    void *(*image_decode)(void *ctx, const uint8_t *data, size_t n, const char *mime,
                          fr_assist_media_err *e);
    /* text density in [0, 1] of a decoded image (cheap, before OCR or vision) */
    double (*image_density)(void *ctx, void *img);
    /* OCR under bounds b (NULL = none): 0 with *out filled, or -1 with *e */
    int (*ocr)(void *ctx, void *img, const fr_assist_bound *b, fr_assist_ocr *out,
               fr_assist_media_err *e);
    void (*image_free)(void *ctx, void *img);
    /* audio bytes → decoded audio (duration limits inside), or NULL with *e */
    void *(*audio_decode)(void *ctx, const uint8_t *data, size_t n, const char *mime,
                          fr_assist_media_err *e);
    /* seconds of decoded audio */
    double (*audio_seconds)(void *ctx, void *audio);
    /* ASR under bounds b (NULL = none): malloc'd transcript, or NULL with *e */
    char *(*asr)(void *ctx, void *audio, const fr_assist_bound *b, fr_assist_media_err *e);
    void (*audio_free)(void *ctx, void *audio);
    const char *why_image;  /* reason when the image entries are NULL (NULL: generic) */
    const char *why_ocr;    /* reason when ocr is NULL */
    const char *why_audio;  /* reason when the audio entries are NULL */
    const char *why_asr;    /* reason when asr is NULL */
} fr_assist_media;

void fr_assist_ocr_free(fr_assist_ocr *o);

/* The JSON code of a media decoder's error by its fr_err code: "media_too_large" (too large),
 * "unsupported_media_type" (unsupported media), `invalid_code` (bad request, e.g.
 * "invalid_audio"), else NULL (the code's name). */
const char *fr_assist_media_code(const fr_err *err, const char *invalid_code);

/* The media stages this build links (serve/media.c): the real ones where the stage libraries
 * are built, NULL entries with reasons otherwise. */
void fr_assist_media_default(fr_assist_media *m);
/* The OCR reader of the default media stages: engine "ppocr", "tesseract" or NULL / "auto"
 * (the default: $FRUGAL_OCR_ENGINE if set, else ppocr when its models are in ppocr_dir, NULL:
 * models/ppocr of the data root, else tesseract; an auto choice of ppocr whose models cannot be
 * run falls back to tesseract with a warning, an explicit one makes OCR unavailable with the
 * reason). device: where PP-OCR's networks run (NULL / "cpu", "cuda", "cuda:N"; the server
 * passes ocr.device, else its engine's device). Takes effect only before the first
 * fr_assist_media_default (the server calls it at start, from its "ocr" config section);
 * strings are copied. */
void fr_assist_media_set_ocr(const char *engine, const char *ppocr_dir, const char *device);
/* Where the default media stages' OCR runs, as a meter device (meter.h: FR_METER_DEV_CPU, or
 * fr_meter_dev_gpu(i) when PP-OCR's networks run on CUDA device i), for metering its stage;
 * FR_METER_DEV_CPU until the default media have been set up (their first use). */
int fr_assist_media_ocr_meter_device(void);

/* ---- the handler ------------------------------------------------------------------------------ */

typedef struct fr_assist fr_assist;

/* Loads the intent model and templates. NULL with err. The config is copied. */
fr_assist *fr_assist_new(const fr_assist_config *cfg, fr_err *err);
void fr_assist_free(fr_assist *a);
/* Replaces the media stages (tests inject fakes; the default is fr_assist_media_default). */
void fr_assist_set_media(fr_assist *a, const fr_assist_media *m);
/* Attaches the engine for LLM replies (tmpl: the chat template source; NULL: no LLM). */
void fr_assist_set_llm(fr_assist *a, struct fr_engine *e, const struct fr_model *m,
                       const char *tmpl);
/* Attaches a meter: stages of requests that carry a meter account are recorded with it. */
void fr_assist_set_meter(fr_assist *a, struct fr_meter *m);
/* Attaches a vision-language model's image path (serve/vlm.h; the server's, outlives a) and the
 * engine that runs the model: the route sends pictures to it (route/route.h) and its generation
 * is the reply, whether or not text replies use the LLM ("llm"). v NULL: none. */
struct fr_vlm;
void fr_assist_set_vlm(fr_assist *a, struct fr_vlm *v, struct fr_engine *e);
/* The handler's settings (read-only; valid while a lives). */
const fr_assist_config *fr_assist_config_of(const fr_assist *a);

/* For the server: config from the file named by $FRUGAL_ASSIST_CONFIG (if set), the model and
 * engine for LLM replies. Never NULL: when set-up fails, the handler answers every request with
 * 503 and the reason. */
fr_assist *fr_assist_for_server(struct fr_engine *e, const struct fr_model *m, const char *tmpl);

/* Per-call context. */
typedef struct fr_assist_call {
    int tier;                    /* P0..P2 forced by the door (X-Priority), -1 = the body's */
    int default_tier;            /* tier when neither the door nor the body names one */
    double t_arrival;            /* fr_time_s() at arrival (0 = now) */
    struct fr_meter_req *meter;  /* the request's meter account, or NULL */
    int highest_tier;            /* best tier the caller may have (the API key's cap; a better
                                    one asked for by door or body is lowered to it); 0 = any */
    double deadline;             /* fr_time_s() by which the answer is due (X-Deadline-Ms),
                                    0 = none: 504 deadline_exceeded after it */
    fr_cancel cancel;            /* the door's cancel check (client gone, shutdown; base.h),
                                    passed to the OCR / ASR stages; fn NULL = never */
} fr_assist_call;

/* Handles one request body. Returns the HTTP status; *json gets the malloc'd response or
 * error body. call may be NULL. Never fails otherwise. */
int fr_assist_handle(fr_assist *a, const char *body, size_t len, const fr_assist_call *call,
                     char **json);

/* ---- helpers (exposed for tests and the fuzz harness) ---------------------------------------- */

/* Max nesting depth of the JSON text (strings skipped); stops counting past `limit`+1. */
int fr_assist_json_depth(const char *s, size_t n, int limit, char *top_key, size_t key_cap);
/* Strict base64 (standard or URL-safe alphabet, optional padding, whitespace ignored). Returns
 * the decoded length, or -1 with *bad_at = the offending offset. out must hold n/4*3+3 bytes. */
long fr_assist_base64_decode(const char *s, size_t n, uint8_t *out, size_t *bad_at);

#endif
