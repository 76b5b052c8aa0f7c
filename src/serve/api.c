/* api.c — OpenAI request validation and response JSON (see api.h for the policy).
 *
 * Parsing never trusts sizes from the body: the body length is bounded by the HTTP layer, cJSON
 * parses within that length, and every count (messages, stop strings, parts) is checked against
 * its limit before anything is built from it.
 */
#include "serve/api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/kv.h"
#include "base/mask.h"
#include "engine/engine.h"
#include "engine/sched.h"
#include "meter/meter.h"
#include "serve/media_parts.h"

void fr_api_error_set(fr_api_error *e, int status, const char *type, const char *code,
                      const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    fr_mask_inplace(e->message); /* messages echo model names, paths, part and media types */
}

#define BAD(param, ...)                                                                     \
    do {                                                                                    \
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param, __VA_ARGS__);      \
        goto fail;                                                                          \
    } while (0)
#define UNSUPPORTED(param, ...)                                                              \
    do {                                                                                     \
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_parameter", param,  \
                         __VA_ARGS__);                                                       \
        goto fail;                                                                           \
    } while (0)

static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
    return it && !cJSON_IsNull(it) ? it : NULL; /* null = absent, as OpenAI treats it */
}

static bool is_int(const cJSON *it) {
    return cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
           it->valuedouble == floor(it->valuedouble);
}

/* An image part of a request to a vision-language model: its bytes appended to out->images, a
 * {"type": "image"} part to *parts. 0, or -1 with err. */
static int collect_image(const cJSON *part, const char *t, const char *param,
                         const fr_api_limits *lim, fr_api_req *out, cJSON *parts,
                         fr_api_error *err) {
    if (out->n_images >= lim->max_images) {
        fr_api_error_set(err, 400, "invalid_request_error", "too_many_images", param,
                         "%s: more than %d images in one request", param, lim->max_images);
        return -1;
    }
    fr_api_image im;
    memset(&im, 0, sizeof im);
    if (fr_api_media_image_bytes(part, t, param, lim, &im.data, &im.len, im.mime, sizeof im.mime,
                                 err))
        return -1;
    snprintf(im.param, sizeof im.param, "%s", param);
    out->images = fr_xrealloc(out->images, sizeof *out->images * (size_t)(out->n_images + 1));
    out->images[out->n_images++] = im;
    cJSON *ip = cJSON_CreateObject();
    cJSON_AddStringToObject(ip, "type", "image");
    cJSON_AddItemToArray(parts, ip);
    return 0;
}

/* Text of a content value (string or array of parts). With parts non-NULL (a vision-language
 * model) image parts are collected into out->images and *parts gets the message's parts in
 * order ({"type": "text"} / {"type": "image"}). 0, or -1 with err. */
static int content_text(const cJSON *content, int idx, const fr_api_limits *lim,
                        fr_api_req *req, cJSON *parts, fr_buf *out, fr_api_error *err) {
    unsigned *inputs = &req->inputs;
    char param[96];
    if (cJSON_IsString(content)) {
        if (content->valuestring[0]) *inputs |= FR_MODALITY_TEXT;
        fr_buf_puts(out, content->valuestring);
        return 0;
    }
    snprintf(param, sizeof param, "messages[%d].content", idx);
    if (!cJSON_IsArray(content)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s must be a string or an array of content parts", param);
        return -1;
    }
    int j = 0, n_text = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, content) {
        snprintf(param, sizeof param, "messages[%d].content[%d]", idx, j);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type)) {
            fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                             "%s must be an object with a string \"type\"", param);
            return -1;
        }
        const char *t = type->valuestring;
        if (!strcmp(t, "text") || !strcmp(t, "refusal")) {
            const cJSON *txt = cJSON_GetObjectItemCaseSensitive(part, t);
            if (!cJSON_IsString(txt)) {
                fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                                 "%s.%s must be a string", param, t);
                return -1;
            }
            if (n_text++) fr_buf_puts(out, "\n");
            if (txt->valuestring[0]) *inputs |= FR_MODALITY_TEXT;
            fr_buf_puts(out, txt->valuestring);
            if (parts) {
                cJSON *tp = cJSON_CreateObject();
                cJSON_AddStringToObject(tp, "type", "text");
                cJSON_AddStringToObject(tp, "text", txt->valuestring);
                cJSON_AddItemToArray(parts, tp);
            }
        } else if (parts && (!strcmp(t, "image_url") || !strcmp(t, "image"))) {
            *inputs |= FR_MODALITY_IMAGE;
            if (collect_image(part, t, param, lim, req, parts, err)) return -1;
        } else if (!strcmp(t, "image_url") || !strcmp(t, "input_audio")) {
            /* turned into text by OCR / ASR as the route says (media_parts.h) */
            if (n_text++) fr_buf_puts(out, "\n");
            *inputs |= !strcmp(t, "image_url") ? FR_MODALITY_IMAGE : FR_MODALITY_AUDIO;
            if (fr_api_media_part_text_metered(part, t, param, lim->meter, lim->meter_req,
                                           lim->cancel, out, err))
                return -1;
        } else if (!strcmp(t, "file") || !strcmp(t, "image") || !strcmp(t, "audio") ||
                   !strcmp(t, "input_image")) {
            fr_api_error_set(err, 400, "invalid_request_error", "unsupported_content_part", param,
                             "content part type \"%s\" (%s) is not supported: text, image_url "
                             "and input_audio parts are",
                             t, param);
            return -1;
        } else {
            fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                             "unknown content part type \"%.64s\" (%s)", t, param);
            return -1;
        }
        j++;
    }
    return 0;
}

