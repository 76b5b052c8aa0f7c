/* audio_api.h — OpenAI's audio API on the server: POST /v1/audio/transcriptions and
 * POST /v1/audio/translations, multipart/form-data (serve/multipart.h), without any HTTP.
 * Two engines: the embedded pocketsphinx (US English, one segment per recording; the default)
 * or, when the server was given Whisper weights (`frugal serve --asr-model`), Whisper on the CPU
 * reference (stages/asr/whisper_asr.h): any of its languages, detection, segments from its
 * timestamp tokens, translation into English with its translate task.
 *
 * Usage (serve/http.c):
 *   fr_audio_call call = {.task = FR_AUDIO_TRANSCRIBE, .content_type = ct, .limits = lim,
 *                         .meter = m, .account = r, .cancel = &stop};
 *   fr_audio_reply rep;
 *   fr_audio_handle(body, len, &call, &rep);  // rep.status, rep.body (malloc'd), rep.content_type
 *   ...
 *   fr_audio_reply_free(&rep);
 *
 * Form fields (docs/SERVING.md, "Audio"):
 *   file (required): WAV, FLAC or OGG (Vorbis), told by its bytes (the part's Content-Type and
 *     file name are not trusted); empty or corrupt: 400 invalid_audio; another format (MP3, M4A, Opus,
 *     WebM, ...): 415 unsupported_media_type;
 *   model: "whisper-1" (the name OpenAI's clients send; answered by the server's engine), or the
 *     engine's own name, "pocketsphinx" or "whisper"; absent: the same; another name: 404
 *     model_not_found;
 *   language: an ISO-639-1 code (pocketsphinx: "en" only, another language is 400
 *     unsupported_language on both endpoints, since English audio's translation into English is
 *     its transcript; Whisper: any language of the model, absent = detected);
 *   prompt: taken (at most FR_AUDIO_MAX_FIELD bytes) and not used: neither engine conditions on
 *     text here;
 *   response_format: json (default) {"text", "usage"}, text, srt, vtt, verbose_json {"task",
 *     "language", "duration", "text", "segments", "usage"}; another value: 400 invalid_value;
 *   temperature: a number in [0, 1], taken and not used (decoding is greedy; segments say 0.0);
 *     out of range or not a number: 400 invalid_value;
 *   timestamp_granularities[] (transcriptions): "segment" is taken, "word" is 400
 *     unsupported_value (neither engine gives word times, and OpenAI refuses it for any format
 *     but verbose_json too); another value 400 invalid_value;
 *   stream=true and include[] are 400 unsupported_value; other fields are ignored.
 * A single-valued field given twice is 400 duplicate_field; a text field over FR_AUDIO_MAX_FIELD
 * bytes is 413 part_too_large. The multipart refusals keep their status and code (400
 * not_multipart, missing_boundary, bad_boundary, bad_multipart, bad_part_header,
 * part_header_too_large, too_many_parts; 413 part_too_large, request_too_large).
 *
 * Metering: decoding is the "decode_media" stage and recognition the "asr" stage of the
 * request's account (serve/media_parts.h fr_api_media_transcribe); a reply to a metered call
 * carries the account's figures so far (all CPU work, so final), which the JSON formats also
 * hold as {"frugal": {"joules", "usd", "estimated", "final"}}.
 *
 * Thread safety: every function only touches its arguments (and the thread-safe media stages).
 */
#ifndef FRUGAL_SERVE_AUDIO_API_H
#define FRUGAL_SERVE_AUDIO_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "serve/api.h"
#include "serve/multipart.h"

struct fr_meter;
struct fr_meter_req;
struct fr_whisper_model;

#define FR_AUDIO_MAX_FIELD 4096 /* bytes of a text field (model, prompt, ...) */
#define FR_AUDIO_MAX_PARTS 32   /* parts of one form */

typedef enum fr_audio_task {
    FR_AUDIO_TRANSCRIBE = 0, /* /v1/audio/transcriptions */
    FR_AUDIO_TRANSLATE = 1,  /* /v1/audio/translations: into English */
} fr_audio_task;

