/* config.c — `frugal serve` settings: defaults, JSON config file (read by base/conf.h, the
 * binary's one configuration loader), command line, API keys. See config.h for precedence and
 * formats, docs/SERVING.md for every key. */
#include "serve/config.h"

#include "backend/backend.h"
#include "base/conf.h"
#include "base/flags.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS_FILE (4u << 20)
#define MAX_KEYS 4096

const char *const fr_serve_usage =
    "usage: frugal serve --model PATH [options]\n"
    "  --model PATH             HF model folder or .gguf file\n"
    "  --host ADDR              bind address (default 127.0.0.1)\n"
    "  --port N                 port (default 8080; 0 = any free port, printed at start)\n"
    "  --config FILE            JSON settings (see docs/SERVING.md); options below override it\n"
    "  --quant q8|q4            weight-only quantisation on load\n"
    "  --chat-template NAME     built-in template (chatml, llama3) or a template file\n"
    "  --api-keys FILE          Bearer keys, one per line: KEY [DEFAULT_TIER [HIGHEST_TIER]]\n"
    "                           (also FRUGAL_API_KEYS=KEY[:TIER],...)\n"
    "  --served-model-name NAME model id reported by the API (default: the model's name)\n"
    "  --lora NAME=PATH         a PEFT LoRA adapter (folder), served as model NAME; repeatable\n"
    "                           (config \"lora\")\n"
    "  --lora-runtime-updates   serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter\n"
    "  --asr-model PATH         Whisper weights (HF folder or whisper.cpp .bin) for the audio\n"
    "                           endpoints (default: the embedded pocketsphinx, English)\n"
    "  --asr-device cpu|cuda[:N] where Whisper runs (default: the decoder's device; cuda\n"
    "                           needs frugal-cuda)\n"
    "  --no-vad                 decode whole recordings (default: only the speech Silero VAD\n"
    "                           finds, when models/vad is installed; config \"vad\")\n"
    "  --kv-memory-mb N         KV cache budget in MiB (default 512; CPU)\n"
    "  --device cpu|cuda[:N]    where the decoder runs (default cpu; cuda needs make cuda)\n"
    "  --weights TYPE           CUDA: bf16 (default), int8, int4; CPU: q8 or q4 (as --quant)\n"
    "  --kv-cache bf16|int8     KV cache element type (int8: CUDA only)\n"
    "  --kv-fraction F          CUDA: share of free device memory for the KV pool (0.9)\n"
    "  --no-prefix-cache        compute every prompt in full (default: prompts share the KV\n"
    "                           blocks of prefixes computed before; config \"prefix_cache\")\n"
    "  --meter on|off           energy and cost per request (default on)\n"
    "  --meter-config FILE      meter settings, JSON (docs/METERING.md); applied over the\n"
    "                           config file's \"metering\" section\n"
    "  --ledger PATH            SQLite ledger, one row per request (default: the meter\n"
    "                           config's ledger.path, else one file per server,\n"
    "                           $XDG_STATE_HOME/frugal/ledger-MODEL-PORT.db, XDG_STATE_HOME\n"
    "                           defaulting to ~/.local/state; \"\" = none)\n";

const char *const fr_serve_env_usage =
    "environment:\n"
    "  FRUGAL_DATA_DIR          data root: models/ (intent model, reply templates, speech LM),\n"
    "                           data/, dashboards/ (default: <prefix>/share/frugal beside\n"
    "                           <prefix>/bin/frugal, or the source tree of a build/ binary)\n"
    "  FRUGAL_ASSIST_CONFIG     JSON settings of /v1/assist (docs/ASSIST.md): limits, OCR and\n"
    "                           ASR time limits, the OCR pixel budget\n"
    "  FRUGAL_API_KEYS          KEY[:TIER],... (as --api-keys)\n"
    "  FRUGAL_ASR_LM            speech LM file (default <data root>/models/asr/banking.lm.bin)\n"
    "  FRUGAL_NO_VAD            1: no voice-activity detection in front of ASR (as --no-vad)\n"
    "  FRUGAL_OCR_ENGINE        ppocr|tesseract|auto when the config has no ocr.engine (auto:\n"
    "                           ppocr when models/ppocr is installed, else tesseract)\n"
    "  FRUGAL_OCR_LANG          tesseract languages (default eng); TESSDATA_PREFIX their folder\n"
    "  FRUGAL_LOG               debug|info|warn|error\n"
    "  OMP_THREAD_LIMIT=1       one core per OCR engine (throughput under load)\n";

