/* config.c — the metering configuration: defaults, the keys, the JSON sections that set them
 * (the binary's one configuration format, base/conf.h), a JSON dump.
 *
 * Format (docs/METERING.md lists every key): one JSON object whose members are the sections
 * "meter", "cost", "ledger", "trace", "audit" (objects of key: value), "slo" (tier: seconds) and
 * "ab" (arm: weight, or arm: {"weight": w, "options": "..."}). The same object is the "metering"
 * section of `frugal serve --config`. Numbers must be JSON numbers inside the key's range, on/off
 * keys JSON booleans, names and paths JSON strings that fit their field; anything else, and any
 * unknown key, fails the whole load with "<file>:<line>: <section.key>: …".
 *
 * The older `key = value` text (config_legacy.c) is still read for one release, with a warning;
 * ledgers written before keep their dump in that syntax and audit reads them silently.
 * A failed parse may leave `c` partly updated; callers parse into a copy when that matters.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf.h"
#include "meter/meter_int.h"

void fr_meter_config_default(fr_meter_config *c) {
    memset(c, 0, sizeof *c);
    c->sample_ms = 100;
    c->max_stale_ms = 1000;
    c->nvml = true;
    snprintf(c->nvml_lib, sizeof c->nvml_lib, "libnvidia-ml.so.1");
    snprintf(c->rapl_root, sizeof c->rapl_root, "/sys/class/powercap");
    c->cpu_source = 0;
    c->cpu_watts_per_core = 6.25; /* Xeon Platinum 8480+: 350 W TDP / 56 cores */
    c->gpu_max_watts = 1500;
    c->final_wait_ms = -1;
    c->idle_policy = FR_IDLE_REPORT;
    c->idle_window_s = 60;
    c->energy_flush_s = 10;
    c->cost.usd_per_kwh = 0.1241; /* EIA: US commercial average 2022, 12.41 c/kWh */
    c->cost.pue = 1.58;           /* Uptime Institute Global Data Center Survey 2023 */
    c->cost.hw_usd_per_hour = 0;
    c->cost.hw_purchase_usd = 0;
    c->cost.hw_depreciation_years = 5; /* IRS Pub. 946: computers are 5-year property */
    c->cost.hw_residual_usd = 0;
    /* One H100 GPU-hour: Amazon EC2 Capacity Blocks for ML, p5.48xlarge (8 x H100) at $39.33/h
     * in US East (N. Virginia), i.e. $4.916 per accelerator-hour (AWS's published rate card for
     * reservations, valid until 2025-01-01). */
    c->cost.gpu_usd_per_hour = 4.916;
    /* One vCPU-hour: Amazon EC2 On-Demand c5.large (2 vCPU), Linux, US East (N. Virginia),
     * $0.085/h, i.e. $0.0425 per vCPU-hour (AWS EC2 On-Demand price list). */
    c->cost.cpu_usd_per_hour = 0.0425;
    c->cost.gpus = 0; /* the GPUs the meter finds */
    c->cost.cpus = 0; /* the online CPUs at meter start */
    c->cost.labour_usd_per_month = 0;
    c->cost.host_share = 1;
    c->ledger_queue = 4096;
    c->ledger_sync_full = false;
    c->ledger_wait_ms = 5000;
    c->trace_queue = 1024;
    c->trace_batch = 64;
    c->trace_flush_ms = 1000;
    c->trace_timeout_ms = 2000;
    snprintf(c->service_name, sizeof c->service_name, "frugal");
    c->audit_ocr_density = 0.5;
    c->audit_target_pue = 1.2;
}

/* Value kinds: a number, an integer, on/off, a string, or one of a few names (the T_* below
 * T_STR; their names are in enum_names). */
enum { T_NUM, T_INT, T_BOOL, T_STR, T_IDLE, T_CPUSRC, T_SYNC };

typedef struct key_def {
    const char *key; /* full dotted key */
    int type;        /* T_* */
    size_t off;      /* offset in fr_meter_config */
    double lo, hi;   /* inclusive range for numbers */
    size_t size;     /* field size for strings */
} key_def;

