/* api.h — the OpenAI-compatible request schema and response shapes, without any HTTP or model:
 * parse and validate a request body into fr_api_req (or an OpenAI-style error with its HTTP
 * status), and build the JSON of responses, stream chunks and errors.
 *
 * Validation policy (docs/SERVING.md):
 *   - the body must be valid UTF-8 and one JSON object; known fields must have the right type and
 *     range, else 400 naming the field in `param`;
 *   - unknown fields are ignored (as vLLM and llama.cpp do), so newer clients keep working;
 *   - known fields we cannot honour with a non-default value (n > 1, logprobs, tools,
 *     response_format other than text, penalties, logit_bias, echo, best_of, suffix) are a 400
 *     that says so, never silently ignored;
 *   - content parts: "text" parts are joined with "\n"; image_url / input_audio parts become
 *     text by OCR / ASR (serve/media_parts.h), or, for a vision-language model
 *     (fr_api_limits.max_images > 0), image_url and image parts are collected as images
 *     (fr_api_req.images) and stay in the message as {"type": "image"} parts for the chat
 *     template; file parts are a 400 naming the part.
 */
#ifndef FRUGAL_SERVE_API_H
#define FRUGAL_SERVE_API_H

#include "base/base.h"

struct cJSON;
struct fr_meter;
struct fr_meter_req;
struct fr_req_params;

typedef enum fr_api_kind { FR_API_CHAT = 0, FR_API_COMPLETIONS = 1 } fr_api_kind;

typedef struct fr_api_error {
    int status;        /* HTTP status */
    const char *type;  /* "invalid_request_error", "authentication_error", ... */
    const char *code;  /* machine code or NULL */
    char param[96];    /* offending field ("" = null) */
    char message[512]; /* one line for people */
} fr_api_error;

void fr_api_error_set(fr_api_error *e, int status, const char *type, const char *code,
                      const char *param, const char *fmt, ...) FR_PRINTF(6, 7);

/* An image of a request to a vision-language model, as received. */
typedef struct fr_api_image {
    uint8_t *data;   /* the encoded bytes (owned) */
    size_t len;
    char mime[64];   /* the declared media type ("" = none) */
    char param[96];  /* the part that held it ("messages[0].content[1]"), for messages */
} fr_api_image;

typedef struct fr_api_limits {
    size_t max_body_bytes;   /* checked by the HTTP layer before parsing; repeated here */
    int max_messages;        /* chat messages */
    int max_tokens;          /* highest max_tokens accepted */
    /* the request's meter account: decoding, OCR and ASR of media parts are metered on it as
     * stages (NULL: not metered) */
    struct fr_meter *meter;
    struct fr_meter_req *meter_req;
    const fr_cancel *cancel; /* image / audio parts: the door's cancel check for OCR / ASR
                                (client gone, shutdown), or NULL */
    /* a vision-language model (0 = none: image parts go to OCR) */
    int max_images;          /* images a request may hold (more: 400 too_many_images) */
    bool allow_remote_images; /* fetch http(s) image URLs (else 400 remote_image_refused) */
    double remote_timeout_s; /* a fetch's whole time */
    size_t remote_max_bytes; /* a fetched image's size */
} fr_api_limits;

#define FR_API_MAX_STOP 4

typedef struct fr_api_req {
    fr_api_kind kind;
    struct cJSON *messages;  /* chat: normalised [{role, content: string}] (owned) */
    char *prompt;            /* completions: the prompt (owned) */
    char *model;             /* "model" or NULL */
    int max_tokens;          /* -1 = not given */
    double temperature;      /* default 1 */
    double top_p;            /* default 1 */
    bool has_seed;
    uint64_t seed;
    char *stop[FR_API_MAX_STOP]; /* owned */
    int n_stop;
    bool stream;
    bool include_usage;      /* stream_options.include_usage */
    int priority;            /* body "priority": 0..2, or -1 */
    bool ignore_eos;         /* extension: keep generating through EOS */
    bool return_token_ids;   /* extension: add the generated ids to the (last) choice */
    unsigned inputs;         /* FR_MODALITY_* bits (meter.h) of the content seen, also when the
                              * parse fails (a part may have been read before the error) */
    fr_api_image *images;    /* images collected for a vision-language model, prompt order */
    int n_images;
    double keep_ratio;       /* body "keep_ratio" in (0, 1], or -1 (not given) */
    int64_t max_image_tokens; /* body "max_image_tokens" >= 1, or -1 (not given) */
    int64_t min_pixels;      /* body "mm_processor_kwargs": {"min_pixels", "max_pixels"}, 0 = */
    int64_t max_pixels;      /* not given */
    bool no_prefix_cache;    /* body "cache_prompt": false (llama.cpp's name): no prefix cache */
    uint64_t cache_salt;     /* body "cache_salt" (vLLM's name) hashed, or 0 = none: only
                                requests with the same salt share cached blocks */
} fr_api_req;

