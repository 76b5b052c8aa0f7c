/* config.c — the metering configuration: defaults, a "key = value" parser, a dump.
 *
 * Format (docs/METERING.md lists every key): one `key = value` per line; `[section]` lines prefix
 * the keys that follow ("[cost]" + "pue = 1.4" is "cost.pue"); `#` starts a comment at the start
 * of a line or after whitespace (not inside double quotes); a value may be double-quoted as a
 * whole (to keep a '#') and may not contain a quote otherwise. Two families of keys are open:
 * `slo.<tier> = seconds` and `ab.<arm> = weight [| options]`.
 *
 * The parser reads untrusted bytes (it is fuzzed): every line is bounded, every number must be a
 * finite decimal inside the key's range, and every string must fit its field, otherwise the whole
 * parse fails with "line N: …". A failed parse may leave `c` partly updated; callers parse into a
 * copy when that matters.
 */
#include "meter/meter.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Parse a whole string as a finite double. */
static int parse_num(const char *v, double *out) {
    if (!*v) return -1;
    for (const char *p = v; *p; p++) /* decimal only: no hex, inf, nan */
        if (!strchr("0123456789+-.eE", *p)) return -1;
    char *end;
    double d = strtod(v, &end);
    if (*end || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

static bool name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (!n || n >= max) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return false;
    return true;
}

static int set_slo(fr_meter_config *c, const char *tier, const char *v, fr_err *err) {
    double d;
    if (!name_ok(tier, sizeof c->slo[0].tier)) {
        fr_err_set(err, "bad tier name '%s'", tier);
        return -1;
    }
    if (parse_num(v, &d) || d <= 0 || d > 86400) {
        fr_err_set(err, "slo.%s: '%s' is not a latency in seconds (0, 86400]", tier, v);
        return -1;
    }
    int i = 0;
    while (i < c->n_slo && strcmp(c->slo[i].tier, tier)) i++;
    if (i == c->n_slo) {
        if (c->n_slo == FR_METER_MAX_TIERS) {
            fr_err_set(err, "more than %d SLO tiers", FR_METER_MAX_TIERS);
            return -1;
        }
        c->n_slo++;
        snprintf(c->slo[i].tier, sizeof c->slo[i].tier, "%s", tier);
    }
    c->slo[i].latency_s = d;
    return 0;
}

static int set_arm(fr_meter_config *c, const char *arm, const char *v, fr_err *err) {
    if (!name_ok(arm, sizeof c->arms[0].name)) {
        fr_err_set(err, "bad arm name '%s'", arm);
        return -1;
    }
    char w[64];
    const char *bar = strchr(v, '|');
    size_t wl = bar ? (size_t)(bar - v) : strlen(v);
    while (wl && isspace((unsigned char)v[wl - 1])) wl--;
    double d;
    if (wl >= sizeof w) wl = sizeof w - 1;
    memcpy(w, v, wl);
    w[wl] = 0;
    if (parse_num(w, &d) || d <= 0 || d > 1e6) {
        fr_err_set(err, "ab.%s: weight '%s' is not a number in (0, 1e6]", arm, w);
        return -1;
    }
    const char *opt = bar ? bar + 1 : "";
    while (isspace((unsigned char)*opt)) opt++;
    if (strlen(opt) >= sizeof c->arms[0].options) {
        fr_err_set(err, "ab.%s: options longer than %zu bytes", arm, sizeof c->arms[0].options - 1);
        return -1;
    }
    int i = 0;
    while (i < c->n_arms && strcmp(c->arms[i].name, arm)) i++;
    if (i == c->n_arms) {
        if (c->n_arms == FR_METER_MAX_ARMS) {
            fr_err_set(err, "more than %d A/B arms", FR_METER_MAX_ARMS);
            return -1;
        }
        c->n_arms++;
        snprintf(c->arms[i].name, sizeof c->arms[i].name, "%s", arm);
    }
    c->arms[i].weight = d;
    snprintf(c->arms[i].options, sizeof c->arms[i].options, "%s", opt);
    return 0;
}

int fr_meter_config_set(fr_meter_config *c, const char *key, const char *v, fr_err *err) {
    if (!strncmp(key, "slo.", 4)) return set_slo(c, key + 4, v, err);
    if (!strncmp(key, "ab.", 3)) return set_arm(c, key + 3, v, err);
    for (size_t i = 0; i < FR_ARRAY_LEN(keys); i++) {
        const key_def *k = &keys[i];
        if (strcmp(k->key, key)) continue;
        char *f = (char *)c + k->off;
        double d;
        switch (k->type) {
        case T_NUM:
        case T_INT:
            if (parse_num(v, &d) || d < k->lo || d > k->hi) {
                fr_err_set(err, "%s: '%s' is not a number in [%g, %g]", key, v, k->lo, k->hi);
                return -1;
            }
            if (k->type == T_INT) {
                if (d != floor(d)) {
                    fr_err_set(err, "%s: '%s' is not an integer", key, v);
                    return -1;
                }
                if (k->off == OFF(retention_rows)) *(long *)(void *)f = (long)d;
                else *(int *)(void *)f = (int)d;
            } else {
                *(double *)(void *)f = d;
            }
            return 0;
        case T_BOOL:
            if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
                *(bool *)(void *)f = true;
            else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
                *(bool *)(void *)f = false;
            else {
                fr_err_set(err, "%s: '%s' is not on/off", key, v);
                return -1;
            }
            return 0;
        case T_STR:
            if (strlen(v) >= k->size) {
                fr_err_set(err, "%s: value longer than %zu bytes", key, k->size - 1);
                return -1;
            }
            memcpy(f, v, strlen(v) + 1);
            if (k->off == OFF(ledger_path)) c->ledger_path_set = true;
            return 0;
        case T_IDLE:
            if (!strcmp(v, "report")) c->idle_policy = FR_IDLE_REPORT;
            else if (!strcmp(v, "amortise") || !strcmp(v, "amortize")) c->idle_policy = FR_IDLE_AMORTISE;
            else {
                fr_err_set(err, "%s: '%s' is not report|amortise", key, v);
                return -1;
            }
            return 0;
        case T_CPUSRC:
            if (!strcmp(v, "auto")) c->cpu_source = 0;
            else if (!strcmp(v, "rapl")) c->cpu_source = 1;
            else if (!strcmp(v, "estimate")) c->cpu_source = 2;
            else {
                fr_err_set(err, "%s: '%s' is not auto|rapl|estimate", key, v);
                return -1;
            }
            return 0;
        case T_SYNC:
            if (!strcmp(v, "normal")) c->ledger_sync_full = false;
            else if (!strcmp(v, "full")) c->ledger_sync_full = true;
            else {
                fr_err_set(err, "%s: '%s' is not normal|full", key, v);
                return -1;
            }
            return 0;
        }
    }
    fr_err_set(err, "unknown key '%s'", key);
    return -1;
}

static void trim(char **b, char **e) {
    while (*b < *e && isspace((unsigned char)**b)) (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

int fr_meter_config_parse(fr_meter_config *c, const char *text, size_t len, fr_err *err) {
    char section[64] = "";
    char line[4096], key[192];
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        lineno++;
        size_t e = pos;
        while (e < len && text[e] != '\n') e++;
        size_t n = e - pos;
        if (n >= sizeof line) {
            fr_err_set(err, "line %d: longer than %zu bytes", lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = e + 1;
        if (memchr(line, 0, n)) {
            fr_err_set(err, "line %d: NUL byte", lineno);
            return -1;
        }
        char *b = line, *en = line + n;
        /* comments: '#' at the start or after whitespace, outside quotes */
        bool inq = false;
        for (char *p = b; p < en; p++) {
            if (*p == '"') inq = !inq;
            else if (*p == '#' && !inq && (p == b || isspace((unsigned char)p[-1]))) {
                en = p;
                break;
            }
        }
        trim(&b, &en);
        if (b == en) continue;
        *en = 0;
        if (*b == '[') {
            if (en[-1] != ']' || en - b < 3 || (size_t)(en - b - 2) >= sizeof section) {
                fr_err_set(err, "line %d: bad section header", lineno);
                return -1;
            }
            memcpy(section, b + 1, (size_t)(en - b - 2));
            section[en - b - 2] = 0;
            if (!name_ok(section, sizeof section)) {
                fr_err_set(err, "line %d: bad section name", lineno);
                return -1;
            }
            continue;
        }
        char *eq = strchr(b, '=');
        if (!eq) {
            fr_err_set(err, "line %d: expected key = value", lineno);
            return -1;
        }
        char *kb = b, *ke = eq, *vb = eq + 1, *ve = en;
        trim(&kb, &ke);
        trim(&vb, &ve);
        *ke = 0;
        *ve = 0;
        if (ve - vb >= 2 && *vb == '"' && ve[-1] == '"') {
            vb++;
            *--ve = 0;
        }
        if (strchr(vb, '"')) {
            fr_err_set(err, "line %d: a quote inside a value", lineno);
            return -1;
        }
        if (!name_ok(kb, 128)) {
            fr_err_set(err, "line %d: bad key", lineno);
            return -1;
        }
        if (section[0]) snprintf(key, sizeof key, "%s.%s", section, kb);
        else snprintf(key, sizeof key, "%s", kb);
        if (fr_meter_config_set(c, key, vb, err)) {
            fr_err_prefix(err, "line %d", lineno);
            return -1;
        }
    }
    if (c->cost.hw_residual_usd > c->cost.hw_purchase_usd) {
        fr_err_set(err, "cost.hw_residual_usd (%g) exceeds cost.hw_purchase_usd (%g)",
                   c->cost.hw_residual_usd, c->cost.hw_purchase_usd);
        return -1;
    }
    return 0;
}

int fr_meter_config_load(fr_meter_config *c, const char *path, fr_err *err) {
    size_t len;
    char *text = fr_read_file(path, 1 << 20, &len, err);
    if (!text) return -1;
    int rc = fr_meter_config_parse(c, text, len, err);
    free(text);
    if (rc) fr_err_prefix(err, "%s", path);
    return rc;
}

void fr_meter_config_dump(const fr_meter_config *c, fr_buf *o) {
    for (size_t i = 0; i < FR_ARRAY_LEN(keys); i++) {
        const key_def *k = &keys[i];
        const char *f = (const char *)c + k->off;
        fr_buf_printf(o, "%s = ", k->key);
        switch (k->type) {
        case T_NUM: fr_buf_printf(o, "%.17g", *(const double *)(const void *)f); break;
        case T_INT:
            if (k->off == OFF(retention_rows)) fr_buf_printf(o, "%ld", *(const long *)(const void *)f);
            else fr_buf_printf(o, "%d", *(const int *)(const void *)f);
            break;
        case T_BOOL: fr_buf_puts(o, *(const bool *)(const void *)f ? "on" : "off"); break;
        case T_STR: fr_buf_printf(o, "\"%s\"", f); break;
        case T_IDLE: fr_buf_puts(o, c->idle_policy == FR_IDLE_AMORTISE ? "amortise" : "report"); break;
        case T_CPUSRC: fr_buf_puts(o, c->cpu_source == 1 ? "rapl" : c->cpu_source == 2 ? "estimate" : "auto"); break;
        case T_SYNC: fr_buf_puts(o, c->ledger_sync_full ? "full" : "normal"); break;
        }
        fr_buf_puts(o, "\n");
    }
    for (int i = 0; i < c->n_slo; i++) fr_buf_printf(o, "slo.%s = %.17g\n", c->slo[i].tier, c->slo[i].latency_s);
    for (int i = 0; i < c->n_arms; i++)
        fr_buf_printf(o, "ab.%s = \"%.17g%s%s\"\n", c->arms[i].name, c->arms[i].weight,
                      c->arms[i].options[0] ? " | " : "", c->arms[i].options);
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
