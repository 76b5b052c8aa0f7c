/* audio_api.c — see audio_api.h. The form is read in three steps (multipart parse, one pass
 * over the parts that files each known field, then the checks between fields); the transcript
 * comes from the media stages the chat door's input_audio parts use (serve/media_parts.h), or
 * from the server's Whisper model. */
#include "serve/audio_api.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "meter/meter.h"
#include "serve/assist.h"
#include "serve/error.h"
#include "serve/media_parts.h"
#include "stages/asr/asr.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/vad.h"

static const char *const FORMAT_NAMES[] = {"json", "text", "srt", "vtt", "verbose_json"};

const char *fr_audio_task_name(fr_audio_task t) {
    return t == FR_AUDIO_TRANSLATE ? "translate" : "transcribe";
}

#define BAD(status, code, param, ...)                                                          \
    do {                                                                                       \
        fr_api_error_set(err, status, "invalid_request_error", code, param, __VA_ARGS__);      \
        return -1;                                                                             \
    } while (0)

/* ---- the fields ---- */

/* The parts of a form by field (single-valued fields: the first; seen: how often). */
typedef struct fields {
    const fr_mp_part *file, *model, *language, *prompt, *format, *temperature, *stream;
    int n_file, n_model, n_language, n_prompt, n_format, n_temperature, n_stream;
    bool word, include;     /* timestamp_granularities[] named "word"; include[] given */
    const fr_mp_part *bad_granularity; /* a value that is neither segment nor word */
} fields;

static bool name_is(const fr_mp_part *p, const char *a, const char *b) {
    return !strcmp(p->name, a) || (b && !strcmp(p->name, b));
}

/* The text of a part as a C string into out (cap bytes). False when it holds a NUL. */
static bool part_text(const fr_mp_part *p, char *out, size_t cap) {
    size_t n = p->len < cap - 1 ? p->len : cap - 1;
    if (memchr(p->data, 0, n)) return false;
    memcpy(out, p->data, n);
    out[n] = 0;
    return true;
}

static void file_single(const fr_mp_part *p, const fr_mp_part **slot, int *count) {
    if (!*count) *slot = p;
    (*count)++;
}

/* One timestamp_granularities[] value. */
static void note_granularity(const fr_mp_part *p, fields *fs) {
    char v[16];
    if (!part_text(p, v, sizeof v) || p->len >= sizeof v) fs->bad_granularity = p;
    else if (!strcmp(v, "word")) fs->word = true;
    else if (strcmp(v, "segment")) fs->bad_granularity = p;
}

/* Files every part under its field; translations have no language or granularities. */
static void collect(fr_audio_task task, const fr_mp_part *parts, int n, fields *fs) {
    memset(fs, 0, sizeof *fs);
    bool tr = task == FR_AUDIO_TRANSCRIBE;
    for (int i = 0; i < n; i++) {
        const fr_mp_part *p = &parts[i];
        if (name_is(p, "file", NULL)) file_single(p, &fs->file, &fs->n_file);
        else if (name_is(p, "model", NULL)) file_single(p, &fs->model, &fs->n_model);
        else if (name_is(p, "language", NULL)) file_single(p, &fs->language, &fs->n_language);
        else if (name_is(p, "prompt", NULL)) file_single(p, &fs->prompt, &fs->n_prompt);
        else if (name_is(p, "response_format", NULL)) file_single(p, &fs->format, &fs->n_format);
        else if (name_is(p, "temperature", NULL))
            file_single(p, &fs->temperature, &fs->n_temperature);
        else if (name_is(p, "stream", NULL)) file_single(p, &fs->stream, &fs->n_stream);
        else if (name_is(p, "include[]", "include")) fs->include = true;
        else if (tr && name_is(p, "timestamp_granularities[]", "timestamp_granularities"))
            note_granularity(p, fs);
    }
}

