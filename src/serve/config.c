/* config.c — `frugal serve` settings: defaults, JSON config file, command line, API keys.
 * See config.h for precedence and formats, docs/SERVING.md for every key. */
#include "serve/config.h"

#include "backend/backend.h"
#include "base/num.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_FILE (1u << 20)
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
    "  --kv-memory-mb N         KV cache budget in MiB (default 512; CPU)\n"
    "  --device cpu|cuda[:N]    where the decoder runs (default cpu; cuda needs make cuda)\n"
    "  --weights TYPE           CUDA: bf16 (default), int8, int4; CPU: q8 or q4 (as --quant)\n"
    "  --kv-cache bf16|int8     KV cache element type (int8: CUDA only)\n"
    "  --kv-fraction F          CUDA: share of free device memory for the KV pool (0.9)\n"
    "  --meter on|off           energy and cost per request (default on)\n"
    "  --meter-config FILE      meter settings, `key = value` (docs/METERING.md)\n"
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
}

void fr_serve_config_free(fr_serve_config *c) {
    free(c->model);
    free(c->served_name);
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
        return fr_backend_parse_device(v, &kind, &idx, err);
    }
    static const char *const w[] = {"bf16", "int8", "int4", "q8", "q4", "f32", NULL};
    static const char *const kv[] = {"bf16", "int8", "f32", NULL};
    const char *const *ok = !strcmp(k, "weights") ? w : !strcmp(k, "kv_cache") ? kv : NULL;
    if (!ok) return 0;
    for (int i = 0; ok[i]; i++)
        if (!strcmp(v, ok[i])) return 0;
    fr_err_set(err, "%s: unknown value '%s' (%s)", k, v,
               ok == w ? "bf16, int8, int4 on CUDA; q8, q4 on the CPU" : "bf16 or int8");
    return -1;
}

/* ---- JSON ---- */

static int get_num(const cJSON *it, const char *name, double lo, double hi, double *out,
                   fr_err *err) {
    if (!cJSON_IsNumber(it) || !(it->valuedouble >= lo && it->valuedouble <= hi)) {
        fr_err_set(err, "config: \"%s\" must be a number in %g..%g", name, lo, hi);
        return -1;
    }
    *out = it->valuedouble;
    return 0;
}

static int get_int(const cJSON *it, const char *name, long lo, long hi, long *out, fr_err *err) {
    double v;
    if (get_num(it, name, (double)lo, (double)hi, &v, err)) return -1;
    if (v != floor(v)) {
        fr_err_set(err, "config: \"%s\" must be an integer", name);
        return -1;
    }
    *out = (long)v;
    return 0;
}

static int get_tier(const cJSON *it, const char *name, int *out, fr_err *err) {
    int t = cJSON_IsString(it) ? fr_tier_parse(it->valuestring) : -1;
    if (t < 0) {
        fr_err_set(err, "config: \"%s\" must be \"P0\", \"P1\" or \"P2\"", name);
        return -1;
    }
    *out = t;
    return 0;
}

static int apply_tier(fr_serve_config *c, int t, const cJSON *obj, fr_err *err) {
    if (!cJSON_IsObject(obj)) {
        fr_err_set(err, "config: \"tiers.%s\" must be an object", fr_tier_name(t));
        return -1;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        double v;
        long l;
        char name[64];
        snprintf(name, sizeof name, "tiers.%s.%s", fr_tier_name(t), k);
        if (!strcmp(k, "weight")) {
            if (get_num(it, name, 1e-6, 1e9, &v, err)) return -1;
            c->engine.weight[t] = v;
        } else if (!strcmp(k, "queue_max")) {
            if (get_int(it, name, 0, 1000000, &l, err)) return -1;
            c->engine.queue_max[t] = (int)l;
        } else if (!strcmp(k, "max_wait_ms")) {
            if (get_num(it, name, 0, 1e9, &v, err)) return -1;
            c->engine.max_wait_s[t] = v / 1000;
        } else if (!strcmp(k, "ttft_slo_ms")) {
            if (get_num(it, name, 0, 1e9, &v, err)) return -1;
            c->ttft_slo_s[t] = v / 1000;
        } else if (!strcmp(k, "tpot_slo_ms")) {
            if (get_num(it, name, 0, 1e9, &v, err)) return -1;
            c->tpot_slo_s[t] = v / 1000;
        } else {
            fr_err_set(err, "config: unknown key \"%s\"", name);
            return -1;
        }
    }
    return 0;
}