void fr_serve_config_init(fr_serve_config *c) {
    memset(c, 0, sizeof *c);
    c->host = fr_xstrdup("127.0.0.1");
    c->port = 8080;
    c->engine = fr_engine_config_default();
    const double ttft[FR_N_TIERS] = {0.2, 1.0, 10.0}, tpot[FR_N_TIERS] = {0.05, 0.1, 0.5};
    for (int t = 0; t < FR_N_TIERS; t++) {
        c->ttft_slo_s[t] = ttft[t];
        c->tpot_slo_s[t] = tpot[t];
    }
    c->default_tier = FR_TIER_P1;
    c->max_body_bytes = 1u << 20;
    c->max_messages = 256;
    c->vision.max_images = 8;
    c->vision.keep_ratio = 1.0f;
    c->vision.background_drop = true;
    c->vision.time_limit_s = 60;
    c->vision.encoder_cache_bytes = (size_t)256 << 20;
    c->vision.remote_timeout_s = 10;
    c->vision.remote_max_bytes = 20u * 1000u * 1000u;
    c->max_prompt_tokens = 0;
    c->max_tokens = 4096;
    c->default_max_tokens = 1024;
    c->max_connections = 256;
    for (int k = 0; k < 3; k++) c->reserved_connections[k] = -1;
    c->max_pending_connections = 4096;
    c->header_timeout_s = 5;
    c->max_header_bytes = 16384;
    c->idle_timeout_s = 30;
    c->body_timeout_s = 30;
    c->shutdown_grace_s = 10;
    c->meter = true;
    fr_meter_config_default(&c->metering);
}

void fr_serve_config_free(fr_serve_config *c) {
    for (int i = 0; i < c->n_lora; i++) free(c->lora[i]);
    free(c->model);
    free(c->served_name);
    free(c->asr_model);
    free(c->asr_device);
    free(c->host);
    free(c->quant);
    free(c->chat_template);
    free(c->api_keys_file);
    free(c->device);
    free(c->weights);
    free(c->kv_cache);
    free(c->meter_config);
    free(c->ledger);
    free(c->ledger_default);
    free(c->ocr.engine);
    free(c->ocr.ppocr_models);
    free(c->ocr.device);
    for (int i = 0; i < c->n_keys; i++) {
        /* wipe secrets before giving the memory back */
        volatile char *p = c->keys[i].key;
        for (size_t k = 0; k < c->keys[i].len; k++) p[k] = 0;
        free(c->keys[i].key);
    }
    free(c->keys);
    memset(c, 0, sizeof *c);
}

static void set_str(char **dst, const char *v) {
    free(*dst);
    *dst = v ? fr_xstrdup(v) : NULL;
}

/* Values of --device, --weights and --kv-cache (and their JSON keys). */
static int check_device_opt(const char *k, const char *v, fr_err *err) {
    if (!v) return 0;
    if (!strcmp(k, "device")) {
        fr_backend_kind kind;
        int idx;
        if (!fr_backend_parse_device(v, &kind, &idx, err)) return 0;
        if (err) err->code = FR_ERR_BAD_REQUEST; /* the backend's message, a bad value */
        return -1;
    }
    static const char *const w[] = {"bf16", "int8", "int4", "q8", "q4", "f32", NULL};
    static const char *const kv[] = {"bf16", "int8", "f32", NULL};
    const char *const *ok = !strcmp(k, "weights") ? w : !strcmp(k, "kv_cache") ? kv : NULL;
    if (!ok) return 0;
    for (int i = 0; ok[i]; i++)
        if (!strcmp(v, ok[i])) return 0;
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: unknown value '%s' (%s)", k, v,
               ok == w ? "bf16, int8, int4 on CUDA; q8, q4 on the CPU" : "bf16 or int8");
    return -1;
}

/* ---- JSON (base/conf.h: the binary's one configuration format) ---- */

/* Where a numeric key goes: an int, a size_t, a double (times `scale`) or a float. */
enum { V_INT, V_SIZE, V_DBL, V_FLT };
typedef struct num_key {
    const char *key; /* name inside its object */
    int kind;        /* V_* */
    bool integral;   /* must be an integer */
    double lo, hi;   /* inclusive range, in the file's unit */
    double scale;    /* stored value = file value * scale */
    size_t off;      /* offset in fr_serve_config */
} num_key;