#define OFF(f) offsetof(fr_meter_config, f)
#define STR(k, f) {k, T_STR, OFF(f), 0, 0, sizeof(((fr_meter_config *)0)->f)}
static const key_def keys[] = {
    {"meter.sample_ms", T_NUM, OFF(sample_ms), 0, 60000, 0},
    {"meter.max_stale_ms", T_NUM, OFF(max_stale_ms), 1, 600000, 0},
    {"meter.nvml", T_BOOL, OFF(nvml), 0, 0, 0},
    STR("meter.nvml_lib", nvml_lib),
    STR("meter.rapl_root", rapl_root),
    {"meter.cpu_source", T_CPUSRC, OFF(cpu_source), 0, 0, 0},
    {"meter.cpu_watts_per_core", T_NUM, OFF(cpu_watts_per_core), 0, 1000, 0},
    {"meter.gpu_max_watts", T_NUM, OFF(gpu_max_watts), 1, 100000, 0},
    {"meter.final_wait_ms", T_NUM, OFF(final_wait_ms), -1, 60000, 0},
    {"meter.idle_policy", T_IDLE, OFF(idle_policy), 0, 0, 0},
    {"meter.idle_window_s", T_NUM, OFF(idle_window_s), 1, 86400, 0},
    {"meter.energy_flush_s", T_NUM, OFF(energy_flush_s), 0.01, 86400, 0},
    {"cost.usd_per_kwh", T_NUM, OFF(cost.usd_per_kwh), 0, 100, 0},
    {"cost.pue", T_NUM, OFF(cost.pue), 1, 10, 0},
    {"cost.hw_usd_per_hour", T_NUM, OFF(cost.hw_usd_per_hour), 0, 1e6, 0},
    {"cost.hw_purchase_usd", T_NUM, OFF(cost.hw_purchase_usd), 0, 1e10, 0},
    {"cost.hw_depreciation_years", T_NUM, OFF(cost.hw_depreciation_years), 0.01, 100, 0},
    {"cost.hw_residual_usd", T_NUM, OFF(cost.hw_residual_usd), 0, 1e10, 0},
    {"cost.gpu_usd_per_hour", T_NUM, OFF(cost.gpu_usd_per_hour), 0, 1e5, 0},
    {"cost.cpu_usd_per_hour", T_NUM, OFF(cost.cpu_usd_per_hour), 0, 1e4, 0},
    {"cost.gpus", T_NUM, OFF(cost.gpus), 0, 4096, 0},
    {"cost.cpus", T_NUM, OFF(cost.cpus), 0, 1 << 20, 0},
    {"cost.labour_usd_per_month", T_NUM, OFF(cost.labour_usd_per_month), 0, 1e9, 0},
    {"cost.host_share", T_NUM, OFF(cost.host_share), 1e-6, 1, 0},
    STR("ledger.path", ledger_path),
    {"ledger.queue", T_INT, OFF(ledger_queue), 1, 1 << 22, 0},
    {"ledger.synchronous", T_SYNC, OFF(ledger_sync_full), 0, 0, 0},
    {"ledger.commit_wait_ms", T_NUM, OFF(ledger_wait_ms), 1, 600000, 0},
    {"ledger.retention_days", T_NUM, OFF(retention_days), 0, 1e5, 0},
    {"ledger.retention_rows", T_INT, OFF(retention_rows), 0, 1e12, 0},
    STR("trace.otlp_url", otlp_url),
    STR("trace.file", trace_file),
    {"trace.queue", T_INT, OFF(trace_queue), 1, 1 << 20, 0},
    {"trace.batch", T_INT, OFF(trace_batch), 1, 4096, 0},
    {"trace.flush_ms", T_NUM, OFF(trace_flush_ms), 1, 3600000, 0},
    {"trace.timeout_ms", T_NUM, OFF(trace_timeout_ms), 1, 600000, 0},
    STR("trace.service_name", service_name),
    {"audit.ocr_density", T_NUM, OFF(audit_ocr_density), 0, 1e9, 0},
    {"audit.target_pue", T_NUM, OFF(audit_target_pue), 1, 10, 0},
};

static const char *const idle_names[] = {"report", "amortise", "amortize", NULL};
static const char *const cpusrc_names[] = {"auto", "rapl", "estimate", NULL};
static const char *const sync_names[] = {"normal", "full", NULL};

bool fr_meter_name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (!n || n >= max) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return false;
    return true;
}