/* The role of messages[i] (system, developer, user, assistant or tool), checking that the message
 * is an object without tool calls. NULL with *err set (400 naming the field). */
static const char *message_role(const cJSON *m, int i, fr_api_error *err) {
    char param[96];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(m)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s must be an object", param);
        return NULL;
    }
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    snprintf(param, sizeof param, "messages[%d].role", i);
    if (!cJSON_IsString(role)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s must be a string", param);
        return NULL;
    }
    const char *r = role->valuestring;
    if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") &&
        strcmp(r, "assistant") && strcmp(r, "tool")) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s must be one of system, developer, user, assistant, tool", param);
        return NULL;
    }
    const cJSON *tc = field(m, "tool_calls");
    if (tc && (!cJSON_IsArray(tc) || cJSON_GetArraySize(tc) > 0)) {
        snprintf(param, sizeof param, "messages[%d].tool_calls", i);
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_parameter", param,
                         "tool calls are not supported (%s)", param);
        return NULL;
    }
    return r;
}

static int parse_messages(const cJSON *msgs, const fr_api_limits *lim, fr_api_req *out,
                          fr_api_error *err) {
    if (!msgs) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "messages",
                         "\"messages\" is required");
        return -1;
    }
    if (!cJSON_IsArray(msgs)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "messages",
                         "\"messages\" must be an array");
        return -1;
    }
    int n = cJSON_GetArraySize(msgs);
    if (n < 1) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "messages",
                         "\"messages\" must not be empty");
        return -1;
    }
    if (n > lim->max_messages) {
        fr_api_error_set(err, 400, "invalid_request_error", "too_many_messages", "messages",
                         "%d messages exceed the limit of %d", n, lim->max_messages);
        return -1;
    }
    out->messages = cJSON_CreateArray();
    fr_buf text = {0};
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[96];
        cJSON *parts = NULL; /* the message's parts (vision-language model), made below */
        int images_before = out->n_images;
        const char *r = message_role(m, i, err);
        if (!r) goto fail;
        const cJSON *content = field(m, "content");
        text.len = 0;
        fr_buf_append(&text, "", 0); /* keeps it NUL-terminated */
        if (!content) {
            if (strcmp(r, "assistant")) {
                snprintf(param, sizeof param, "messages[%d].content", i);
                fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                                 "%s is required", param);
                goto fail;
            }
        } else {
            parts = lim->max_images > 0 ? cJSON_CreateArray() : NULL;
            if (content_text(content, i, lim, out, parts, &text, err)) {
                cJSON_Delete(parts);
                goto fail;
            }
        }
        cJSON *nm = cJSON_CreateObject();
        cJSON_AddStringToObject(nm, "role", !strcmp(r, "developer") ? "system" : r);
        if (parts && out->n_images > images_before) /* the template places the images */
            cJSON_AddItemToObject(nm, "content", parts);
        else {
            cJSON_AddStringToObject(nm, "content", fr_buf_cstr(&text));
            cJSON_Delete(parts);
        }
        cJSON_AddItemToArray(out->messages, nm);
        i++;
    }
    fr_buf_free(&text);
    return 0;
fail:
    fr_buf_free(&text);
    return -1;
}