#define SC(f) offsetof(fr_serve_config, f)
static const num_key top_nums[] = {
    {"port", V_INT, true, 0, 65535, 1, SC(port)},
    {"kv_fraction", V_FLT, false, 0.01, 1, 1, SC(engine.kv_fraction)},
    {"kv_memory_mb", V_SIZE, false, 0.001, 1 << 24, 1048576.0, SC(engine.kv_bytes)},
    {"kv_blocks", V_INT, true, 0, 1L << 28, 1, SC(engine.kv_blocks)},
    {"block_size", V_INT, true, 1, 1024, 1, SC(engine.block_size)},
    {"step_tokens", V_INT, true, 1, 65536, 1, SC(engine.step_tokens)},
    {"prefill_chunk", V_INT, true, 1, 65536, 1, SC(engine.prefill_chunk)},
    {"max_running", V_INT, true, 1, 4096, 1, SC(engine.max_running)},
    {"max_ctx", V_INT, true, 0, 1L << 24, 1, SC(engine.max_ctx)},
    {"aging_ms", V_DBL, false, 0, 1e9, 1e-3, SC(engine.aging_s)},
    {"shutdown_grace_s", V_DBL, false, 0, 86400, 1, SC(shutdown_grace_s)},
};
static const num_key limit_nums[] = {
    {"max_body_bytes", V_SIZE, true, 256, 1L << 30, 1, SC(max_body_bytes)},
    {"max_messages", V_INT, true, 1, 1000000, 1, SC(max_messages)},
    {"max_prompt_tokens", V_INT, true, 0, 1L << 24, 1, SC(max_prompt_tokens)},
    {"max_tokens", V_INT, true, 1, 1L << 24, 1, SC(max_tokens)},
    {"default_max_tokens", V_INT, true, 1, 1L << 24, 1, SC(default_max_tokens)},
    {"max_connections", V_INT, true, 1, 100000, 1, SC(max_connections)},
    {"max_pending_connections", V_INT, true, 1, 1000000, 1, SC(max_pending_connections)},
    {"header_timeout_s", V_DBL, false, 0.1, 3600, 1, SC(header_timeout_s)},
    {"max_header_bytes", V_INT, true, 1024, 60000, 1, SC(max_header_bytes)},
    {"idle_timeout_s", V_INT, true, 1, 86400, 1, SC(idle_timeout_s)},
    {"body_timeout_s", V_DBL, false, 0.1, 86400, 1, SC(body_timeout_s)},
};

static const num_key vision_nums[] = {
    {"max_images", V_INT, true, 1, 64, 1, SC(vision.max_images)},
    {"keep_ratio", V_FLT, false, 1e-6, 1, 1, SC(vision.keep_ratio)},
    {"max_image_tokens", V_INT, true, 0, 1L << 24, 1, SC(vision.max_image_tokens)},
    {"encoder_cache_mb", V_SIZE, false, 0, 1 << 20, 1048576.0, SC(vision.encoder_cache_bytes)},
    {"remote_timeout_s", V_DBL, false, 0.1, 600, 1, SC(vision.remote_timeout_s)},
    {"time_limit_s", V_DBL, false, 0.001, 3600, 1, SC(vision.time_limit_s)},
    {"remote_max_bytes", V_SIZE, true, 1024, 1L << 30, 1, SC(vision.remote_max_bytes)},
};

/* Sets the numeric key `it` if the table knows it: 1 done, 0 not in the table, -1 bad value. */
static int apply_num(fr_serve_config *c, const fr_conf_doc *d, const cJSON *it, const char *name,
                     const num_key *t, size_t n, fr_err *err) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].key, it->string)) continue;
        double v;
        long l;
        if (t[i].integral) {
            if (fr_conf_int(d, it, name, (long)t[i].lo, (long)t[i].hi, &l, err)) return -1;
            v = (double)l;
        } else if (fr_conf_num(d, it, name, t[i].lo, t[i].hi, &v, err)) {
            return -1;
        }
        v *= t[i].scale;
        char *f = (char *)c + t[i].off;
        switch (t[i].kind) {
        case V_INT: *(int *)(void *)f = (int)v; break;
        case V_SIZE: *(size_t *)(void *)f = (size_t)v; break;
        case V_DBL: *(double *)(void *)f = v; break;
        default: *(float *)(void *)f = (float)v; break;
        }
        return 1;
    }
    return 0;
}