int fr_meter_slo_put(fr_meter_config *c, const char *tier, double d, fr_err *err) {
    if (!fr_meter_name_ok(tier, sizeof c->slo[0].tier)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "bad tier name '%s'", tier);
        return -1;
    }
    if (!(d > 0 && d <= 86400)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "slo.%s: %g is not a latency in seconds (0, 86400]", tier, d);
        return -1;
    }
    int i = 0;
    while (i < c->n_slo && strcmp(c->slo[i].tier, tier)) i++;
    if (i == c->n_slo) {
        if (c->n_slo == FR_METER_MAX_TIERS) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "more than %d SLO tiers", FR_METER_MAX_TIERS);
            return -1;
        }
        c->n_slo++;
        snprintf(c->slo[i].tier, sizeof c->slo[i].tier, "%s", tier);
    }
    c->slo[i].latency_s = d;
    return 0;
}

int fr_meter_arm_put(fr_meter_config *c, const char *arm, double w, const char *opt, fr_err *err) {
    if (!fr_meter_name_ok(arm, sizeof c->arms[0].name)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "bad arm name '%s'", arm);
        return -1;
    }
    if (!(w > 0 && w <= 1e6)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ab.%s: weight %g is not a number in (0, 1e6]", arm, w);
        return -1;
    }
    if (strlen(opt) >= sizeof c->arms[0].options) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ab.%s: options longer than %zu bytes", arm, sizeof c->arms[0].options - 1);
        return -1;
    }
    int i = 0;
    while (i < c->n_arms && strcmp(c->arms[i].name, arm)) i++;
    if (i == c->n_arms) {
        if (c->n_arms == FR_METER_MAX_ARMS) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "more than %d A/B arms", FR_METER_MAX_ARMS);
            return -1;
        }
        c->n_arms++;
        snprintf(c->arms[i].name, sizeof c->arms[i].name, "%s", arm);
    }
    c->arms[i].weight = w;
    snprintf(c->arms[i].options, sizeof c->arms[i].options, "%s", opt);
    return 0;
}

/* Stores an already checked value of key k. */
static void store_num(fr_meter_config *c, const key_def *k, double d) {
    char *f = (char *)c + k->off;
    if (k->type == T_INT && k->off == OFF(retention_rows)) *(long *)(void *)f = (long)d;
    else if (k->type == T_INT) *(int *)(void *)f = (int)d;
    else *(double *)(void *)f = d;
}

static void store_enum(fr_meter_config *c, const key_def *k, int v) {
    if (k->type == T_IDLE) c->idle_policy = v == 0 ? FR_IDLE_REPORT : FR_IDLE_AMORTISE;
    else if (k->type == T_CPUSRC) c->cpu_source = v;
    else c->ledger_sync_full = v == 1;
}

static const char *const *enum_names(int type) {
    return type == T_IDLE ? idle_names : type == T_CPUSRC ? cpusrc_names : sync_names;
}

static const key_def *find_key(const char *key) {
    for (size_t i = 0; i < FR_ARRAY_LEN(keys); i++)
        if (!strcmp(keys[i].key, key)) return &keys[i];
    return NULL;
}

static void store_str(fr_meter_config *c, const key_def *k, const char *v) {
    memcpy((char *)c + k->off, v, strlen(v) + 1);
    if (k->off == OFF(ledger_path)) c->ledger_path_set = true;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

/* `key` is the full dotted key ("cost.pue"); `name` is how messages show it (with the prefix of
 * the section's place in a larger file). */
static int apply_key(fr_meter_config *c, const fr_conf_doc *d, const cJSON *it, const char *key,
                     const char *name, fr_err *err) {
    const key_def *k = find_key(key);
    if (!k) return fr_conf_fail(d, it, name, err, "unknown key");
    double v;
    long l;
    bool b;
    int e;
    const char *s;
    switch (k->type) {
    case T_NUM:
        if (fr_conf_num(d, it, name, k->lo, k->hi, &v, err)) return -1;
        store_num(c, k, v);
        return 0;
    case T_INT:
        if (fr_conf_int(d, it, name, (long)k->lo, (long)k->hi, &l, err)) return -1;
        store_num(c, k, (double)l);
        return 0;
    case T_BOOL:
        if (fr_conf_bool(d, it, name, &b, err)) return -1;
        *(bool *)(void *)((char *)c + k->off) = b;
        return 0;
    case T_STR:
        if (fr_conf_str(d, it, name, false, k->size, &s, err)) return -1;
        store_str(c, k, s);
        return 0;
    default:
        if (fr_conf_enum(d, it, name, enum_names(k->type), &e, err)) return -1;
        store_enum(c, k, e);
        return 0;
    }
}

static int apply_slo(fr_meter_config *c, const fr_conf_doc *d, const cJSON *obj,
                     const char *prefix, fr_err *err) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char name[96];
        snprintf(name, sizeof name, "%.20sslo.%.60s", prefix, it->string);
        double v;
        if (fr_conf_num(d, it, name, 1e-9, 86400, &v, err)) return -1;
        fr_err e;
        if (fr_meter_slo_put(c, it->string, v, &e)) return fr_conf_fail(d, it, name, err, "%s", e.msg);
    }
    return 0;
}