cJSON *fr_api_parse_object(const char *body, size_t len, size_t max_body_bytes,
                           fr_api_error *err) {
    if (max_body_bytes && len > max_body_bytes) {
        fr_api_error_set(err, 413, "invalid_request_error", "request_too_large", NULL,
                         "request body of %zu bytes exceeds the limit of %zu", len,
                         max_body_bytes);
        return NULL;
    }
    if (len == 0) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                         "request body is empty: expected a JSON object");
        return NULL;
    }
    if (!fr_utf8_valid(body, len)) {
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_utf8", NULL,
                         "request body is not valid UTF-8");
        return NULL;
    }
    if (memchr(body, 0, len)) {
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_json", NULL,
                         "request body contains a NUL byte");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        /* cJSON reports the failing position through `end` (its global error pointer is not
         * thread-safe) */
        size_t off = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_json", NULL,
                         "request body is not valid JSON (error near byte %zu)", off);
        return NULL;
    }
    while (end && end < body + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
        end++;
    if (end && end < body + len) {
        cJSON_Delete(root);
        fr_api_error_set(err, 400, "invalid_request_error", "invalid_json", NULL,
                         "request body has trailing data after the JSON value");
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        fr_api_error_set(err, 400, "invalid_request_error", NULL, NULL,
                         "request body must be a JSON object");
        return NULL;
    }
    return root;
}

/* Step 1: "model", and the chat "messages" or the completions "prompt". 0, or -1 with *err set. */
static int parse_input(const cJSON *root, fr_api_kind kind, const fr_api_limits *lim,
                       fr_api_req *out, fr_api_error *err) {
    const cJSON *it;
    if ((it = field(root, "model"))) {
        if (!cJSON_IsString(it)) BAD("model", "\"model\" must be a string");
        out->model = fr_xstrdup(it->valuestring);
    }
    if (kind == FR_API_CHAT) {
        if (parse_messages(field(root, "messages"), lim, out, err)) goto fail;
    } else {
        it = field(root, "prompt");
        if (!it) BAD("prompt", "\"prompt\" is required");
        if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 1 &&
            cJSON_IsString(cJSON_GetArrayItem(it, 0)))
            it = cJSON_GetArrayItem(it, 0);
        if (!cJSON_IsString(it))
            BAD("prompt", "\"prompt\" must be a string (token arrays and batches of prompts are "
                          "not supported)");
        out->prompt = fr_xstrdup(it->valuestring);
        out->inputs |= FR_MODALITY_TEXT;
    }
    return 0;
fail:
    return -1;
}

/* Step 2: the length and sampling fields: max_completion_tokens / max_tokens (within
 * lim->max_tokens), temperature, top_p, seed. 0, or -1 with *err set. */
static int parse_sampling(const cJSON *root, const fr_api_limits *lim, fr_api_req *out,
                          fr_api_error *err) {
    const cJSON *it;
    /* max_completion_tokens (current name) wins over max_tokens (older name) */
    const char *mt_name = field(root, "max_completion_tokens") ? "max_completion_tokens"
                                                               : "max_tokens";
    if ((it = field(root, mt_name))) {
        if (!is_int(it)) BAD(mt_name, "\"%s\" must be an integer", mt_name);
        if (it->valuedouble < 1)
            BAD(mt_name, "\"%s\" must be at least 1 (got %.0f)", mt_name, it->valuedouble);
        if (it->valuedouble > lim->max_tokens)
            BAD(mt_name, "\"%s\" of %.15g exceeds this server's limit of %d", mt_name,
                it->valuedouble, lim->max_tokens);
        out->max_tokens = (int)it->valuedouble;
    }
    if ((it = field(root, "temperature"))) {
        if (!cJSON_IsNumber(it)) BAD("temperature", "\"temperature\" must be a number");
        if (!(it->valuedouble >= 0 && it->valuedouble <= 2))
            BAD("temperature", "\"temperature\" must be between 0 and 2");
        out->temperature = it->valuedouble;
    }
    if ((it = field(root, "top_p"))) {
        if (!cJSON_IsNumber(it)) BAD("top_p", "\"top_p\" must be a number");
        if (!(it->valuedouble >= 0 && it->valuedouble <= 1))
            BAD("top_p", "\"top_p\" must be between 0 and 1");
        out->top_p = it->valuedouble;
    }
    if ((it = field(root, "seed"))) {
        if (!is_int(it) || fabs(it->valuedouble) > 9.2e18)
            BAD("seed", "\"seed\" must be an integer");
        out->has_seed = true;
        out->seed = (uint64_t)(int64_t)it->valuedouble;
    }
    return 0;
fail:
    return -1;
}

