/* config.h — settings of `frugal serve`: defaults, the JSON config file, command-line options and
 * API keys (file and environment).
 *
 * Precedence: defaults < config file (--config) < command-line options. The config file is one
 * JSON object read by base/conf.h (the binary's one configuration format); unknown keys are an
 * error naming file:line (a typo must not silently keep a default). Its "metering" section holds
 * the meter's settings (docs/METERING.md). Every key is listed in docs/SERVING.md.
 *
 * API keys come from a file (one key per line: `KEY [DEFAULT_TIER [HIGHEST_TIER]]`, '#' starts a
 * comment) and/or the FRUGAL_API_KEYS environment variable (comma-separated `KEY[:TIER]`). Keys
 * are never printed: messages name the file and line only. Matching is constant-time.
 */
#ifndef FRUGAL_SERVE_CONFIG_H
#define FRUGAL_SERVE_CONFIG_H

#include "frugal.h"
#include "base/base.h"
#include "engine/engine.h"
#include "meter/meter.h"

typedef struct fr_api_key {
    char *key;         /* the secret */
    size_t len;        /* its length */
    int default_tier;  /* tier of requests that do not ask for one */
    int highest_tier;  /* the best tier this key may ask for (requests above are lowered to it) */
    char id[24];       /* "key-" + 8 hex digits of a hash of the key: what the ledger records
                          (32 bits of a 64-bit FNV-1a: names the key, cannot give it back) */
} fr_api_key;

/* Images for a vision-language model (config section "vision"; docs/SERVING.md). */
typedef struct fr_serve_vision {
    int max_images;              /* images per request (8) */
    float keep_ratio;            /* share of each image's tokens kept by pruning, (0, 1] (1) */
    int max_image_tokens;        /* image tokens a request keeps at most (0 = no budget) */
    size_t encoder_cache_bytes;  /* encoder cache budget (256 MiB); 0 = no cache */
    bool allow_remote_images;    /* fetch http(s) image URLs (default off: refused) */
    bool background_drop;        /* drop document background units before the tower (on) */
    double time_limit_s;         /* a request's whole vision stage (60 s) */
    double remote_timeout_s;     /* a fetch's whole time (10 s) */
    size_t remote_max_bytes;     /* a fetched image's size (20 MB, the image stage's limit) */
} fr_serve_vision;

/* The OCR reader of images (config section "ocr"; docs/SERVING.md, docs/OCR.md). */
typedef struct fr_serve_ocr {
    char *engine;       /* "ppocr", "tesseract" or NULL / "auto": ppocr when its models are
                           present, else tesseract ($FRUGAL_OCR_ENGINE when unset) */
    char *ppocr_models; /* the PP-OCR models folder; NULL = models/ppocr of the data root */
    char *device;       /* where PP-OCR's networks run: "cpu", "cuda", "cuda:N", or NULL /
                           "auto": the engine's device */
} fr_serve_ocr;

#define FR_SERVE_MAX_LORA 64 /* adapters named at start */