/* Every field at most once, the text fields within FR_AUDIO_MAX_FIELD bytes. */
static int check_counts(const fields *fs, fr_api_error *err) {
    const struct { const fr_mp_part *p; int n; } single[] = {
        {fs->file, fs->n_file},         {fs->model, fs->n_model},
        {fs->language, fs->n_language}, {fs->prompt, fs->n_prompt},
        {fs->format, fs->n_format},     {fs->temperature, fs->n_temperature},
        {fs->stream, fs->n_stream}};
    for (size_t i = 0; i < FR_ARRAY_LEN(single); i++) {
        const fr_mp_part *p = single[i].p;
        if (single[i].n > 1)
            BAD(400, "duplicate_field", p->name, "The form gives the field '%s' %d times; it takes one value.",
                p->name, single[i].n);
        if (p && p != fs->file && p->len > FR_AUDIO_MAX_FIELD)
            BAD(413, "part_too_large", p->name, "The field '%s' is %zu bytes, over the limit of %d.",
                p->name, p->len, FR_AUDIO_MAX_FIELD);
    }
    if (!fs->file)
        BAD(400, "missing_file", "file", "The form has no 'file' part: send the recording as "
                                         "file=@audio.wav (WAV, FLAC or OGG).");
    return 0;
}

/* A text field's value (absent: ""), NUL bytes refused. */
static int text_field(const fr_mp_part *p, char *out, size_t cap, fr_api_error *err) {
    out[0] = 0;
    if (p && !part_text(p, out, cap))
        BAD(400, "invalid_value", p->name, "The field '%s' holds a NUL byte.", p->name);
    return 0;
}

/* The engine's name as a model ("whisper-1" is taken for either). */
static const char *engine_name(const fr_whisper_model *whisper) {
    return whisper ? "whisper" : "pocketsphinx";
}

static int read_model(const fields *fs, const fr_whisper_model *whisper, fr_audio_form *f,
                      fr_api_error *err) {
    if (text_field(fs->model, f->model, sizeof f->model, err)) return -1;
    if (fs->model && fs->model->len >= sizeof f->model)
        BAD(404, "model_not_found", "model", "Unknown model (a name of %zu bytes).", fs->model->len);
    if (f->model[0] && strcmp(f->model, engine_name(whisper)) && strcmp(f->model, "whisper-1"))
        BAD(404, "model_not_found", "model",
            "The model '%.100s' does not exist here: this server transcribes with its %s engine, "
            "named '%s' (or 'whisper-1', the name OpenAI's clients send).",
            f->model, whisper ? "Whisper" : "embedded pocketsphinx", engine_name(whisper));
    return 0;
}

/* language: 2 or 3 letters (ISO-639-1); pocketsphinx hears English only ("eng" is taken as
 * "en"), Whisper its languages. */
static int read_language(const fields *fs, const fr_whisper_model *whisper, fr_audio_form *f,
                         fr_api_error *err) {
    char v[16];
    if (text_field(fs->language, v, sizeof v, err)) return -1;
    size_t n = strlen(v);
    if (!n) return 0;
    bool letters = n >= 2 && n <= 3 && fs->language->len == n;
    for (size_t i = 0; letters && i < n; i++) letters = isalpha((unsigned char)v[i]);
    if (!letters)
        BAD(400, "invalid_value", "language", "language must be an ISO-639-1 code such as 'en'.");
    for (size_t i = 0; i < n; i++) v[i] = (char)tolower((unsigned char)v[i]);
    if (whisper) {
        if (fr_whisper_lang_index(v) < 0)
            BAD(400, "unsupported_language", "language", "Whisper has no language '%s'.", v);
        memcpy(f->language, v, n + 1); /* 2 or 3 letters */
        return 0;
    }
    if (strcmp(v, "en") && strcmp(v, "eng"))
        BAD(400, "unsupported_language", "language",
            "This server's speech engine (pocketsphinx, US English) hears English only; language "
            "'%s' cannot be transcribed or translated.", v);
    snprintf(f->language, sizeof f->language, "en");
    return 0;
}