/* "ab": {"arm": weight} or {"arm": {"weight": w, "options": "..."}} */
static int apply_ab(fr_meter_config *c, const fr_conf_doc *d, const cJSON *obj,
                    const char *prefix, fr_err *err) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char name[96];
        snprintf(name, sizeof name, "%.20sab.%.60s", prefix, it->string);
        double w = 0;
        const char *opt = "";
        if (cJSON_IsNumber(it)) {
            if (fr_conf_num(d, it, name, 1e-12, 1e6, &w, err)) return -1;
        } else if (cJSON_IsObject(it)) {
            bool has_w = false;
            const cJSON *m;
            cJSON_ArrayForEach(m, it) {
                char mn[160];
                snprintf(mn, sizeof mn, "%s.%.40s", name, m->string);
                if (!strcmp(m->string, "weight")) {
                    if (fr_conf_num(d, m, mn, 1e-12, 1e6, &w, err)) return -1;
                    has_w = true;
                } else if (!strcmp(m->string, "options")) {
                    if (fr_conf_str(d, m, mn, false, sizeof c->arms[0].options, &opt, err)) return -1;
                } else {
                    return fr_conf_fail(d, m, mn, err, "unknown key (weight, options)");
                }
            }
            if (!has_w) return fr_conf_fail(d, it, name, err, "needs a \"weight\"");
        } else {
            return fr_conf_fail(d, it, name, err, "must be a weight or {\"weight\": w, \"options\": \"...\"}");
        }
        fr_err e;
        if (fr_meter_arm_put(c, it->string, w, opt, &e)) return fr_conf_fail(d, it, name, err, "%s", e.msg);
    }
    return 0;
}

int fr_meter_config_check(const fr_meter_config *c, fr_err *err) {
    if (c->cost.hw_residual_usd > c->cost.hw_purchase_usd) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "cost.hw_residual_usd (%g) exceeds cost.hw_purchase_usd (%g)",
                   c->cost.hw_residual_usd, c->cost.hw_purchase_usd);
        return -1;
    }
    return 0;
}

int fr_meter_config_apply(fr_meter_config *c, const fr_conf_doc *d, const cJSON *obj,
                          const char *prefix, fr_err *err) {
    if (!prefix) prefix = "";
    if (fr_conf_object(d, obj, prefix[0] ? prefix : "metering", err)) return -1;
    const cJSON *sec;
    cJSON_ArrayForEach(sec, obj) {
        char sname[96];
        snprintf(sname, sizeof sname, "%s%.60s", prefix, sec->string);
        const char *s = sec->string;
        bool known = !strcmp(s, "slo") || !strcmp(s, "ab");
        for (size_t i = 0; !known && i < FR_ARRAY_LEN(keys); i++) {
            size_t n = strlen(s);
            known = !strncmp(keys[i].key, s, n) && keys[i].key[n] == '.';
        }
        if (!known)
            return fr_conf_fail(d, sec, sname, err,
                                "unknown section (meter, cost, ledger, trace, audit, slo, ab)");
        if (fr_conf_object(d, sec, sname, err)) return -1;
        if (!strcmp(s, "slo")) {
            if (apply_slo(c, d, sec, prefix, err)) return -1;
            continue;
        }
        if (!strcmp(s, "ab")) {
            if (apply_ab(c, d, sec, prefix, err)) return -1;
            continue;
        }
        const cJSON *it;
        cJSON_ArrayForEach(it, sec) {
            char key[160];
            char shown[200];
            snprintf(key, sizeof key, "%s.%.100s", s, it->string);
            snprintf(shown, sizeof shown, "%.20s%s", prefix, key);
            if (apply_key(c, d, it, key, shown, err)) return -1;
        }
    }
    fr_err e;
    char cost[40];
    snprintf(cost, sizeof cost, "%.20scost", prefix);
    if (fr_meter_config_check(c, &e)) return fr_conf_fail(d, obj, cost, err, "%s", e.msg);
    return 0;
}

