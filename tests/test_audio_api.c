/* test_audio_api.c — the audio endpoints' form and answers (serve/audio_api.h) without a server
 * or ASR: each field rule with its status, code and param, and every response_format's bytes
 * (cue times past an hour, an empty transcript). */
#include "serve/audio_api.h"
#include "t.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const fr_mp_limits LIM = {.max_parts = 8, .max_header_bytes = 512,
                                 .max_part_bytes = 1 << 16, .max_total_bytes = 1 << 20};
static const char *CT = "multipart/form-data; boundary=XyZ";

/* A form of NAME=VALUE fields (NULL-ended pairs), "file" first when given. */
static char *form(const char *const *kv) {
    fr_buf b = {0};
    for (int i = 0; kv[i]; i += 2)
        fr_buf_printf(&b, "--XyZ\r\nContent-Disposition: form-data; name=\"%s\"%s\r\n\r\n%s\r\n",
                      kv[i], !strcmp(kv[i], "file") ? "; filename=\"a.wav\"" : "", kv[i + 1]);
    fr_buf_puts(&b, "--XyZ--\r\n");
    return fr_buf_cstr(&b);
}

static int parse(fr_audio_task task, const char *const *kv, fr_audio_form *f, fr_api_error *e) {
    char *body = form(kv);
    int rc = fr_audio_form_parse(task, CT, body, strlen(body), &LIM, NULL, f, e);
    free(body); /* f->file points into it: only its length is looked at below */
    return rc;
}

/* The form is refused with status, code and param. */
static void refused(fr_audio_task task, const char *const *kv, int status, const char *code,
                    const char *param) {
    fr_audio_form f;
    fr_api_error e;
    CHECK_EQ_INT(parse(task, kv, &f, &e), -1);
    CHECK_EQ_INT(e.status, status);
    CHECK_STR(e.code ? e.code : "(null)", code);
    CHECK_STR(e.param, param);
    CHECK(!strcmp(e.type, "invalid_request_error") && strlen(e.message) > 10);
}

TEST(audio_form_fields) {
    fr_audio_form f;
    fr_api_error e;
    const char *kv[] = {"file", "RIFFdata", "model", "whisper-1", "language", "EN",
                        "response_format", "verbose_json", "temperature", "0.25",
                        "timestamp_granularities[]", "segment", "prompt", "ignored", "other",
                        "x", NULL};
    CHECK_EQ_INT(parse(FR_AUDIO_TRANSCRIBE, kv, &f, &e), 0);
    CHECK_EQ_INT(f.file_len, 8);
    CHECK_STR(f.model, "whisper-1");
    CHECK_STR(f.language, "en");
    CHECK_EQ_INT(f.format, FR_AUDIO_FMT_VERBOSE_JSON);
    CHECK_NEAR(f.temperature, 0.25, 1e-12);
    const char *min[] = {"file", "x", NULL};
    CHECK_EQ_INT(parse(FR_AUDIO_TRANSLATE, min, &f, &e), 0);
    CHECK_EQ_INT(f.format, FR_AUDIO_FMT_JSON);
    CHECK_STR(f.model, "");
    /* translations take no granularities: a "word" there is an unknown field, ignored */
    const char *trw[] = {"file", "x", "timestamp_granularities[]", "word", NULL};
    CHECK_EQ_INT(parse(FR_AUDIO_TRANSLATE, trw, &f, &e), 0);
}

/* One refused form: its fields (NULL-ended pairs) and the answer. */
typedef struct refusal {
    fr_audio_task task;
    const char *kv[8];
    int status;
    const char *code, *param;
} refusal;