/* Parse and validate. 0, or -1 with *err (status 400 and the field). */
/* The strict parse every JSON body goes through (chat, completions, assist): over
 * max_body_bytes (0 = no limit) 413; empty, invalid UTF-8, a NUL byte, not JSON, trailing bytes
 * after the value (a second object included) or not an object 400. The object (caller frees),
 * or NULL with *err set. */
struct cJSON *fr_api_parse_object(const char *body, size_t len, size_t max_body_bytes,
                                  fr_api_error *err);
int fr_api_parse(fr_api_kind kind, const char *body, size_t len, const fr_api_limits *lim,
                 fr_api_req *out, fr_api_error *err);
void fr_api_req_free(fr_api_req *r);

/* The completion budget of a prompt of n_prompt tokens in a context of ctx tokens: `requested`
 * when >= 0 (prompt + requested must fit), else `dflt` capped to what the prompt leaves. Returns
 * it (>= 1), or -1 with *e set to 400 context_length_exceeded naming `param` when it does not
 * fit. The one rule of /v1/chat/completions, /v1/completions and /v1/assist. */
int fr_api_max_tokens(int requested, int dflt, int ctx, size_t n_prompt, const char *param,
                      fr_api_error *e);

/* The engine request every endpoint starts from: the prompt ids (borrowed: fr_engine_submit
 * copies them), max_tokens, the engine's default generation and sampling settings
 * (fr_gen_params_default, fr_sampling_default), the tier, the arrival time and the absolute
 * deadline (0 = none); no meter account. The caller then sets what its endpoint adds (sampling,
 * stop strings, the meter account). Cannot fail. */
void fr_api_req_params_init(struct fr_req_params *p, const int32_t *ids, size_t n_ids,
                            int max_tokens, int tier, double t_arrival, double deadline);

/* The sampling and stop fields of a parsed chat / completions request into p: temperature,
 * top_p (no top-k, no min-p: the OpenAI API has neither), the stop strings (borrowed from q) and
 * ignore_eos; `seed` is the sampling seed (q->seed when q->has_seed, else a fresh one). */
void fr_api_req_params_apply(struct fr_req_params *p, const fr_api_req *q, uint64_t seed);

/* {"error": {"message", "type", "param", "code"}} (malloc'd). */
char *fr_api_error_json(const fr_api_error *e);

/* A fresh id with the given prefix ("chatcmpl-", "cmpl-"), into out. */
void fr_api_new_id(char *out, size_t cap, const char *prefix);

typedef struct fr_api_result {
    const char *id;          /* response id */
    const char *model;       /* served model name */
    long long created;       /* unix seconds */
    const char *text;        /* generated text */
    size_t text_len;
    const char *finish;      /* "stop" / "length" */
    int prompt_tokens, completion_tokens;
    const int32_t *token_ids; /* generated ids to return (extension), or NULL */
    int n_token_ids;
    int64_t image_tokens;      /* image tokens of the prompt before pruning, 0 = no images */
    int64_t image_tokens_kept; /* and after (prompt_tokens counts these) */
    int cached_tokens;         /* prompt tokens taken from the prefix cache
                                  (usage.prompt_tokens_details.cached_tokens) */
} fr_api_result;

/* Non-streaming response bodies (malloc'd JSON). */
char *fr_api_chat_response(const fr_api_result *r);
char *fr_api_completion_response(const fr_api_result *r);

/* One SSE event "data: {...}\n\n" appended to *out. For chat: role_first adds the initial
 * {"role":"assistant","content":""} delta; text may be NULL; finish NULL until the last chunk.
 * r->token_ids (when set) are the ids new in this chunk. with_usage_null adds "usage": null
 * (stream_options.include_usage). */
void fr_api_stream_chunk(fr_buf *out, fr_api_kind kind, const fr_api_result *r, bool role_first,
                         const char *text, size_t text_len, const char *finish,
                         bool with_usage_null);
/* The final usage chunk (empty choices). */
void fr_api_stream_usage(fr_buf *out, fr_api_kind kind, const fr_api_result *r);
/* "data: {error}\n\n" */
void fr_api_stream_error(fr_buf *out, const fr_api_error *e);
/* "data: [DONE]\n\n" */
void fr_api_stream_done(fr_buf *out);

/* GET /v1/models body. */
/* The models list: the base model, then each LoRA adapter (with "parent"). */
#define FR_API_MAX_ADAPTER_NAME 128 /* = FR_LORA_MAX_NAME */
char *fr_api_models_response(const char *model, long long created,
                             const char (*adapters)[FR_API_MAX_ADAPTER_NAME], int n_adapters);
/* One model object; parent (NULL: none) is the base model of a LoRA adapter (vLLM's "parent"). */
char *fr_api_model_object(const char *model, const char *parent, long long created);

#endif