static int read_format(const fields *fs, fr_audio_form *f, fr_api_error *err) {
    char v[32];
    f->format = FR_AUDIO_FMT_JSON;
    if (text_field(fs->format, v, sizeof v, err)) return -1;
    if (!fs->format) return 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(FORMAT_NAMES); i++)
        if (fs->format->len == strlen(FORMAT_NAMES[i]) && !strcmp(v, FORMAT_NAMES[i])) {
            f->format = (fr_audio_response_format)i;
            return 0;
        }
    BAD(400, "invalid_value", "response_format",
        "response_format '%.40s' is not one of json, text, srt, vtt, verbose_json.", v);
}

static int read_temperature(const fields *fs, fr_audio_form *f, fr_api_error *err) {
    char v[64];
    f->temperature = 0;
    if (text_field(fs->temperature, v, sizeof v, err)) return -1;
    if (!fs->temperature) return 0;
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    while (*end == ' ') end++;
    if (errno || end == v || *end || fs->temperature->len >= sizeof v || !(t >= 0 && t <= 1))
        BAD(400, "invalid_value", "temperature", "temperature must be a number in [0, 1].");
    f->temperature = t;
    return 0;
}

/* stream, include[] and timestamp_granularities[]: what cannot be honoured is refused. */
static int read_options(const fields *fs, fr_api_error *err) {
    char v[16];
    if (text_field(fs->stream, v, sizeof v, err)) return -1;
    if (fs->stream && strcmp(v, "false"))
        BAD(400, "unsupported_value", "stream",
            "Streamed transcription is not supported; leave stream out or send false.");
    if (fs->include)
        BAD(400, "unsupported_value", "include[]",
            "include[] (log-probabilities) is not supported by this server's speech engine.");
    if (fs->bad_granularity)
        BAD(400, "invalid_value", "timestamp_granularities[]",
            "timestamp_granularities[] takes 'segment' and 'word'.");
    if (fs->word)
        BAD(400, "unsupported_value", "timestamp_granularities[]",
            "Word timestamps are not available: this server's speech engine gives one segment per "
            "recording. Ask for 'segment' (with response_format verbose_json) instead.");
    return 0;
}

/* The fields once filed: each value checked, in the order a reader would. */
static int read_fields(const fields *fs, const fr_whisper_model *whisper, fr_audio_form *f,
                       fr_api_error *err) {
    char prompt[16];
    if (check_counts(fs, err) || read_model(fs, whisper, f, err) || read_format(fs, f, err) ||
        read_language(fs, whisper, f, err) || read_temperature(fs, f, err) || read_options(fs, err) ||
        text_field(fs->prompt, prompt, sizeof prompt, err))
        return -1;
    if (!fs->file->len) BAD(400, "invalid_audio", "file", "The file is empty.");
    f->file = (const uint8_t *)fs->file->data;
    f->file_len = fs->file->len;
    return 0;
}

int fr_audio_form_parse(fr_audio_task task, const char *content_type, const char *body,
                        size_t len, const fr_mp_limits *lim, const fr_whisper_model *whisper,
                        fr_audio_form *f, fr_api_error *err) {
    memset(f, 0, sizeof *f);
    char boundary[FR_MP_MAX_BOUNDARY + 1];
    fr_mp_error me = {0};
    fr_mp_part *parts = NULL;
    int n = 0;
    if (fr_mp_boundary(content_type, boundary, &me) ||
        fr_mp_parse(body, len, boundary, lim, &parts, &n, &me)) {
        fr_api_error_set(err, me.status, me.status >= 500 ? "server_error" : "invalid_request_error",
                         me.code, NULL, "%s", me.msg);
        return -1;
    }
    fields fs;
    collect(task, parts, n, &fs);
    int rc = read_fields(&fs, whisper, f, err);
    free(parts); /* after read_fields: fs points into parts */
    return rc;
}