/* "reserved_connections": {"control": N, "P0": N, "P1": N} (any subset). */
static int apply_reserved(fr_serve_config *c, const cJSON *obj, fr_err *err) {
    if (!cJSON_IsObject(obj)) {
        fr_err_set(err, "config: \"limits.reserved_connections\" must be an object");
        return -1;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        int slot = !strcmp(k, "control") ? 0 : !strcmp(k, "P0") ? 1 : !strcmp(k, "P1") ? 2 : -1;
        char name[80];
        snprintf(name, sizeof name, "limits.reserved_connections.%s", k);
        if (slot < 0) {
            fr_err_set(err, "config: unknown key \"%s\" (control, P0 or P1)", name);
            return -1;
        }
        long l;
        if (get_int(it, name, 0, 100000, &l, err)) return -1;
        c->reserved_connections[slot] = (int)l;
    }
    return 0;
}

static int apply_limits(fr_serve_config *c, const cJSON *obj, fr_err *err) {
    if (!cJSON_IsObject(obj)) {
        fr_err_set(err, "config: \"limits\" must be an object");
        return -1;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        const char *k = it->string;
        long l;
        double v;
        char name[64];
        snprintf(name, sizeof name, "limits.%s", k);
        if (!strcmp(k, "max_body_bytes")) {
            if (get_int(it, name, 256, 1L << 30, &l, err)) return -1;
            c->max_body_bytes = (size_t)l;
        } else if (!strcmp(k, "max_messages")) {
            if (get_int(it, name, 1, 1000000, &l, err)) return -1;
            c->max_messages = (int)l;
        } else if (!strcmp(k, "max_prompt_tokens")) {
            if (get_int(it, name, 0, 1L << 24, &l, err)) return -1;
            c->max_prompt_tokens = (int)l;
        } else if (!strcmp(k, "max_tokens")) {
            if (get_int(it, name, 1, 1L << 24, &l, err)) return -1;
            c->max_tokens = (int)l;
        } else if (!strcmp(k, "default_max_tokens")) {
            if (get_int(it, name, 1, 1L << 24, &l, err)) return -1;
            c->default_max_tokens = (int)l;
        } else if (!strcmp(k, "max_connections")) {
            if (get_int(it, name, 1, 100000, &l, err)) return -1;
            c->max_connections = (int)l;
        } else if (!strcmp(k, "reserved_connections")) {
            if (apply_reserved(c, it, err)) return -1;
        } else if (!strcmp(k, "max_pending_connections")) {
            if (get_int(it, name, 1, 1000000, &l, err)) return -1;
            c->max_pending_connections = (int)l;
        } else if (!strcmp(k, "header_timeout_s")) {
            if (get_num(it, name, 0.1, 3600, &v, err)) return -1;
            c->header_timeout_s = v;
        } else if (!strcmp(k, "max_header_bytes")) {
            if (get_int(it, name, 1024, 60000, &l, err)) return -1;
            c->max_header_bytes = (int)l;
        } else if (!strcmp(k, "idle_timeout_s")) {
            if (get_int(it, name, 1, 86400, &l, err)) return -1;
            c->idle_timeout_s = (int)l;
        } else if (!strcmp(k, "body_timeout_s")) {
            if (get_num(it, name, 0.1, 86400, &v, err)) return -1;
            c->body_timeout_s = v;
        } else {
            fr_err_set(err, "config: unknown key \"%s\"", name);
            return -1;
        }
    }
    return 0;
}