static bool looks_json(const char *text, size_t len) {
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i])) i++;
    return i < len && text[i] == '{';
}

static int parse_as(fr_meter_config *c, const char *text, size_t len, const char *what,
                    fr_err *err) {
    if (!looks_json(text, len)) return fr_meter_config_parse_legacy(c, text, len, err);
    fr_conf_doc d;
    if (fr_conf_parse(&d, text, len, what, err)) return -1;
    int rc = fr_meter_config_apply(c, &d, d.root, "", err);
    fr_conf_free(&d);
    return rc;
}

int fr_meter_config_parse(fr_meter_config *c, const char *text, size_t len, fr_err *err) {
    return parse_as(c, text, len, NULL, err);
}

int fr_meter_config_load(fr_meter_config *c, const char *path, fr_err *err) {
    size_t len;
    char *text = fr_read_file(path, FR_CONF_MAX_BYTES, &len, err);
    if (!text) return -1;
    bool legacy = !looks_json(text, len);
    int rc = parse_as(c, text, len, path, err);
    free(text);
    if (rc && legacy) fr_err_prefix(err, "%s", path);
    if (!rc && legacy)
        fr_warn("%s: the `key = value` meter syntax is deprecated and will be removed in the next "
                "release; write the same keys as JSON (docs/METERING.md)", path);
    return rc;
}

/* ---- the text setter (one key from a string: tests, the legacy syntax) ---------------------- */

/* Parse a whole string as a finite double. */
int fr_meter_parse_num(const char *v, double *out) {
    if (!*v) return -1;
    for (const char *p = v; *p; p++) /* decimal only: no hex, inf, nan */
        if (!strchr("0123456789+-.eE", *p)) return -1;
    char *end;
    double d = strtod(v, &end);
    if (*end || !isfinite(d)) return -1;
    *out = d;
    return 0;
}


int fr_meter_config_set(fr_meter_config *c, const char *key, const char *v, fr_err *err) {
    if (!strncmp(key, "slo.", 4)) {
        double d;
        if (fr_meter_parse_num(v, &d)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "slo.%s: '%s' is not a latency in seconds (0, 86400]", key + 4, v);
            return -1;
        }
        return fr_meter_slo_put(c, key + 4, d, err);
    }
    if (!strncmp(key, "ab.", 3)) { /* "weight [| options]" */
        char w[64];
        const char *bar = strchr(v, '|');
        size_t wl = bar ? (size_t)(bar - v) : strlen(v);
        while (wl && isspace((unsigned char)v[wl - 1])) wl--;
        if (wl >= sizeof w) wl = sizeof w - 1;
        memcpy(w, v, wl);
        w[wl] = 0;
        double d;
        if (fr_meter_parse_num(w, &d)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "ab.%s: weight '%s' is not a number in (0, 1e6]", key + 3, w);
            return -1;
        }
        const char *opt = bar ? bar + 1 : "";
        while (isspace((unsigned char)*opt)) opt++;
        return fr_meter_arm_put(c, key + 3, d, opt, err);
    }
    const key_def *k = find_key(key);
    if (!k) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "unknown key '%s'", key);
        return -1;
    }
    double d;
    switch (k->type) {
    case T_NUM:
    case T_INT:
        if (fr_meter_parse_num(v, &d) || d < k->lo || d > k->hi) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' is not a number in [%g, %g]", key, v, k->lo, k->hi);
            return -1;
        }
        if (k->type == T_INT && d != floor(d)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' is not an integer", key, v);
            return -1;
        }
        store_num(c, k, d);
        return 0;
    case T_BOOL:
        if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
            *(bool *)(void *)((char *)c + k->off) = true;
        else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
            *(bool *)(void *)((char *)c + k->off) = false;
        else {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' is not on/off", key, v);
            return -1;
        }
        return 0;
    case T_STR:
        if (strlen(v) >= k->size) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: value longer than %zu bytes", key, k->size - 1);
            return -1;
        }
        store_str(c, k, v);
        return 0;
    default: {
        const char *const *names = enum_names(k->type);
        for (int i = 0; names[i]; i++)
            if (!strcmp(v, names[i])) {
                store_enum(c, k, i);
                return 0;
            }
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: '%s' is not %s", key, v,
                   k->type == T_IDLE ? "report|amortise" : k->type == T_CPUSRC ? "auto|rapl|estimate" : "normal|full");
        return -1;
    }
    }
}