static int apply_tier(fr_serve_config *c, const fr_conf_doc *d, int t, const cJSON *obj,
                      fr_err *err) {
    char oname[32];
    snprintf(oname, sizeof oname, "tiers.%s", fr_tier_name(t));
    if (fr_conf_object(d, obj, oname, err)) return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        double v;
        long l;
        char name[96];
        snprintf(name, sizeof name, "%s.%.60s", oname, k);
        if (!strcmp(k, "weight")) {
            if (fr_conf_num(d, it, name, 1e-6, 1e9, &v, err)) return -1;
            c->engine.weight[t] = v;
        } else if (!strcmp(k, "queue_max")) {
            if (fr_conf_int(d, it, name, 0, 1000000, &l, err)) return -1;
            c->engine.queue_max[t] = (int)l;
        } else if (!strcmp(k, "max_wait_ms") || !strcmp(k, "ttft_slo_ms") ||
                   !strcmp(k, "tpot_slo_ms")) {
            if (fr_conf_num(d, it, name, 0, 1e9, &v, err)) return -1;
            double *dst = k[0] == 'm' ? &c->engine.max_wait_s[t]
                          : k[1] == 't' ? &c->ttft_slo_s[t]
                                        : &c->tpot_slo_s[t];
            *dst = v / 1000;
        } else {
            return fr_conf_fail(d, it, name, err,
                                "unknown key (weight, queue_max, max_wait_ms, ttft_slo_ms, tpot_slo_ms)");
        }
    }
    return 0;
}

/* "reserved_connections": {"control": N, "P0": N, "P1": N} (any subset). */
static int apply_reserved(fr_serve_config *c, const fr_conf_doc *d, const cJSON *obj,
                          fr_err *err) {
    if (fr_conf_object(d, obj, "limits.reserved_connections", err)) return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        int slot = !strcmp(k, "control") ? 0 : !strcmp(k, "P0") ? 1 : !strcmp(k, "P1") ? 2 : -1;
        char name[96];
        snprintf(name, sizeof name, "limits.reserved_connections.%.40s", k);
        if (slot < 0) return fr_conf_fail(d, it, name, err, "unknown key (control, P0 or P1)");
        long l;
        if (fr_conf_int(d, it, name, 0, 100000, &l, err)) return -1;
        c->reserved_connections[slot] = (int)l;
    }
    return 0;
}

static int apply_limits(fr_serve_config *c, const fr_conf_doc *d, const cJSON *obj, fr_err *err) {
    if (fr_conf_object(d, obj, "limits", err)) return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char name[96];
        snprintf(name, sizeof name, "limits.%.60s", it->string);
        if (!strcmp(it->string, "reserved_connections")) {
            if (apply_reserved(c, d, it, err)) return -1;
            continue;
        }
        int r = apply_num(c, d, it, name, limit_nums, FR_ARRAY_LEN(limit_nums), err);
        if (r < 0) return -1;
        if (r == 0) return fr_conf_unknown(d, it, "limits.", err);
    }
    return 0;
}

static int apply_vision(fr_serve_config *c, const fr_conf_doc *d, const cJSON *obj, fr_err *err) {
    if (fr_conf_object(d, obj, "vision", err)) return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char name[96];
        snprintf(name, sizeof name, "vision.%.60s", it->string);
        if (!strcmp(it->string, "allow_remote_images")) {
            if (fr_conf_bool(d, it, name, &c->vision.allow_remote_images, err)) return -1;
            continue;
        }
        if (!strcmp(it->string, "background_drop")) {
            if (fr_conf_bool(d, it, name, &c->vision.background_drop, err)) return -1;
            continue;
        }
        int r = apply_num(c, d, it, name, vision_nums, FR_ARRAY_LEN(vision_nums), err);
        if (r < 0) return -1;
        if (r == 0) return fr_conf_unknown(d, it, "vision.", err);
    }
    return 0;
}

static int apply_ocr(fr_serve_config *c, const fr_conf_doc *d, const cJSON *obj, fr_err *err) {
    if (fr_conf_object(d, obj, "ocr", err)) return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char name[96];
        snprintf(name, sizeof name, "ocr.%.60s", it->string);
        const char *v;
        if (!strcmp(it->string, "engine")) {
            if (fr_conf_str(d, it, name, true, 64, &v, err)) return -1;
            if (v && strcmp(v, "auto") && strcmp(v, "ppocr") && strcmp(v, "tesseract"))
                return fr_conf_fail(d, it, name, err, "must be \"ppocr\", \"tesseract\" or \"auto\"");
            set_str(&c->ocr.engine, v);
        } else if (!strcmp(it->string, "ppocr_models")) {
            if (fr_conf_str(d, it, name, true, 4096, &v, err)) return -1;
            set_str(&c->ocr.ppocr_models, v);
        } else if (!strcmp(it->string, "device")) {
            if (fr_conf_str(d, it, name, true, 64, &v, err)) return -1;
            fr_backend_kind kind;
            int idx;
            fr_err de = {0};
            if (v && strcmp(v, "auto") && fr_backend_parse_device(v, &kind, &idx, &de))
                return fr_conf_fail(d, it, name, err, "must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
            set_str(&c->ocr.device, v && strcmp(v, "auto") ? v : NULL);
        } else {
            return fr_conf_unknown(d, it, "ocr.", err);
        }
    }
    return 0;
}