TEST(audio_form_refusals) {
    const fr_audio_task T = FR_AUDIO_TRANSCRIBE;
    static const refusal cases[] = {
        {FR_AUDIO_TRANSCRIBE, {"model", "whisper-1"}, 400, "missing_file", "file"},
        {FR_AUDIO_TRANSCRIBE, {"file", ""}, 400, "invalid_audio", "file"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "file", "b"}, 400, "duplicate_field", "file"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "model", "gpt-9"}, 404, "model_not_found", "model"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "response_format", "xml"}, 400, "invalid_value", "response_format"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "response_format", "json "}, 400, "invalid_value", "response_format"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "language", "fr"}, 400, "unsupported_language", "language"},
        {FR_AUDIO_TRANSLATE, {"file", "a", "language", "de"}, 400, "unsupported_language", "language"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "language", "english"}, 400, "invalid_value", "language"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "temperature", "1.01"}, 400, "invalid_value", "temperature"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "temperature", "0.5x"}, 400, "invalid_value", "temperature"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "temperature", "inf"}, 400, "invalid_value", "temperature"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "timestamp_granularities[]", "word"}, 400, "unsupported_value",
         "timestamp_granularities[]"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "timestamp_granularities", "char"}, 400, "invalid_value",
         "timestamp_granularities[]"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "stream", "true"}, 400, "unsupported_value", "stream"},
        {FR_AUDIO_TRANSCRIBE, {"file", "a", "include[]", "logprobs"}, 400, "unsupported_value", "include[]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused(cases[i].task, cases[i].kv, cases[i].status, cases[i].code, cases[i].param);
    char big[FR_AUDIO_MAX_FIELD + 2];
    memset(big, 'p', sizeof big - 1);
    big[sizeof big - 1] = 0;
    refused(T, (const char *[]){"file", "a", "prompt", big, NULL}, 413, "part_too_large", "prompt");
}

TEST(audio_form_multipart_errors) {
    fr_audio_form f;
    fr_api_error e;
    const char *body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--XyZ--\r\n";
    CHECK_EQ_INT(fr_audio_form_parse(FR_AUDIO_TRANSCRIBE, "multipart/form-data", body, strlen(body),
                                     &LIM, NULL, &f, &e), -1);
    CHECK_EQ_INT(e.status, 400);
    CHECK_STR(e.code, "missing_boundary");
    CHECK_EQ_INT(fr_audio_form_parse(FR_AUDIO_TRANSCRIBE, NULL, body, strlen(body), &LIM, NULL, &f, &e), -1);
    CHECK_STR(e.code, "not_multipart");
    fr_mp_limits small = LIM;
    small.max_part_bytes = 2;
    CHECK_EQ_INT(fr_audio_form_parse(FR_AUDIO_TRANSCRIBE, CT, body, strlen(body), &small, NULL, &f, &e), -1);
    CHECK_EQ_INT(e.status, 413);
    CHECK_STR(e.code, "part_too_large");
    static const char nul[] = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n"
                              "--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nw\0x\r\n--XyZ--\r\n";
    CHECK_EQ_INT(fr_audio_form_parse(FR_AUDIO_TRANSCRIBE, CT, nul, sizeof nul - 1, &LIM, NULL, &f, &e), -1);
    CHECK_STR(e.code, "invalid_value");
    CHECK_STR(e.param, "model");
}

/* One answer's bytes: the format, the transcript, its length, the body and Content-Type. */
typedef struct rendering {
    fr_audio_response_format fmt;
    const char *text;
    double secs;
    const char *body, *ctype;
} rendering;