int fr_serve_config_apply_json(fr_serve_config *c, const char *json, size_t len, fr_err *err) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        fr_err_set(err, "config: expected one JSON object");
        cJSON_Delete(root);
        return -1;
    }
    int rc = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *k = it->string;
        double v;
        long l;
        fr_engine_config *e = &c->engine;
        if (!strcmp(k, "model") || !strcmp(k, "host") || !strcmp(k, "served_model_name") ||
            !strcmp(k, "chat_template") || !strcmp(k, "api_keys_file") || !strcmp(k, "quant")) {
            if (!cJSON_IsString(it) && !cJSON_IsNull(it)) {
                fr_err_set(err, "config: \"%s\" must be a string", k);
                goto out;
            }
            const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
            if (!strcmp(k, "quant") && s && strcmp(s, "q8") && strcmp(s, "q4")) {
                fr_err_set(err, "config: \"quant\" must be \"q8\" or \"q4\"");
                goto out;
            }
            char **dst = !strcmp(k, "model")               ? &c->model
                         : !strcmp(k, "host")              ? &c->host
                         : !strcmp(k, "served_model_name") ? &c->served_name
                         : !strcmp(k, "chat_template")     ? &c->chat_template
                         : !strcmp(k, "quant")             ? &c->quant
                                                           : &c->api_keys_file;
            if (dst == &c->host && !s) {
                fr_err_set(err, "config: \"host\" must be a string");
                goto out;
            }
            set_str(dst, s);
        } else if (!strcmp(k, "device") || !strcmp(k, "weights") || !strcmp(k, "kv_cache") ||
                   !strcmp(k, "meter_config") || !strcmp(k, "ledger")) {
            if (!cJSON_IsString(it) && !cJSON_IsNull(it)) {
                fr_err_set(err, "config: \"%s\" must be a string", k);
                goto out;
            }
            const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
            if (check_device_opt(k, s, err)) goto out;
            set_str(!strcmp(k, "device")         ? &c->device
                    : !strcmp(k, "weights")      ? &c->weights
                    : !strcmp(k, "kv_cache")     ? &c->kv_cache
                    : !strcmp(k, "meter_config") ? &c->meter_config
                                                 : &c->ledger,
                    s);
        } else if (!strcmp(k, "meter")) {
            if (!cJSON_IsBool(it)) {
                fr_err_set(err, "config: \"meter\" must be true or false");
                goto out;
            }
            c->meter = cJSON_IsTrue(it);
        } else if (!strcmp(k, "kv_fraction")) {
            if (get_num(it, k, 0.01, 1, &v, err)) goto out;
            c->engine.kv_fraction = (float)v;
        } else if (!strcmp(k, "port")) {
            if (get_int(it, k, 0, 65535, &l, err)) goto out;
            c->port = (int)l;
        } else if (!strcmp(k, "kv_memory_mb")) {
            if (get_num(it, k, 0.001, 1 << 24, &v, err)) goto out;
            e->kv_bytes = (size_t)(v * 1048576.0);
        } else if (!strcmp(k, "kv_blocks")) {
            if (get_int(it, k, 0, 1L << 28, &l, err)) goto out;
            e->kv_blocks = (int)l;
        } else if (!strcmp(k, "block_size")) {
            if (get_int(it, k, 1, 1024, &l, err)) goto out;
            e->block_size = (int)l;
        } else if (!strcmp(k, "step_tokens")) {
            if (get_int(it, k, 1, 65536, &l, err)) goto out;
            e->step_tokens = (int)l;
        } else if (!strcmp(k, "prefill_chunk")) {
            if (get_int(it, k, 1, 65536, &l, err)) goto out;
            e->prefill_chunk = (int)l;
        } else if (!strcmp(k, "max_running")) {
            if (get_int(it, k, 1, 4096, &l, err)) goto out;
            e->max_running = (int)l;
        } else if (!strcmp(k, "max_ctx")) {
            if (get_int(it, k, 0, 1L << 24, &l, err)) goto out;
            e->max_ctx = (int)l;
        } else if (!strcmp(k, "aging_ms")) {
            if (get_num(it, k, 0, 1e9, &v, err)) goto out;
            e->aging_s = v / 1000;
        } else if (!strcmp(k, "warmup")) {
            if (!cJSON_IsBool(it)) {
                fr_err_set(err, "config: \"warmup\" must be true or false");
                goto out;
            }
            e->warmup = cJSON_IsTrue(it);
        } else if (!strcmp(k, "default_tier")) {
            if (get_tier(it, k, &c->default_tier, err)) goto out;
        } else if (!strcmp(k, "shutdown_grace_s")) {
            if (get_num(it, k, 0, 86400, &v, err)) goto out;
            c->shutdown_grace_s = v;
        } else if (!strcmp(k, "tiers")) {
            if (!cJSON_IsObject(it)) {
                fr_err_set(err, "config: \"tiers\" must be an object");
                goto out;
            }
            const cJSON *tv;
            cJSON_ArrayForEach(tv, it) {
                int t = fr_tier_parse(tv->string);
                if (t < 0 || (tv->string[0] != 'P' && tv->string[0] != 'p')) {
                    fr_err_set(err, "config: unknown tier \"tiers.%s\" (P0, P1, P2)", tv->string);
                    goto out;
                }
                if (apply_tier(c, t, tv, err)) goto out;
            }
        } else if (!strcmp(k, "limits")) {
            if (apply_limits(c, it, err)) goto out;
        } else {
            fr_err_set(err, "config: unknown key \"%s\"", k);
            goto out;
        }
    }
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* ---- command line ---- */