typedef enum fr_audio_response_format {
    FR_AUDIO_FMT_JSON = 0,
    FR_AUDIO_FMT_TEXT,
    FR_AUDIO_FMT_SRT,
    FR_AUDIO_FMT_VTT,
    FR_AUDIO_FMT_VERBOSE_JSON,
} fr_audio_response_format;

/* A validated form; points into the body it was parsed from. */
typedef struct fr_audio_form {
    const uint8_t *file;    /* the recording's bytes */
    size_t file_len;
    char model[FR_MP_MAX_NAME]; /* "" = not given */
    char language[8];       /* ISO-639-1, lower case; "" = not given */
    fr_audio_response_format format; /* response_format */
    double temperature;     /* 0 when not given */
} fr_audio_form;

/* Parses and validates a form (the rules above) for the engine: `whisper` the server's Whisper
 * model, NULL for pocketsphinx. Returns 0 with *f, or -1 with *err (an OpenAI-shaped error:
 * status, type, code, param). lim bounds the multipart parse. */
int fr_audio_form_parse(fr_audio_task task, const char *content_type, const char *body,
                        size_t len, const fr_mp_limits *lim, const struct fr_whisper_model *whisper,
                        fr_audio_form *f, fr_api_error *err);

/* A stretch of the transcript. */
typedef struct fr_audio_segment {
    double start, end; /* seconds from the start of the recording */
    const char *text;
} fr_audio_segment;

/* What an engine heard. */
typedef struct fr_audio_transcript {
    const char *text;     /* the whole transcript */
    double seconds;       /* the recording's length */
    const char *language; /* verbose_json's "language": its English name ("english") */
    const fr_audio_segment *segments; /* n_segments of them; NULL: one over the whole recording
                                         when anything was heard */
    int n_segments;
} fr_audio_transcript;

/* The energy and cost figures a reply carries (meter.h fr_meter_req_summary's). */
typedef struct fr_audio_cost {
    bool metered; /* false: no account, no figures */
    double joules, usd;
    bool estimated, final;
} fr_audio_cost;

/* The response body of transcript t in f->format, with the cost object in the JSON formats when
 * cost->metered (cost may be NULL). Returns the malloc'd body (*len its bytes); *ctype gets its
 * static Content-Type. Never fails. */
char *fr_audio_render(fr_audio_task task, const fr_audio_form *f, const fr_audio_transcript *t,
                      const fr_audio_cost *cost, size_t *len, const char **ctype);

/* One call of the handler. */
typedef struct fr_audio_call {
    fr_audio_task task;
    const char *content_type;    /* the request's Content-Type (NULL: absent) */
    fr_mp_limits limits;         /* of the multipart parse */
    struct fr_meter *meter;      /* the stages are metered on `account` (either NULL: not) */
    struct fr_meter_req *account;
    const fr_cancel *cancel;     /* stops ASR (client gone, shutdown, deadline), or NULL */
    const struct fr_whisper_model *whisper; /* the engine: Whisper (shared, read-only), or NULL:
                                               the embedded pocketsphinx */
    struct fr_cuda_whisper *whisper_cuda;   /* Whisper on a CUDA device (thread-safe), or NULL:
                                               on the CPU */
} fr_audio_call;

/* What to answer. */
typedef struct fr_audio_reply {
    int status;               /* HTTP status */
    char *body;               /* malloc'd: the response, or an OpenAI error object */
    size_t len;
    const char *content_type; /* static */
    fr_audio_cost cost;       /* the account's figures at the reply (metered: false for none) */
} fr_audio_reply;

/* Handles one request body: parse the form, transcribe the file, render the answer (or the
 * error). Fills *out; never fails otherwise. */
void fr_audio_handle(const char *body, size_t len, const fr_audio_call *call, fr_audio_reply *out);
void fr_audio_reply_free(fr_audio_reply *r);

/* The task's name in verbose_json and the ledger's route: "transcribe" / "translate". */
const char *fr_audio_task_name(fr_audio_task t);

#endif