/* One "NAME=PATH" adapter more (the flag and the config list). false when the list is full. */
static bool add_lora(fr_serve_config *c, const char *spec) {
    if (c->n_lora >= FR_SERVE_MAX_LORA) return false;
    c->lora[c->n_lora++] = fr_xstrdup(spec);
    return true;
}

/* The config's "lora": a list of "NAME=PATH" strings (replacing what an earlier file set). */
static int lora_list(fr_serve_config *c, const fr_conf_doc *d, const cJSON *it, fr_err *err) {
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) > FR_SERVE_MAX_LORA)
        return fr_conf_fail(d, it, "lora", err, "must be a list of at most %d \"NAME=PATH\" strings",
                            FR_SERVE_MAX_LORA);
    for (int i = 0; i < c->n_lora; i++) free(c->lora[i]);
    c->n_lora = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        if (!cJSON_IsString(e) || !strchr(e->valuestring, '=') || strlen(e->valuestring) > 4096)
            return fr_conf_fail(d, e, "lora", err, "each entry must be a \"NAME=PATH\" string");
        add_lora(c, e->valuestring);
    }
    return 0;
}

/* String keys: where each goes and which values it takes. */
static char **str_dst(fr_serve_config *c, const char *k) {
    static const struct { const char *key; size_t off; } t[] = {
        {"model", SC(model)},           {"host", SC(host)},
        {"served_model_name", SC(served_name)}, {"chat_template", SC(chat_template)},
        {"api_keys_file", SC(api_keys_file)},   {"quant", SC(quant)},
        {"device", SC(device)},         {"weights", SC(weights)},
        {"kv_cache", SC(kv_cache)},     {"meter_config", SC(meter_config)},
        {"ledger", SC(ledger)},         {"asr_model", SC(asr_model)},
        {"asr_device", SC(asr_device)},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(t); i++)
        if (!strcmp(t[i].key, k)) return (char **)(void *)((char *)c + t[i].off);
    return NULL;
}

static int apply_key(fr_serve_config *c, const fr_conf_doc *d, const cJSON *it, fr_err *err) {
    const char *k = it->string;
    if (!strcmp(k, "lora")) return lora_list(c, d, it, err);
    char **dst = str_dst(c, k);
    if (dst) {
        const char *s;
        bool null_ok = strcmp(k, "host") != 0;
        if (fr_conf_str(d, it, k, null_ok, 4096, &s, err)) return -1;
        if (!strcmp(k, "quant") && s && strcmp(s, "q8") && strcmp(s, "q4"))
            return fr_conf_fail(d, it, k, err, "must be \"q8\" or \"q4\"");
        fr_err e;
        if (check_device_opt(k, s, &e)) return fr_conf_fail(d, it, k, err, "%s", e.msg);
        set_str(dst, s);
        return 0;
    }
    int r = apply_num(c, d, it, k, top_nums, FR_ARRAY_LEN(top_nums), err);
    if (r) return r < 0 ? -1 : 0;
    if (!strcmp(k, "meter")) return fr_conf_bool(d, it, k, &c->meter, err);
    if (!strcmp(k, "vad")) {
        bool on = true;
        if (fr_conf_bool(d, it, k, &on, err)) return -1;
        c->no_vad = !on;
        return 0;
    }
    if (!strcmp(k, "warmup")) return fr_conf_bool(d, it, k, &c->engine.warmup, err);
    if (!strcmp(k, "prefix_cache")) return fr_conf_bool(d, it, k, &c->engine.prefix_cache, err);
    if (!strcmp(k, "lora_runtime_updates"))
        return fr_conf_bool(d, it, k, &c->lora_runtime_updates, err);
    if (!strcmp(k, "metering")) return fr_meter_config_apply(&c->metering, d, it, "metering.", err);
    if (!strcmp(k, "limits")) return apply_limits(c, d, it, err);
    if (!strcmp(k, "vision")) return apply_vision(c, d, it, err);
    if (!strcmp(k, "ocr")) return apply_ocr(c, d, it, err);
    if (!strcmp(k, "default_tier")) {
        static const char *const tiers[] = {"P0", "P1", "P2", NULL};
        return fr_conf_enum(d, it, k, tiers, &c->default_tier, err);
    }
    if (!strcmp(k, "tiers")) {
        if (fr_conf_object(d, it, k, err)) return -1;
        const cJSON *tv;
        cJSON_ArrayForEach(tv, it) {
            int t = fr_tier_parse(tv->string);
            if (t < 0 || (tv->string[0] != 'P' && tv->string[0] != 'p'))
                return fr_conf_fail(d, tv, "tiers", err, "unknown tier \"%.40s\" (P0, P1, P2)",
                                    tv->string);
            if (apply_tier(c, d, t, tv, err)) return -1;
        }
        return 0;
    }
    return fr_conf_unknown(d, it, "", err);
}