/* ---- the answer ---- */

/* zlib's compressed size over the text's (Whisper's compression_ratio); 0 for no text. */
static double compression_ratio(const char *text) {
    size_t n = strlen(text);
    if (!n) return 0;
    uLongf cn = compressBound((uLong)n);
    Bytef *buf = fr_xmalloc(cn);
    double r = compress(buf, &cn, (const Bytef *)text, (uLong)n) == Z_OK && cn ? (double)n / cn : 0;
    free(buf);
    return r;
}

static void add_segment(cJSON *segs, int id, const fr_audio_segment *g) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "id", id);
    cJSON_AddNumberToObject(s, "seek", 0);
    cJSON_AddNumberToObject(s, "start", round(g->start * 1000) / 1000);
    cJSON_AddNumberToObject(s, "end", round(g->end * 1000) / 1000);
    cJSON_AddStringToObject(s, "text", g->text);
    cJSON_AddItemToObject(s, "tokens", cJSON_CreateArray()); /* not kept */
    cJSON_AddNumberToObject(s, "temperature", 0.0);
    cJSON_AddNumberToObject(s, "avg_logprob", 0.0); /* not measured here */
    cJSON_AddNumberToObject(s, "compression_ratio", compression_ratio(g->text));
    cJSON_AddNumberToObject(s, "no_speech_prob", 0.0); /* not measured here */
    cJSON_AddItemToArray(segs, s);
}

/* The transcript's segments: its own, or one over the recording when anything was heard. */
static int segments_of(const fr_audio_transcript *t, fr_audio_segment *one,
                       const fr_audio_segment **out) {
    if (t->segments) {
        *out = t->segments;
        return t->n_segments;
    }
    *one = (fr_audio_segment){0, t->seconds, t->text};
    *out = one;
    return t->text[0] ? 1 : 0;
}

static void add_cost(cJSON *j, const fr_audio_cost *cost) {
    if (!cost || !cost->metered) return;
    cJSON *f = cJSON_AddObjectToObject(j, "frugal");
    cJSON_AddNumberToObject(f, "joules", cost->joules);
    cJSON_AddNumberToObject(f, "usd", cost->usd);
    cJSON_AddBoolToObject(f, "estimated", cost->estimated);
    cJSON_AddBoolToObject(f, "final", cost->final);
}

/* json and verbose_json. usage: the seconds billed, OpenAI's "duration" usage (rounded up). */
static char *render_json(fr_audio_task task, bool verbose, const fr_audio_transcript *t,
                         const fr_audio_cost *cost) {
    cJSON *j = cJSON_CreateObject();
    if (verbose) {
        cJSON_AddStringToObject(j, "task", fr_audio_task_name(task));
        cJSON_AddStringToObject(j, "language", t->language ? t->language : "english");
        cJSON_AddNumberToObject(j, "duration", round(t->seconds * 1000) / 1000);
    }
    cJSON_AddStringToObject(j, "text", t->text);
    if (verbose) {
        cJSON *segs = cJSON_AddArrayToObject(j, "segments");
        fr_audio_segment one;
        const fr_audio_segment *g;
        int n = segments_of(t, &one, &g);
        for (int i = 0; i < n; i++) add_segment(segs, i, &g[i]);
    }
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddStringToObject(u, "type", "duration");
    cJSON_AddNumberToObject(u, "seconds", ceil(t->seconds));
    add_cost(j, cost);
    char *o = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return o ? o : fr_xstrdup("{}");
}

/* HH:MM:SS<sep>mmm */
static void cue_time(fr_buf *b, double s, char sep) {
    long ms = lround(s * 1000);
    fr_buf_printf(b, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
                  sep, ms % 1000);
}