int fr_serve_config_from_args(fr_serve_config *c, int argc, char **argv, fr_err *err) {
    /* --config first, so the other options override the file */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(fr_serve_usage, stdout);
            fputs(fr_serve_env_usage, stdout);
            printf("  (data root now: %s)\n", fr_data_dir());
            return -1;
        }
        if (strcmp(argv[i], "--config")) continue;
        if (i + 1 >= argc) {
            fr_err_set(err, "--config needs a file");
            return 2;
        }
        size_t len = 0;
        char *text = fr_read_file(argv[i + 1], MAX_CONFIG_FILE, &len, err);
        if (!text) return 1;
        int rc = fr_serve_config_apply_json(c, text, len, err);
        free(text);
        if (rc) {
            fr_err_prefix(err, "%s", argv[i + 1]);
            return 1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        if (a[0] != '-' || a[1] != '-') {
            fr_err_set(err, "unexpected argument '%s'", a);
            return 2;
        }
        if (!v) {
            fr_err_set(err, "option %s needs a value", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--config")) {
            continue;
        } else if (!strcmp(a, "--model")) {
            set_str(&c->model, v);
        } else if (!strcmp(a, "--host")) {
            set_str(&c->host, v);
        } else if (!strcmp(a, "--port")) {
            if (!fr_parse_long(v, 0, 65535, &l)) {
                fr_err_set(err, "--port must be an integer in 0..65535");
                return 2;
            }
            c->port = (int)l;
        } else if (!strcmp(a, "--quant")) {
            if (strcmp(v, "q8") && strcmp(v, "q4")) {
                fr_err_set(err, "--quant must be q8 or q4");
                return 2;
            }
            set_str(&c->quant, v);
        } else if (!strcmp(a, "--chat-template")) {
            set_str(&c->chat_template, v);
        } else if (!strcmp(a, "--api-keys")) {
            set_str(&c->api_keys_file, v);
        } else if (!strcmp(a, "--served-model-name")) {
            set_str(&c->served_name, v);
        } else if (!strcmp(a, "--kv-memory-mb")) {
            if (!fr_parse_long(v, 1, 1L << 24, &l)) {
                fr_err_set(err, "--kv-memory-mb must be a positive integer");
                return 2;
            }
            c->engine.kv_bytes = (size_t)l << 20;
            c->engine.kv_blocks = 0;
        } else if (!strcmp(a, "--device") || !strcmp(a, "--weights") ||
                   !strcmp(a, "--kv-cache")) {
            const char *k = a[2] == 'd' ? "device" : a[2] == 'w' ? "weights" : "kv_cache";
            if (check_device_opt(k, v, err)) return 2;
            set_str(a[2] == 'd' ? &c->device : a[2] == 'w' ? &c->weights : &c->kv_cache, v);
        } else if (!strcmp(a, "--kv-fraction")) {
            double f;
            if (!fr_parse_double(v, 0.01, 1, &f)) {
                fr_err_set(err, "--kv-fraction must be a number in 0.01..1");
                return 2;
            }
            c->engine.kv_fraction = (float)f;
        } else if (!strcmp(a, "--meter")) {
            if (strcmp(v, "on") && strcmp(v, "off")) {
                fr_err_set(err, "--meter must be on or off");
                return 2;
            }
            c->meter = !strcmp(v, "on");
        } else if (!strcmp(a, "--meter-config")) {
            set_str(&c->meter_config, v);
        } else if (!strcmp(a, "--ledger")) {
            set_str(&c->ledger, v);
        } else {
            fr_err_set(err, "unknown option '%s'", a);
            return 2;
        }
    }
    if (!c->model) {
        fr_err_set(err, "--model PATH is required");
        return 2;
    }
    return 0;
}

/* ---- keys ---- */

static int add_key(fr_serve_config *c, const char *k, size_t len, int def, int hi,
                   const char *what, int line, fr_err *err) {
    if (len < 1 || len > 512) {
        fr_err_set(err, "%s:%d: a key must be 1..512 characters", what, line);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)k[i] <= ' ' || (unsigned char)k[i] >= 127) {
            fr_err_set(err, "%s:%d: a key must be printable ASCII without spaces", what, line);
            return -1;
        }
    if (c->n_keys >= MAX_KEYS) {
        fr_err_set(err, "%s: more than %d keys", what, MAX_KEYS);
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
            fr_err_set(err, "%s:%d: expected KEY [DEFAULT_TIER [HIGHEST_TIER]]", what, line);
            return -1;
        }
        if (nf > 0) {
            int tiers[2] = {c->default_tier, FR_TIER_P0}; /* default, highest */
            for (int i = 1; i < nf; i++) {
                char tb[8];
                snprintf(tb, sizeof tb, "%.*s", (int)FR_MIN(fl[i], 7), f[i]);
                tiers[i - 1] = fl[i] < 7 ? fr_tier_parse(tb) : -1;
                if (tiers[i - 1] < 0) {
                    fr_err_set(err, "%s:%d: tier must be P0, P1 or P2", what, line);
                    return -1;
                }
            }
            if (tiers[0] < tiers[1]) {
                fr_err_set(err, "%s:%d: the default tier is above the highest tier", what, line);
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
            fr_err_set(err, "%s: contains a NUL byte", c->api_keys_file);
            free(text);
            return -1;
        }
        int rc = fr_serve_keys_parse(c, text, c->api_keys_file, false, err);
        volatile char *w = text;
        for (size_t i = 0; i < len; i++) w[i] = 0;
        free(text);
        if (rc) return -1;
        if (c->n_keys == 0) {
            fr_err_set(err, "%s: no keys (an empty key file would leave the server open)",
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