/* Step 3: "stop", one string or an array of at most FR_API_MAX_STOP. 0, or -1 with *err set. */
static int parse_stop(const cJSON *root, fr_api_req *out, fr_api_error *err) {
    const cJSON *it;
    if ((it = field(root, "stop"))) {
        if (cJSON_IsString(it)) {
            out->stop[out->n_stop++] = fr_xstrdup(it->valuestring);
        } else if (cJSON_IsArray(it)) {
            if (cJSON_GetArraySize(it) > FR_API_MAX_STOP)
                BAD("stop", "\"stop\" takes at most %d strings", FR_API_MAX_STOP);
            const cJSON *s;
            cJSON_ArrayForEach(s, it) {
                if (!cJSON_IsString(s)) BAD("stop", "\"stop\" must be a string or an array of strings");
                out->stop[out->n_stop++] = fr_xstrdup(s->valuestring);
            }
        } else {
            BAD("stop", "\"stop\" must be a string or an array of strings");
        }
    }
    return 0;
fail:
    return -1;
}

/* Step 4: "n" (only 1), "stream" and "stream_options". 0, or -1 with *err set. */
static int parse_stream(const cJSON *root, fr_api_req *out, fr_api_error *err) {
    const cJSON *it;
    if ((it = field(root, "n"))) {
        if (!is_int(it)) BAD("n", "\"n\" must be an integer");
        if (it->valuedouble != 1) UNSUPPORTED("n", "only n=1 is supported");
    }
    if ((it = field(root, "stream"))) {
        if (!cJSON_IsBool(it)) BAD("stream", "\"stream\" must be true or false");
        out->stream = cJSON_IsTrue(it);
    }
    if ((it = field(root, "stream_options"))) {
        if (!cJSON_IsObject(it)) BAD("stream_options", "\"stream_options\" must be an object");
        const cJSON *iu = field(it, "include_usage");
        if (iu && !cJSON_IsBool(iu))
            BAD("stream_options.include_usage", "\"include_usage\" must be true or false");
        out->include_usage = iu && cJSON_IsTrue(iu);
    }
    return 0;
fail:
    return -1;
}

/* Step 5: our extensions: "priority" (tier), "ignore_eos", "return_token_ids", the image
 * settings, and the prefix cache's "cache_prompt" / "cache_salt". 0, or -1 with *err set. */
static int parse_extensions(const cJSON *root, fr_api_req *out, fr_api_error *err) {
    const cJSON *it;
    if ((it = field(root, "priority"))) {
        int t = -1;
        if (cJSON_IsString(it)) t = fr_tier_parse(it->valuestring);
        else if (is_int(it) && it->valuedouble >= 0 && it->valuedouble <= 2) t = (int)it->valuedouble;
        if (t < 0) BAD("priority", "\"priority\" must be \"P0\", \"P1\" or \"P2\"");
        out->priority = t;
    }
    if ((it = field(root, "ignore_eos"))) {
        if (!cJSON_IsBool(it)) BAD("ignore_eos", "\"ignore_eos\" must be true or false");
        out->ignore_eos = cJSON_IsTrue(it);
    }
    if ((it = field(root, "return_token_ids"))) {
        if (!cJSON_IsBool(it))
            BAD("return_token_ids", "\"return_token_ids\" must be true or false");
        out->return_token_ids = cJSON_IsTrue(it);
    }
    if ((it = field(root, "cache_prompt"))) {
        if (!cJSON_IsBool(it)) BAD("cache_prompt", "\"cache_prompt\" must be true or false");
        out->no_prefix_cache = !cJSON_IsTrue(it);
    }
    if ((it = field(root, "cache_salt"))) {
        size_t n = cJSON_IsString(it) ? strlen(it->valuestring) : 0;
        if (n < 1 || n > 1024)
            BAD("cache_salt", "\"cache_salt\" must be a string of 1 to 1024 bytes");
        out->cache_salt = fr_kv_hash_bytes(it->valuestring, n) | 1; /* never 0 (= none) */
    }
    if ((it = field(root, "keep_ratio"))) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble > 0 && it->valuedouble <= 1))
            BAD("keep_ratio", "\"keep_ratio\" must be a number in (0, 1]");
        out->keep_ratio = it->valuedouble;
    }
    if ((it = field(root, "max_image_tokens"))) {
        if (!is_int(it) || it->valuedouble < 1 || it->valuedouble > (double)(1 << 24))
            BAD("max_image_tokens", "\"max_image_tokens\" must be an integer in 1..%d", 1 << 24);
        out->max_image_tokens = (int64_t)it->valuedouble;
    }
    if ((it = field(root, "mm_processor_kwargs"))) {
        if (!cJSON_IsObject(it))
            BAD("mm_processor_kwargs", "\"mm_processor_kwargs\" must be an object");
        const cJSON *k;
        cJSON_ArrayForEach(k, it) {
            bool mn = !strcmp(k->string, "min_pixels"), mx = !strcmp(k->string, "max_pixels");
            if (!mn && !mx)
                BAD("mm_processor_kwargs", "mm_processor_kwargs.%.40s is not supported (min_pixels "
                    "and max_pixels are)", k->string);
            if (!is_int(k) || k->valuedouble < 1 || k->valuedouble > 1e12)
                BAD("mm_processor_kwargs", "mm_processor_kwargs.%s must be a positive integer",
                    k->string);
            *(mn ? &out->min_pixels : &out->max_pixels) = (int64_t)k->valuedouble;
        }
    }
    return 0;