/* SubRip or WebVTT: one cue per segment (text trimmed). */
static char *render_cues(bool vtt, const fr_audio_transcript *t) {
    fr_buf b = {0};
    fr_buf_puts(&b, vtt ? "WEBVTT\n\n" : "");
    fr_audio_segment one;
    const fr_audio_segment *g;
    int n = segments_of(t, &one, &g);
    for (int i = 0; i < n; i++) {
        if (!vtt) fr_buf_printf(&b, "%d\n", i + 1);
        cue_time(&b, g[i].start, vtt ? '.' : ',');
        fr_buf_puts(&b, " --> ");
        cue_time(&b, g[i].end, vtt ? '.' : ',');
        const char *x = g[i].text;
        while (*x == ' ') x++;
        fr_buf_printf(&b, "\n%s\n\n", x);
    }
    return b.data ? fr_buf_cstr(&b) : fr_xstrdup("");
}

char *fr_audio_render(fr_audio_task task, const fr_audio_form *f, const fr_audio_transcript *t,
                      const fr_audio_cost *cost, size_t *len, const char **ctype) {
    char *o;
    *ctype = "application/json";
    switch (f->format) {
    case FR_AUDIO_FMT_TEXT:
        o = fr_xmalloc(strlen(t->text) + 2);
        sprintf(o, "%s\n", t->text);
        *ctype = "text/plain; charset=utf-8";
        break;
    case FR_AUDIO_FMT_SRT:
    case FR_AUDIO_FMT_VTT:
        o = render_cues(f->format == FR_AUDIO_FMT_VTT, t);
        *ctype = f->format == FR_AUDIO_FMT_VTT ? "text/vtt; charset=utf-8" : "text/plain; charset=utf-8";
        break;
    default: o = render_json(task, f->format == FR_AUDIO_FMT_VERBOSE_JSON, t, cost);
    }
    *len = strlen(o);
    return o;
}

/* ---- Whisper ---- */