TEST(audio_render_formats) {
    static const rendering cases[] = {
        {FR_AUDIO_FMT_TEXT, "hello there", 2.5, "hello there\n", "text/plain; charset=utf-8"},
        {FR_AUDIO_FMT_SRT, "hello there", 3723.4567, "1\n00:00:00,000 --> 01:02:03,457\nhello there\n\n",
         "text/plain; charset=utf-8"},
        {FR_AUDIO_FMT_VTT, "hello there", 59.9996, "WEBVTT\n\n00:00:00.000 --> 00:01:00.000\nhello there\n\n",
         "text/vtt; charset=utf-8"},
        {FR_AUDIO_FMT_SRT, "", 1, "", "text/plain; charset=utf-8"},
        {FR_AUDIO_FMT_VTT, "", 1, "WEBVTT\n\n", "text/vtt; charset=utf-8"},
        {FR_AUDIO_FMT_JSON, "a \"b\"", 2.2,
         "{\"text\":\"a \\\"b\\\"\",\"usage\":{\"type\":\"duration\",\"seconds\":3}}", "application/json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fr_audio_form f = {.format = cases[i].fmt};
        size_t len;
        const char *ct;
        fr_audio_transcript t = {.text = cases[i].text, .seconds = cases[i].secs};
        char *o = fr_audio_render(FR_AUDIO_TRANSCRIBE, &f, &t, NULL, &len, &ct);
        CHECK_EQ_INT(len, strlen(o));
        CHECK_STR(o, cases[i].body);
        CHECK_STR(ct, cases[i].ctype);
        free(o);
    }
}

TEST(audio_render_verbose) {
    fr_audio_form f = {.format = FR_AUDIO_FMT_VERBOSE_JSON};
    fr_audio_cost cost = {.metered = true, .joules = 1.5, .usd = 2e-5, .final = true};
    size_t len;
    const char *ct;
    fr_audio_transcript t = {.text = "the the the the the the the the", .seconds = 4.25,
                             .language = "english"};
    char *o = fr_audio_render(FR_AUDIO_TRANSLATE, &f, &t, &cost, &len, &ct);
    cJSON *j = cJSON_Parse(o);
    CHECK(j != NULL);
    CHECK_STR(cJSON_GetObjectItem(j, "task")->valuestring, "translate");
    CHECK_STR(cJSON_GetObjectItem(j, "language")->valuestring, "english");
    CHECK_NEAR(cJSON_GetObjectItem(j, "duration")->valuedouble, 4.25, 1e-9);
    cJSON *segs = cJSON_GetObjectItem(j, "segments");
    CHECK_EQ_INT(cJSON_GetArraySize(segs), 1);
    cJSON *s = cJSON_GetArrayItem(segs, 0);
    CHECK_NEAR(cJSON_GetObjectItem(s, "end")->valuedouble, 4.25, 1e-9);
    CHECK(cJSON_IsArray(cJSON_GetObjectItem(s, "tokens")));
    /* a repetitive text compresses: zlib's ratio is over 1 */
    CHECK(cJSON_GetObjectItem(s, "compression_ratio")->valuedouble > 1.0);
    cJSON *fr = cJSON_GetObjectItem(j, "frugal");
    CHECK(fr && cJSON_GetObjectItem(fr, "joules")->valuedouble == 1.5 &&
          cJSON_IsTrue(cJSON_GetObjectItem(fr, "final")));
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "seconds")->valueint, 5);
    cJSON_Delete(j);
    free(o);
    t = (fr_audio_transcript){.text = "", .seconds = 1.0};
    o = fr_audio_render(FR_AUDIO_TRANSCRIBE, &f, &t, NULL, &len, &ct);
    j = cJSON_Parse(o);
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "segments")) == 0 &&
          !cJSON_GetObjectItem(j, "frugal"));
    cJSON_Delete(j);
    free(o);
}

/* An engine's own segments (Whisper's): one cue each, ids in order, texts trimmed in cues. */
TEST(audio_render_segments) {
    static const fr_audio_segment segs[] = {{0.0, 1.5, " Hello."}, {1.5, 3.25, " How are you?"}};
    fr_audio_transcript t = {.text = "Hello. How are you?", .seconds = 4.0, .language = "german",
                             .segments = segs, .n_segments = 2};
    fr_audio_form f = {.format = FR_AUDIO_FMT_SRT};
    size_t len;
    const char *ct;
    char *o = fr_audio_render(FR_AUDIO_TRANSCRIBE, &f, &t, NULL, &len, &ct);
    CHECK_STR(o, "1\n00:00:00,000 --> 00:00:01,500\nHello.\n\n2\n00:00:01,500 --> 00:00:03,250\nHow are you?\n\n");
    free(o);
    f.format = FR_AUDIO_FMT_VERBOSE_JSON;
    o = fr_audio_render(FR_AUDIO_TRANSCRIBE, &f, &t, NULL, &len, &ct);
    cJSON *j = cJSON_Parse(o);
    cJSON *sg = cJSON_GetObjectItem(j, "segments");
    CHECK_EQ_INT(cJSON_GetArraySize(sg), 2);
    CHECK_STR(cJSON_GetObjectItem(j, "language")->valuestring, "german");
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetArrayItem(sg, 1), "id")->valueint, 1);
    CHECK_NEAR(cJSON_GetObjectItem(cJSON_GetArrayItem(sg, 1), "start")->valuedouble, 1.5, 1e-9);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(sg, 1), "text")->valuestring, " How are you?");
    cJSON_Delete(j);
    free(o);
}

int main(void) { return t_main(); }