typedef struct fr_serve_config {
    char *model;                    /* model path (required) */
    char *served_name;              /* model id in the API; NULL = the model's name */
    char *lora[FR_SERVE_MAX_LORA];  /* LoRA adapters loaded at start, "NAME=PATH" each (--lora,
                                       repeatable; the config's "lora": a list of such strings;
                                       serve/lora_reg.h) */
    int n_lora;
    bool lora_runtime_updates;      /* POST /v1/load_lora_adapter and /v1/unload_lora_adapter
                                       are served (--lora-runtime-updates; off: 403) */
    char *asr_model;                /* Whisper weights for the audio endpoints (an HF folder or a
                                       whisper.cpp .bin; --asr-model); NULL = the embedded
                                       pocketsphinx */
    char *asr_device;               /* where Whisper runs ("cpu", "cuda", "cuda:N"; asr_device,
                                       --asr-device); NULL = the decoder's device */
    char *host;                     /* bind address (127.0.0.1) */
    int port;                       /* 8080; 0 = any free port (printed at start) */
    char *quant;                    /* NULL, "q8" or "q4" */
    char *chat_template;            /* built-in template name or a file; NULL = the model's */
    fr_engine_config engine;        /* scheduler and KV settings */
    double ttft_slo_s[FR_N_TIERS];  /* time-to-first-token targets (reporting, loadgen) */
    double tpot_slo_s[FR_N_TIERS];  /* time-per-output-token targets */
    int default_tier;               /* tier without header, field or key default */
    /* limits */
    size_t max_body_bytes;          /* request body */
    int max_messages;               /* chat messages per request */
    int max_prompt_tokens;          /* prompt tokens (0 = the context length) */
    int max_tokens;                 /* most output tokens a request may ask for */
    int default_max_tokens;         /* output tokens when the request names none */
    int max_connections;            /* connections handed to the HTTP layer at once (slots);
                                       over the limit a new one gets 503 + Retry-After */
    int reserved_connections[3];    /* slots only this class or a better one may use: [0] the
                                       control endpoints (/health, /ready, /metrics), [1] P0,
                                       [2] P1; -1 = derived from max_connections (serve/guard.h) */
    int max_pending_connections;    /* accepted connections whose request head has not arrived
                                       yet; over it the oldest one gets 503 */
    double header_timeout_s;        /* the request head must arrive within this (408 after) */
    int max_header_bytes;           /* request line + header fields (431 over it) */
    int idle_timeout_s;             /* an idle or stalled connection is closed after this */
    double body_timeout_s;          /* the whole request body must arrive within this */
    double shutdown_grace_s;        /* SIGTERM: in-flight work may finish within this */
    /* auth */
    char *api_keys_file;            /* NULL = none */
    fr_api_key *keys;               /* loaded keys (file + environment) */
    int n_keys;
    /* device (backend/backend.h) */
    char *device;                   /* NULL/"cpu", "cuda", "cuda:N" */
    char *weights;                  /* CUDA: bf16, int8, int4; CPU: q8/int8, q4/int4 (= quant) */
    char *kv_cache;                 /* NULL/"bf16", "int8" (CUDA) */
    /* metering (meter/meter.h, docs/METERING.md) */
    bool meter;                     /* open a meter (default on) */
    bool no_vad;                    /* "vad": false / --no-vad: no VAD in front of ASR (the
                                       server sets FRUGAL_NO_VAD=1 for its speech stages) */
    fr_meter_config metering;       /* the config file's "metering" section over the defaults */
    char *meter_config;             /* meter settings file (JSON), applied over `metering`;
                                       NULL = none */
    char *ledger;                   /* SQLite ledger path (--ledger); NULL = the meter config's
                                       ledger.path, else ledger_default; "" = no ledger */
    char *ledger_default;           /* used when neither names one; NULL = none (the library's
                                       default); `frugal serve` sets one per server, see serve.c */
    fr_serve_vision vision;         /* images for a vision-language model */
    fr_serve_ocr ocr;               /* the OCR reader of images (assist and chat media parts) */
} fr_serve_config;

void fr_serve_config_init(fr_serve_config *c);
void fr_serve_config_free(fr_serve_config *c);

/* Applies a parsed config document (base/conf.h). -1 with err "<file>:<line>: <key>: …". */
struct fr_conf_doc;
int fr_serve_config_apply(fr_serve_config *c, const struct fr_conf_doc *d, fr_err *err);
/* The same from the text of a JSON config document ("line N: …" in messages). */
int fr_serve_config_apply_json(fr_serve_config *c, const char *json, size_t len, fr_err *err);
/* Parses `frugal serve` arguments (argv[0] is "serve"); --config is applied first, the other
 * options then override it. Returns 0, 1 (bad input, message in err), 2 (usage, message in
 * err) or -1 (--help printed). */
int fr_serve_config_from_args(fr_serve_config *c, int argc, char **argv, fr_err *err);
/* The public API's settings of c's model and device options (strings point into c):
 *   mp->quant   --quant; on the CPU also --weights q8|q4 (or int8|int4), the load-time
 *               quantisation (f32 and bf16 there mean the weights as stored);
 *   cp->device  --device; cp->weights on CUDA --weights, with q8|q4 read as int8|int4 and f32 as
 *               the default; cp->kv_cache --kv-cache (f32 on the CPU is its own cache, the
 *               default); cp->kv_fraction --kv-fraction.
 * fr_cmd_serve checks cp with frugal_context_params_check before the load and makes the device
 * with frugal_context_new after it, so the API's statuses and messages are the server's. */
void fr_serve_api_params(const fr_serve_config *c, frugal_model_params *mp,
                         frugal_context_params *cp);
/* Loads keys from c->api_keys_file and the environment variable `env_name` (may be NULL). */
int fr_serve_config_load_keys(fr_serve_config *c, const char *env_name, fr_err *err);
/* Parses key-file text (used by load_keys and tests). `what` names the source in messages. */
int fr_serve_keys_parse(fr_serve_config *c, const char *text, const char *what, bool env_style,
                        fr_err *err);

/* Constant-time equality of a presented token and a stored key (time depends only on the stored
 * key's length). */
bool fr_ct_equal(const char *given, size_t given_len, const char *key, size_t key_len);
/* The key matching `token` (every key is compared, in constant time each), or NULL. */
const fr_api_key *fr_serve_find_key(const fr_serve_config *c, const char *token, size_t len);

extern const char *const fr_serve_usage;
extern const char *const fr_serve_env_usage; /* the environment variables, after the usage */

#endif
