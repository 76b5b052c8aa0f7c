/* fuzz_request.c — libFuzzer harness for the serving layer's parsers of untrusted bytes (see
 * tests/fuzz/README.md): the OpenAI request validator (src/serve/api.c), the server config file
 * and the API key file (src/serve/config.c).
 *
 * The first input byte picks the mode and the limits; the rest is the input:
 *   mode 0/1  a /v1/chat/completions or /v1/completions body through fr_api_parse. A refusal must
 *             be a 400, 413 or 415 with a message, and its error JSON must parse back with the four
 *             OpenAI fields. An accepted request must satisfy every documented bound (messages
 *             1..max, roles normalised, max_tokens -1 or 1..limit, temperature 0..2, top_p 0..1,
 *             at most 4 stop strings, priority -1..2), and the response and stream chunk built
 *             from its text must be valid JSON. With the limits' bit 32 the body is parsed for a
 *             vision-language model (max_images 2, remote URLs off): images are collected (at
 *             most 2, none empty) and a message holding one keeps an array of text / image parts;
 *             keep_ratio, max_image_tokens and mm_processor_kwargs stay within their bounds.
 *   mode 2    the bytes as a JSON config document (fr_serve_config_apply_json).
 *   mode 3    the bytes as an API key file (fr_serve_keys_parse, file and environment syntax);
 *             every key accepted must be found again by fr_serve_find_key with sane tiers, and
 *             a refusal must carry a message (messages name the source and line, never a key).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api.h"
#include "serve/config.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_request: invariant failed: %s\n", what);
    abort();
}

static void check_error(const fr_api_error *e) {
    if (e->status != 400 && e->status != 413 && e->status != 415) fail("error status");
    if (!e->message[0]) fail("empty error message");
    char *js = fr_api_error_json(e);
    cJSON *j = cJSON_Parse(js);
    const cJSON *o = j ? cJSON_GetObjectItem(j, "error") : NULL;
    if (!o || !cJSON_IsString(cJSON_GetObjectItem(o, "message")) ||
        !cJSON_IsString(cJSON_GetObjectItem(o, "type")) || !cJSON_GetObjectItem(o, "param") ||
        !cJSON_GetObjectItem(o, "code"))
        fail("error JSON shape");
    cJSON_Delete(j);
    free(js);
}

static void check_json(char *s) {
    cJSON *j = cJSON_Parse(s);
    if (!j) fail("response is not JSON");
    cJSON_Delete(j);
    free(s);
}

static void request(fr_api_kind kind, const fr_api_limits *lim, const char *data, size_t n) {
    fr_api_req q;
    fr_api_error e;
    memset(&e, 0, sizeof e);
    if (fr_api_parse(kind, data, n, lim, &q, &e)) {
        check_error(&e);
        return;
    }
    const char *text = "";
    if (kind == FR_API_CHAT) {
        int nm = cJSON_GetArraySize(q.messages);
        if (nm < 1 || nm > lim->max_messages) fail("message count");
        const cJSON *m;
        cJSON_ArrayForEach(m, q.messages) {
            const cJSON *role = cJSON_GetObjectItem(m, "role");
            const cJSON *content = cJSON_GetObjectItem(m, "content");
            if (!cJSON_IsString(role)) fail("normalised message");
            if (cJSON_IsArray(content)) { /* a message holding images (vision-language model) */
                if (!q.n_images) fail("parts without images");
                const cJSON *pt;
                cJSON_ArrayForEach(pt, content) {
                    const cJSON *ty = cJSON_GetObjectItem(pt, "type");
                    if (!cJSON_IsString(ty) || (strcmp(ty->valuestring, "image") &&
                                                strcmp(ty->valuestring, "text")))
                        fail("normalised part");
                }
                continue;
            }
            if (!cJSON_IsString(content)) fail("normalised message");
            const char *r = role->valuestring;
            if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") &&
                strcmp(r, "tool"))
                fail("role");
            text = content->valuestring;
        }
    } else {
        if (!q.prompt) fail("prompt");
        text = q.prompt;
    }
    if (q.max_tokens != -1 && (q.max_tokens < 1 || q.max_tokens > lim->max_tokens))
        fail("max_tokens bound");
    if (!(q.temperature >= 0 && q.temperature <= 2)) fail("temperature bound");
    if (!(q.top_p >= 0 && q.top_p <= 1)) fail("top_p bound");
    if (q.n_stop < 0 || q.n_stop > FR_API_MAX_STOP) fail("stop count");
    for (int i = 0; i < q.n_stop; i++)
        if (!q.stop[i]) fail("stop string");
    if (q.priority < -1 || q.priority > 2) fail("priority");
    if (q.n_images < 0 || q.n_images > lim->max_images) fail("image count");
    for (int i = 0; i < q.n_images; i++)
        if (!q.images[i].data || q.images[i].len == 0) fail("empty image");
    if (q.keep_ratio != -1 && !(q.keep_ratio > 0 && q.keep_ratio <= 1)) fail("keep_ratio bound");
    if (q.max_image_tokens != -1 && q.max_image_tokens < 1) fail("max_image_tokens bound");
    if (q.min_pixels < 0 || q.max_pixels < 0) fail("pixel bounds");
    if (q.model && !fr_utf8_valid(q.model, strlen(q.model))) fail("model UTF-8");
    fr_api_result r = {.id = "x", .model = q.model ? q.model : "m", .created = 1, .text = text,
                       .text_len = strlen(text), .finish = "stop", .prompt_tokens = 1,
                       .completion_tokens = 1};
    check_json(kind == FR_API_CHAT ? fr_api_chat_response(&r) : fr_api_completion_response(&r));
    fr_buf b = {0};
    fr_api_stream_chunk(&b, kind, &r, false, text, strlen(text), NULL, q.include_usage);
    if (b.len < 8 || strncmp(b.data, "data: ", 6) || strcmp(b.data + b.len - 2, "\n\n"))
        fail("SSE framing");
    b.data[b.len - 2] = 0;
    cJSON *j = cJSON_Parse(b.data + 6);
    if (!j) fail("SSE chunk is not JSON");
    cJSON_Delete(j);
    fr_buf_free(&b);
    fr_api_req_free(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] & 3;
    fr_api_limits lim = {.max_body_bytes = (data[0] & 4) ? 256 : 1 << 20,
                         .max_messages = (data[0] & 8) ? 2 : 64,
                         .max_tokens = (data[0] & 16) ? 10 : 4096,
                         .max_images = (data[0] & 32) ? 2 : 0};
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    if (mode <= 1) {
        request(mode == 0 ? FR_API_CHAT : FR_API_COMPLETIONS, &lim, p, n);
        return 0;
    }
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    if (mode == 2) {
        if (fr_serve_config_apply_json(&c, p, n, &err) && !err.msg[0]) fail("config error message");
    } else {
        char *text = fr_xstrndup(p, n); /* key files are text: stops at a NUL like a C string */
        bool env = data[0] & 32;
        int rc = fr_serve_keys_parse(&c, text, "keys", env, &err);
        if (rc) {
            if (!err.msg[0]) fail("keys error message");
        } else {
            for (int i = 0; i < c.n_keys; i++) {
                const fr_api_key *k = fr_serve_find_key(&c, c.keys[i].key, c.keys[i].len);
                if (!k || k->len != c.keys[i].len || memcmp(k->key, c.keys[i].key, k->len))
                    fail("key not found again");
                if (k->default_tier < k->highest_tier || k->default_tier > 2 || k->highest_tier < 0)
                    fail("key tiers");
            }
        }
        free(text);
    }
    fr_serve_config_free(&c);
    return 0;
}