int fr_serve_config_apply(fr_serve_config *c, const fr_conf_doc *d, fr_err *err) {
    const cJSON *it;
    cJSON_ArrayForEach(it, d->root) {
        if (apply_key(c, d, it, err)) return -1;
    }
    return 0;
}

int fr_serve_config_apply_json(fr_serve_config *c, const char *json, size_t len, fr_err *err) {
    fr_conf_doc d;
    if (fr_conf_parse(&d, json, len, NULL, err)) return -1;
    int rc = fr_serve_config_apply(c, &d, err);
    fr_conf_free(&d);
    return rc;
}

/* ---- command line (base/flags.h, its errors in err) ---- */

/* The options of `frugal serve` that take a value (the others are switches: --no-prefix-cache). */
static const char *const value_opts[] = {
    "--config", "--model", "--host", "--port", "--quant", "--chat-template", "--api-keys",
    "--served-model-name", "--kv-memory-mb", "--device", "--weights", "--kv-cache",
    "--kv-fraction", "--meter", "--meter-config", "--ledger", "--asr-model", "--asr-device",
};

/* The first walk: --help, and every --config FILE applied in order (so that the options override
 * the files); the other options' values are stepped over, their errors left to the second walk.
 * Returns 0, 1 (a bad file), 2 (--config without a value) or -1 (help printed). */
static int apply_config_files(fr_serve_config *c, int argc, char **argv, fr_err *err) {
    fr_flags f;
    fr_flags_init(&f, "serve", argc, argv);
    fr_flags_errors_to(&f, err);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) {
            fputs(fr_serve_usage, stdout);
            fputs(fr_serve_env_usage, stdout);
            printf("  (data root now: %s)\n", fr_data_dir());
            return -1;
        }
        const char *v = NULL;
        if (fr_flag_str(&f, "--config", &v)) {
            if (!v) break;
            fr_conf_doc d;
            if (fr_conf_load(&d, v, err)) return 1; /* messages name file:line */
            int rc = fr_serve_config_apply(c, &d, err);
            fr_conf_free(&d);
            if (rc) return 1;
            continue;
        }
        for (size_t k = 1; k < FR_ARRAY_LEN(value_opts); k++)
            if (fr_flag_str(&f, value_opts[k], &v)) break;
        if (f.rc) { /* another option's missing value: the second walk reports it */
            f.rc = 0;
            break;
        }
    }
    return f.rc;
}

/* A value of one of `names` (NULL-terminated): true, or false after filling err. */
static bool one_of_opt(const char *opt, const char *v, const char *const *names, fr_err *err) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) return true;
    fr_buf b = {0};
    for (int i = 0; names[i]; i++) fr_buf_printf(&b, "%s%s", i ? " or " : "", names[i]);
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s must be %s", opt, b.data);
    fr_buf_free(&b);
    return false;
}

/* One option of the second walk: true when the current argument was one (f->rc set, or err
 * filled and *rc = 2, on a bad value). */