/* Whisper's languages by code, their English names for verbose_json (OpenAI's spelling). */
static const char *const LANG_NAMES[][2] = {
    {"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"}, {"ru", "russian"},
    {"ko", "korean"}, {"fr", "french"}, {"ja", "japanese"}, {"pt", "portuguese"}, {"tr", "turkish"},
    {"pl", "polish"}, {"ca", "catalan"}, {"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"},
    {"it", "italian"}, {"id", "indonesian"}, {"hi", "hindi"}, {"fi", "finnish"}, {"vi", "vietnamese"},
    {"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"}, {"cs", "czech"},
    {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"}, {"ta", "tamil"}, {"no", "norwegian"},
    {"th", "thai"}, {"ur", "urdu"}, {"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"},
    {"la", "latin"}, {"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"},
    {"te", "telugu"}, {"fa", "persian"}, {"lv", "latvian"}, {"bn", "bengali"}, {"sr", "serbian"},
    {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"}, {"et", "estonian"},
    {"mk", "macedonian"}, {"br", "breton"}, {"eu", "basque"}, {"is", "icelandic"}, {"hy", "armenian"},
    {"ne", "nepali"}, {"mn", "mongolian"}, {"bs", "bosnian"}, {"kk", "kazakh"}, {"sq", "albanian"},
    {"sw", "swahili"}, {"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"}, {"si", "sinhala"},
    {"km", "khmer"}, {"sn", "shona"}, {"yo", "yoruba"}, {"so", "somali"}, {"af", "afrikaans"},
    {"oc", "occitan"}, {"ka", "georgian"}, {"be", "belarusian"}, {"tg", "tajik"}, {"sd", "sindhi"},
    {"gu", "gujarati"}, {"am", "amharic"}, {"yi", "yiddish"}, {"lo", "lao"}, {"uz", "uzbek"},
    {"fo", "faroese"}, {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"},
    {"nn", "nynorsk"}, {"mt", "maltese"}, {"sa", "sanskrit"}, {"lb", "luxembourgish"},
    {"my", "myanmar"}, {"bo", "tibetan"}, {"tl", "tagalog"}, {"mg", "malagasy"}, {"as", "assamese"},
    {"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"}, {"ha", "hausa"}, {"ba", "bashkir"},
    {"jw", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"}};

static const char *lang_name(const char *code) {
    for (size_t i = 0; code && i < FR_ARRAY_LEN(LANG_NAMES); i++)
        if (!strcmp(LANG_NAMES[i][0], code)) return LANG_NAMES[i][1];
    return code ? code : "english"; /* an English-only model names none */
}

/* A CPU step of the call's account, or NULL (not metered). */
static fr_meter_step *step_begin(const fr_audio_call *call, fr_meter_stage stage) {
    /* Whisper on a CUDA device is metered on that GPU */
    const int gpu = stage == FR_MSTAGE_ASR ? fr_whisper_cuda_device(call->whisper_cuda) : -1;
    return call->meter && call->account
               ? fr_meter_stage_begin(call->meter, call->account, stage,
                                      gpu >= 0 ? fr_meter_dev_gpu(gpu) : FR_METER_DEV_CPU)
               : NULL;
}

static void step_end(const fr_audio_call *call, fr_meter_step *st) {
    if (st) fr_meter_step_end(call->meter, st);
}

/* The recording at 16 kHz, metered as "decode_media"; errors as the media stages name them. */
static int whisper_decode(const fr_audio_call *call, const fr_audio_form *f, fr_audio *a,
                          fr_api_error *err) {
    fr_meter_step *st = step_begin(call, FR_MSTAGE_DECODE_MEDIA);
    fr_err e = {0};
    int rc = fr_audio_decode(f->file, f->file_len, NULL, FR_ASR_RATE, a, &e);
    step_end(call, st);
    if (rc) {
        fr_err_prefix(&e, "file");
        fr_api_error_from_err(err, &e, fr_assist_media_code(&e, "invalid_audio"), "file");
    }
    return rc;
}

/* Whisper on the recording, metered as "asr": the form's language (or detection), the task,
 * timestamps when the format shows times; stopped by the call's cancel check. Behind the VAD
 * when it is installed (only the speech spans are decoded; times mapped back). */
static int whisper_run(const fr_audio_call *call, const fr_audio_form *f, const fr_audio *a,
                       fr_whisper_result *r, fr_api_error *err) {
    fr_whisper_params p = fr_whisper_default_params();
    p.language = f->language[0] ? fr_whisper_lang_index(f->language) : -1;
    p.task = call->task == FR_AUDIO_TRANSLATE ? FR_WHISPER_TASK_TRANSLATE : FR_WHISPER_TASK_TRANSCRIBE;
    p.timestamps = f->format >= FR_AUDIO_FMT_SRT;
    p.cancel = call->cancel;
    p.cuda = call->whisper_cuda;
    fr_meter_step *st = step_begin(call, FR_MSTAGE_ASR);
    fr_err e = {0};
    /* the VAD runs inside the asr step (its time is metered there); a session per call */
    fr_vad *vad = fr_vad_new_default();
    int spans = -1;
    int rc = fr_whisper_transcribe_vad(call->whisper, vad, a->pcm, a->n, &p, r, &spans, &e);
    fr_vad_free(vad);
    step_end(call, st);
    if (!rc && spans >= 0) fr_debug("asr: whisper behind the vad, %d span(s)", spans);
    if (rc) {
        fr_cancel_reason why = fr_cancel_check(call->cancel);
        fr_err_prefix(&e, "file");
        fr_api_error_from_err(err, &e, why ? fr_cancel_reason_name(why) : NULL, "file");
    }
    return rc;
}

/* What Whisper heard as a transcript (segments malloc'd into *segs; text trimmed). */
static void whisper_transcript(const fr_audio_call *call, const fr_whisper_result *r,
                               double seconds, fr_audio_segment **segs, fr_audio_transcript *t) {
    *segs = fr_xcalloc(r->n_segments ? (size_t)r->n_segments : 1, sizeof **segs);
    for (int i = 0; i < r->n_segments; i++)
        (*segs)[i] = (fr_audio_segment){r->segments[i].start, r->segments[i].end,
                                        r->segments[i].text ? r->segments[i].text : ""};
    const char *x = r->text ? r->text : "";
    while (*x == ' ') x++;
    *t = (fr_audio_transcript){.text = x, .seconds = seconds, .segments = *segs,
                               .n_segments = r->n_segments,
                               .language = call->task == FR_AUDIO_TRANSLATE
                                               ? "english"
                                               : lang_name(fr_whisper_lang_code(r->language))};
}

/* ---- the handler ---- */

static void reply_error(fr_audio_reply *out, const fr_api_error *e) {
    out->status = e->status;
    out->body = fr_api_error_json(e);
    out->len = strlen(out->body);
    out->content_type = "application/json";
}

static void reply_cost(const fr_audio_call *call, fr_audio_cost *cost) {
    memset(cost, 0, sizeof *cost);
    if (!call->meter || !call->account) return;
    fr_meter_req_summary sum;
    fr_meter_request_peek(call->meter, call->account, &sum);
    *cost = (fr_audio_cost){.metered = true, .joules = sum.joules, .usd = sum.usd,
                            .estimated = sum.estimated, .final = sum.final};
}

/* The answer of a transcript (status 200). */
static void reply_transcript(const fr_audio_call *call, const fr_audio_form *f,
                             const fr_audio_transcript *t, fr_audio_reply *out) {
    reply_cost(call, &out->cost);
    out->status = 200;
    out->body = fr_audio_render(call->task, f, t, &out->cost, &out->len, &out->content_type);
}

static void handle_pocketsphinx(const fr_audio_call *call, const fr_audio_form *f,
                                fr_audio_reply *out) {
    char *text = NULL;
    double seconds = 0;
    fr_api_error err;
    if (fr_api_media_transcribe(f->file, f->file_len, NULL, "file", call->meter, call->account,
                                call->cancel, &text, &seconds, &err)) {
        reply_cost(call, &out->cost);
        reply_error(out, &err);
        return;
    }
    fr_audio_transcript t = {.text = text, .seconds = seconds, .language = "english"};
    reply_transcript(call, f, &t, out);
    free(text);
}

static void handle_whisper(const fr_audio_call *call, const fr_audio_form *f, fr_audio_reply *out) {
    fr_audio a;
    memset(&a, 0, sizeof a);
    fr_whisper_result r;
    memset(&r, 0, sizeof r);
    fr_api_error err;
    if (whisper_decode(call, f, &a, &err) || whisper_run(call, f, &a, &r, &err)) {
        reply_cost(call, &out->cost);
        reply_error(out, &err);
    } else {
        fr_audio_segment *segs;
        fr_audio_transcript t;
        whisper_transcript(call, &r, a.seconds, &segs, &t);
        reply_transcript(call, f, &t, out);
        free(segs);
    }
    fr_whisper_result_free(&r);
    fr_audio_free(&a);
}

void fr_audio_handle(const char *body, size_t len, const fr_audio_call *call, fr_audio_reply *out) {
    memset(out, 0, sizeof *out);
    fr_audio_form f;
    fr_api_error err;
    if (fr_audio_form_parse(call->task, call->content_type, body ? body : "", len, &call->limits,
                            call->whisper, &f, &err)) {
        reply_cost(call, &out->cost);
        reply_error(out, &err);
    } else if (call->whisper) {
        handle_whisper(call, &f, out);
    } else {
        handle_pocketsphinx(call, &f, out);
    }
}

void fr_audio_reply_free(fr_audio_reply *r) {
    free(r->body);
    r->body = NULL;
}