fail:
    return -1;
}

/* Step 6: known OpenAI fields we cannot honour with a non-default value are a 400
 * unsupported_parameter, never silently ignored. 0, or -1 with *err set. */
static int refuse_unsupported(const cJSON *root, fr_api_kind kind, fr_api_req *out,
                              fr_api_error *err) {
    const cJSON *it;
    /* known fields we cannot honour with a non-default value */
    if ((it = field(root, "logprobs")) && !cJSON_IsFalse(it))
        UNSUPPORTED("logprobs", "\"logprobs\" is not supported");
    if ((it = field(root, "top_logprobs")) && !(cJSON_IsNumber(it) && it->valuedouble == 0))
        UNSUPPORTED("top_logprobs", "\"top_logprobs\" is not supported");
    if ((it = field(root, "tools")) && !(cJSON_IsArray(it) && cJSON_GetArraySize(it) == 0))
        UNSUPPORTED("tools", "\"tools\" (function calling) is not supported");
    if ((it = field(root, "functions")) && !(cJSON_IsArray(it) && cJSON_GetArraySize(it) == 0))
        UNSUPPORTED("functions", "\"functions\" (function calling) is not supported");
    if ((it = field(root, "tool_choice")) &&
        !(cJSON_IsString(it) && (!strcmp(it->valuestring, "none") || !strcmp(it->valuestring, "auto"))))
        UNSUPPORTED("tool_choice", "\"tool_choice\" is not supported");
    if ((it = field(root, "response_format"))) {
        const cJSON *t = cJSON_IsObject(it) ? field(it, "type") : NULL;
        if (!(cJSON_IsString(t) && !strcmp(t->valuestring, "text")))
            UNSUPPORTED("response_format", "only \"response_format\": {\"type\": \"text\"} is supported");
    }
    if ((it = field(root, "logit_bias")) && !(cJSON_IsObject(it) && !it->child))
        UNSUPPORTED("logit_bias", "\"logit_bias\" is not supported");
    static const char *const zero_only[] = {"presence_penalty", "frequency_penalty"};
    for (size_t i = 0; i < FR_ARRAY_LEN(zero_only); i++)
        if ((it = field(root, zero_only[i]))) {
            if (!cJSON_IsNumber(it)) BAD(zero_only[i], "\"%s\" must be a number", zero_only[i]);
            if (it->valuedouble != 0)
                UNSUPPORTED(zero_only[i], "\"%s\" is not supported (only 0)", zero_only[i]);
        }
    if (kind == FR_API_COMPLETIONS) {
        if ((it = field(root, "echo")) && !cJSON_IsFalse(it))
            UNSUPPORTED("echo", "\"echo\" is not supported");
        if ((it = field(root, "best_of")) && !(is_int(it) && it->valuedouble == 1))
            UNSUPPORTED("best_of", "only best_of=1 is supported");
        if ((it = field(root, "suffix")) && !(cJSON_IsString(it) && !it->valuestring[0]))
            UNSUPPORTED("suffix", "\"suffix\" is not supported");
    }
    return 0;
fail:
    return -1;
}