static bool serve_option(fr_serve_config *c, fr_flags *f, int *rc, fr_err *err) {
    static const char *const quants[] = {"q8", "q4", NULL}, *const onoff[] = {"on", "off", NULL};
    static const struct { const char *opt; size_t off; } strs[] = {
        {"--model", SC(model)},         {"--host", SC(host)},
        {"--chat-template", SC(chat_template)}, {"--api-keys", SC(api_keys_file)},
        {"--served-model-name", SC(served_name)}, {"--meter-config", SC(meter_config)},
        {"--ledger", SC(ledger)},       {"--asr-model", SC(asr_model)},
        {"--asr-device", SC(asr_device)},
    };
    const char *v = NULL;
    int mb;
    bool on = false;
    if (fr_flag_switch(f, "--lora-runtime-updates", &on)) {
        c->lora_runtime_updates = true;
        return true;
    }
    if (fr_flag_switch(f, "--no-prefix-cache", &on)) {
        c->engine.prefix_cache = false;
        return true;
    }
    if (fr_flag_switch(f, "--no-vad", &on)) {
        c->no_vad = true;
        return true;
    }
    if (fr_flag_str(f, "--lora", &v)) {
        if (v && (!strchr(v, '=') || !add_lora(c, v))) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "--lora wants NAME=PATH (at most %d)",
                        FR_SERVE_MAX_LORA);
            *rc = 2;
        }
        return true;
    }
    if (fr_flag_str(f, "--config", &v) || fr_flag_int(f, "--port", 0, 65535, &c->port) ||
        fr_flag_float(f, "--kv-fraction", 0.01, 1, &c->engine.kv_fraction))
        return true;
    for (size_t k = 0; k < FR_ARRAY_LEN(strs); k++)
        if (fr_flag_str(f, strs[k].opt, &v)) {
            if (v) set_str((char **)(void *)((char *)c + strs[k].off), v);
            return true;
        }
    if (fr_flag_int(f, "--kv-memory-mb", 1, 1 << 24, &mb)) {
        if (!f->rc) {
            c->engine.kv_bytes = (size_t)mb << 20;
            c->engine.kv_blocks = 0;
        }
    } else if (fr_flag_str(f, "--quant", &v)) {
        if (v && !one_of_opt("--quant", v, quants, err)) *rc = 2;
        else if (v) set_str(&c->quant, v);
    } else if (fr_flag_str(f, "--meter", &v)) {
        if (v && !one_of_opt("--meter", v, onoff, err)) *rc = 2;
        else if (v) c->meter = !strcmp(v, "on");
    } else if (fr_flag_str(f, "--device", &v) || fr_flag_str(f, "--weights", &v) ||
               fr_flag_str(f, "--kv-cache", &v)) {
        const char *a = f->arg; /* "--device", "--weights", "--kv-cache" or "--NAME=value" */
        const char *k = a[2] == 'd' ? "device" : a[2] == 'w' ? "weights" : "kv_cache";
        if (v && check_device_opt(k, v, err)) *rc = 2;
        else if (v) set_str(a[2] == 'd' ? &c->device : a[2] == 'w' ? &c->weights : &c->kv_cache, v);
    } else {
        return false;
    }
    return true;
}

int fr_serve_config_from_args(fr_serve_config *c, int argc, char **argv, fr_err *err) {
    int rc = apply_config_files(c, argc, argv, err);
    if (rc) return rc;
    fr_flags f;
    fr_flags_init(&f, "serve", argc, argv);
    fr_flags_errors_to(&f, err);
    while (fr_flags_next(&f)) {
        if (!serve_option(c, &f, &rc, err)) return fr_flags_unknown(&f);
        if (rc) return rc;
    }
    if (f.rc) return f.rc;
    if (!c->model) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "--model PATH is required");
        return 2;
    }
    return 0;
}

/* ---- the public API's settings ---- */

void fr_serve_api_params(const fr_serve_config *c, frugal_model_params *mp,
                         frugal_context_params *cp) {
    *mp = frugal_model_default_params();
    *cp = frugal_context_default_params();
    mp->quant = c->quant;
    if (c->device) cp->device = c->device;
    cp->kv_fraction = c->engine.kv_fraction;
    bool cpu = !c->device || !strcmp(c->device, "cpu");
    const char *w = c->weights;
    bool w8 = w && (!strcmp(w, "int8") || !strcmp(w, "q8"));
    bool w4 = w && (!strcmp(w, "int4") || !strcmp(w, "q4"));
    if (cpu) {
        if (w8 || w4) mp->quant = w8 ? "q8" : "q4";
        cp->kv_cache = c->kv_cache && strcmp(c->kv_cache, "f32") ? c->kv_cache : NULL;
    } else {
        cp->weights = w8 ? "int8" : w4 ? "int4" : w && strcmp(w, "f32") ? w : NULL;
        cp->kv_cache = c->kv_cache;
    }
}