/* ---- dump ------------------------------------------------------------------------------------ */

static cJSON *section(cJSON *root, const char *name) {
    cJSON *s = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!s) {
        s = cJSON_CreateObject();
        cJSON_AddItemToObject(root, name, s);
    }
    return s;
}

void fr_meter_config_dump(const fr_meter_config *c, fr_buf *o) {
    cJSON *root = cJSON_CreateObject();
    if (!root) fr_panic(__FILE__, __LINE__, "cJSON: out of memory");
    for (size_t i = 0; i < FR_ARRAY_LEN(keys); i++) {
        const key_def *k = &keys[i];
        const char *f = (const char *)c + k->off, *dot = strchr(k->key, '.');
        char sec[32];
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - k->key), k->key);
        cJSON *s = section(root, sec), *v = NULL;
        switch (k->type) {
        case T_NUM: v = cJSON_CreateNumber(*(const double *)(const void *)f); break;
        case T_INT:
            v = cJSON_CreateNumber(k->off == OFF(retention_rows) ? (double)*(const long *)(const void *)f
                                                                 : (double)*(const int *)(const void *)f);
            break;
        case T_BOOL: v = cJSON_CreateBool(*(const bool *)(const void *)f); break;
        case T_STR: v = cJSON_CreateString(f); break;
        case T_IDLE: v = cJSON_CreateString(c->idle_policy == FR_IDLE_AMORTISE ? "amortise" : "report"); break;
        case T_CPUSRC: v = cJSON_CreateString(cpusrc_names[c->cpu_source >= 0 && c->cpu_source <= 2 ? c->cpu_source : 0]); break;
        case T_SYNC: v = cJSON_CreateString(c->ledger_sync_full ? "full" : "normal"); break;
        }
        cJSON_AddItemToObject(s, dot + 1, v);
    }
    cJSON *slo = section(root, "slo"), *ab = section(root, "ab");
    for (int i = 0; i < c->n_slo; i++) cJSON_AddNumberToObject(slo, c->slo[i].tier, c->slo[i].latency_s);
    for (int i = 0; i < c->n_arms; i++) {
        cJSON *arm = cJSON_CreateObject();
        cJSON_AddNumberToObject(arm, "weight", c->arms[i].weight);
        cJSON_AddStringToObject(arm, "options", c->arms[i].options);
        cJSON_AddItemToObject(ab, c->arms[i].name, arm);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) fr_panic(__FILE__, __LINE__, "cJSON: out of memory");
    fr_buf_puts(o, txt);
    fr_buf_puts(o, "\n");
    cJSON_free(txt);
}

/* ---- A/B assignment -------------------------------------------------------------------------- */

const fr_meter_arm *fr_meter_ab_assign(const fr_meter_config *c, const char *key) {
    if (c->n_arms == 0) return NULL;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)(key ? key : ""); *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    /* fold the high bits in (FNV's low bits mix poorly for short keys) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    double total = 0;
    for (int i = 0; i < c->n_arms; i++) total += c->arms[i].weight;
    double x = (double)(h >> 11) / 9007199254740992.0 * total; /* uniform in [0, total) */
    for (int i = 0; i < c->n_arms; i++) {
        if (x < c->arms[i].weight) return &c->arms[i];
        x -= c->arms[i].weight;
    }
    return &c->arms[c->n_arms - 1];
}