int fr_api_parse(fr_api_kind kind, const char *body, size_t len, const fr_api_limits *lim,
                 fr_api_req *out, fr_api_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->temperature = 1;
    out->top_p = 1;
    out->priority = -1;
    out->keep_ratio = -1;
    out->max_image_tokens = -1;
    cJSON *root = fr_api_parse_object(body, len, lim->max_body_bytes, err);
    if (!root) return -1;
    int rc = parse_input(root, kind, lim, out, err) || parse_sampling(root, lim, out, err) ||
                     parse_stop(root, out, err) || parse_stream(root, out, err) ||
                     parse_extensions(root, out, err) || refuse_unsupported(root, kind, out, err)
                 ? -1
                 : 0;
    cJSON_Delete(root);
    if (rc) {
        unsigned inputs = out->inputs; /* kept: a part may have been read before the error */
        fr_api_req_free(out);
        out->inputs = inputs;
    }
    return rc;
}

void fr_api_req_free(fr_api_req *r) {
    cJSON_Delete(r->messages);
    free(r->prompt);
    free(r->model);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (int i = 0; i < r->n_images; i++) free(r->images[i].data);
    free(r->images);
    memset(r, 0, sizeof *r);
    r->max_tokens = -1;
    r->priority = -1;
    r->keep_ratio = -1;
    r->max_image_tokens = -1;
}

int fr_api_max_tokens(int requested, int dflt, int ctx, size_t n_prompt, const char *param,
                      fr_api_error *e) {
    if (requested < 0) {
        int left = FR_MIN(dflt, ctx - (int)FR_MIN(n_prompt, (size_t)INT32_MAX));
        if (left >= 1) return left;
        fr_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                         "The prompt (%zu tokens) fills the context length of %d.", n_prompt, ctx);
        return -1;
    }
    if ((long long)n_prompt + requested > ctx) {
        fr_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                         "This model's maximum context length is %d tokens. However, you "
                         "requested %lld tokens (%zu in the prompt, %d in the completion).",
                         ctx, (long long)n_prompt + requested, n_prompt, requested);
        return -1;
    }
    return requested;
}

void fr_api_req_params_init(fr_req_params *p, const int32_t *ids, size_t n_ids, int max_tokens,
                            int tier, double t_arrival, double deadline) {
    memset(p, 0, sizeof *p);
    p->prompt = ids;
    p->n_prompt = (int)n_ids;
    p->gen = fr_gen_params_default();
    p->gen.max_tokens = max_tokens;
    p->sampling = fr_sampling_default();
    p->tier = tier;
    p->t_arrival = t_arrival;
    p->deadline = deadline;
}

void fr_api_req_params_apply(fr_req_params *p, const fr_api_req *q, uint64_t seed) {
    p->gen.ignore_eos = q->ignore_eos;
    for (int i = 0; i < q->n_stop && p->gen.n_stop < FR_GEN_MAX_STOP; i++)
        p->gen.stop[p->gen.n_stop++] = q->stop[i];
    p->sampling.temperature = (float)q->temperature;
    p->sampling.top_p = (float)q->top_p;
    p->sampling.top_k = 0;
    p->sampling.min_p = 0;
    p->sampling.seed = seed;
    p->no_prefix_cache = q->no_prefix_cache;
    p->cache_salt = q->cache_salt;
}

static char *print_free(cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) fr_panic(__FILE__, __LINE__, "out of memory printing JSON");
    return s;
}

char *fr_api_error_json(const fr_api_error *e) {
    cJSON *j = cJSON_CreateObject();
    cJSON *o = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(o, "param", e->param);
    else cJSON_AddNullToObject(o, "param");
    if (e->code) cJSON_AddStringToObject(o, "code", e->code);
    else cJSON_AddNullToObject(o, "code");
    return print_free(j);
}

static unsigned long long id_salt;
static pthread_once_t id_once = PTHREAD_ONCE_INIT;
static void id_salt_init(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    id_salt = ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec ^
              ((unsigned long long)getpid() << 40);
}

void fr_api_new_id(char *out, size_t cap, const char *prefix) {
    static atomic_ullong counter;
    pthread_once(&id_once, id_salt_init);
    unsigned long long n = atomic_fetch_add(&counter, 1) + 1;
    unsigned long long x = (id_salt + n) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    snprintf(out, cap, "%s%016llx%06llx", prefix, x, n & 0xffffff);
}