/* ---- keys ---- */

static int add_key(fr_serve_config *c, const char *k, size_t len, int def, int hi,
                   const char *what, int line, fr_err *err) {
    if (len < 1 || len > 512) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d: a key must be 1..512 characters", what, line);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)k[i] <= ' ' || (unsigned char)k[i] >= 127) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d: a key must be printable ASCII without spaces", what, line);
            return -1;
        }
    if (c->n_keys >= MAX_KEYS) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: more than %d keys", what, MAX_KEYS);
        return -1;
    }
    c->keys = fr_xrealloc(c->keys, (size_t)(c->n_keys + 1) * sizeof *c->keys);
    fr_api_key *ak = &c->keys[c->n_keys++];
    ak->key = fr_xstrndup(k, len);
    ak->len = len;
    ak->default_tier = def;
    ak->highest_tier = hi;
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    snprintf(ak->id, sizeof ak->id, "key-%08x", (unsigned)(h >> 32));
    return 0;
}

int fr_serve_keys_parse(fr_serve_config *c, const char *text, const char *what, bool env_style,
                        fr_err *err) {
    int line = 0;
    const char *p = text;
    while (*p) {
        line++;
        const char *end = env_style ? strchr(p, ',') : strchr(p, '\n');
        if (!end) end = p + strlen(p);
        /* fields of this entry */
        const char *f[3];
        size_t fl[3];
        int nf = 0;
        const char *q = p;
        while (q < end) {
            while (q < end && (isspace((unsigned char)*q) || (env_style && *q == ':'))) q++;
            if (q >= end || (!env_style && *q == '#')) break;
            const char *s = q;
            while (q < end && !isspace((unsigned char)*q) && !(env_style && *q == ':')) q++;
            if (nf < 3) {
                f[nf] = s;
                fl[nf] = (size_t)(q - s);
            }
            nf++;
        }
        if (nf > 3) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d: expected KEY [DEFAULT_TIER [HIGHEST_TIER]]", what, line);
            return -1;
        }
        if (nf > 0) {
            int tiers[2] = {c->default_tier, FR_TIER_P0}; /* default, highest */
            for (int i = 1; i < nf; i++) {
                char tb[8];
                snprintf(tb, sizeof tb, "%.*s", (int)FR_MIN(fl[i], 7), f[i]);
                tiers[i - 1] = fl[i] < 7 ? fr_tier_parse(tb) : -1;
                if (tiers[i - 1] < 0) {
                    fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d: tier must be P0, P1 or P2", what, line);
                    return -1;
                }
            }
            if (tiers[0] < tiers[1]) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d: the default tier is above the highest tier", what, line);
                return -1;
            }
            if (add_key(c, f[0], fl[0], tiers[0], tiers[1], what, line, err)) return -1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

int fr_serve_config_load_keys(fr_serve_config *c, const char *env_name, fr_err *err) {
    if (c->api_keys_file) {
        size_t len;
        char *text = fr_read_file(c->api_keys_file, MAX_KEYS_FILE, &len, err);
        if (!text) return -1;
        if (strlen(text) != len) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: contains a NUL byte", c->api_keys_file);
            free(text);
            return -1;
        }
        int rc = fr_serve_keys_parse(c, text, c->api_keys_file, false, err);
        volatile char *w = text;
        for (size_t i = 0; i < len; i++) w[i] = 0;
        free(text);
        if (rc) return -1;
        if (c->n_keys == 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: no keys (an empty key file would leave the server open)",
                       c->api_keys_file);
            return -1;
        }
    }
    const char *env = env_name ? getenv(env_name) : NULL;
    if (env && *env && fr_serve_keys_parse(c, env, env_name, true, err)) return -1;
    return 0;
}

bool fr_ct_equal(const char *given, size_t given_len, const char *key, size_t key_len) {
    volatile unsigned char d = (unsigned char)(given_len != key_len);
    for (size_t i = 0; i < key_len; i++) {
        unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
        d |= (unsigned char)(g ^ (unsigned char)key[i]);
    }
    return d == 0;
}

const fr_api_key *fr_serve_find_key(const fr_serve_config *c, const char *token, size_t len) {
    const fr_api_key *found = NULL;
    for (int i = 0; i < c->n_keys; i++) {
        bool eq = fr_ct_equal(token, len, c->keys[i].key, c->keys[i].len);
        if (eq && !found) found = &c->keys[i];
    }
    return found;
}