static cJSON *usage_obj(const fr_api_result *r) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", r->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", r->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", r->prompt_tokens + r->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details"); /* as OpenAI: always */
    cJSON_AddNumberToObject(d, "cached_tokens", r->cached_tokens);
    if (r->image_tokens > 0) { /* a prompt with images (docs/SERVING.md) */
        cJSON_AddNumberToObject(d, "image_tokens", (double)r->image_tokens);
        cJSON_AddNumberToObject(u, "image_tokens_kept", (double)r->image_tokens_kept);
    }
    return u;
}

static void add_ids(cJSON *choice, const fr_api_result *r) {
    if (!r->token_ids) return;
    cJSON *a = cJSON_AddArrayToObject(choice, "token_ids");
    for (int i = 0; i < r->n_token_ids; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(r->token_ids[i]));
}

static cJSON *string_n(const char *s, size_t n) {
    char *tmp = fr_xstrndup(s ? s : "", s ? n : 0);
    cJSON *j = cJSON_CreateString(tmp);
    free(tmp);
    return j;
}

static cJSON *envelope(const fr_api_result *r, const char *object) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", r->id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddNumberToObject(j, "created", (double)r->created);
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddStringToObject(j, "system_fingerprint", "frugal");
    return j;
}

char *fr_api_chat_response(const fr_api_result *r) {
    cJSON *j = envelope(r, "chat.completion");
    cJSON *ch = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddItemToObject(m, "content", string_n(r->text, r->text_len));
    cJSON_AddNullToObject(m, "refusal");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", r->finish);
    add_ids(c, r);
    cJSON_AddItemToArray(ch, c);
    cJSON_AddItemToObject(j, "usage", usage_obj(r));
    return print_free(j);
}

char *fr_api_completion_response(const fr_api_result *r) {
    cJSON *j = envelope(r, "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToObject(c, "text", string_n(r->text, r->text_len));
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", r->finish);
    add_ids(c, r);
    cJSON_AddItemToArray(ch, c);
    cJSON_AddItemToObject(j, "usage", usage_obj(r));
    return print_free(j);
}

static void sse(fr_buf *out, cJSON *j) {
    char *s = print_free(j);
    fr_buf_puts(out, "data: ");
    fr_buf_puts(out, s);
    fr_buf_puts(out, "\n\n");
    free(s);
}

void fr_api_stream_chunk(fr_buf *out, fr_api_kind kind, const fr_api_result *r, bool role_first,
                         const char *text, size_t text_len, const char *finish,
                         bool with_usage_null) {
    cJSON *j = envelope(r, kind == FR_API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (kind == FR_API_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role_first) {
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", "");
        } else if (text) {
            cJSON_AddItemToObject(d, "content", string_n(text, text_len));
        }
    } else {
        cJSON_AddItemToObject(c, "text", string_n(text, text ? text_len : 0));
    }
    cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    if (!role_first) add_ids(c, r);
    cJSON_AddItemToArray(ch, c);
    if (with_usage_null) cJSON_AddNullToObject(j, "usage");
    sse(out, j);
}

void fr_api_stream_usage(fr_buf *out, fr_api_kind kind, const fr_api_result *r) {
    cJSON *j = envelope(r, kind == FR_API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(j, "choices");
    cJSON_AddItemToObject(j, "usage", usage_obj(r));
    sse(out, j);
}

void fr_api_stream_error(fr_buf *out, const fr_api_error *e) {
    char *s = fr_api_error_json(e);
    fr_buf_puts(out, "data: ");
    fr_buf_puts(out, s);
    fr_buf_puts(out, "\n\n");
    free(s);
}

void fr_api_stream_done(fr_buf *out) { fr_buf_puts(out, "data: [DONE]\n\n"); }

static cJSON *model_json(const char *model, const char *parent, long long created) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "frugal");
    if (parent) cJSON_AddStringToObject(m, "parent", parent);
    return m;
}

char *fr_api_model_object(const char *model, const char *parent, long long created) {
    return print_free(model_json(model, parent, created));
}

char *fr_api_models_response(const char *model, long long created,
                             const char (*adapters)[FR_API_MAX_ADAPTER_NAME], int n_adapters) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(j, "data");
    cJSON_AddItemToArray(d, model_json(model, NULL, created));
    for (int i = 0; i < n_adapters; i++) cJSON_AddItemToArray(d, model_json(adapters[i], model, created));
    return print_free(j);
}
