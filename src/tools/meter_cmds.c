/* meter_cmds.c — the metering commands:
 *
 *   frugal audit --ledger PATH [--traces FILE] [--html FILE] [--png FILE] [--since T] [--until T]
 *                [--config FILE]
 *       the four-step cost audit: collection window, modality x stage heatmap of time / energy /
 *       $ shares, bottleneck, optimisation candidates ranked by estimated savings
 *   frugal audit --ab --ledger PATH [--arms A,B,...] [--since T] [--until T] [--config FILE]
 *       A/B comparison: $/1k requests, J/request, p50/p99 latency, SLO attainment, with 95 %
 *       confidence intervals, each arm against the first
 *   frugal roi --a LEDGER [--a-arm ARM] [--a-label L] [--a-config FILE]
 *              --b LEDGER [--b-arm ARM] [--b-label L] [--b-config FILE]
 *       the ROI table of two measured configurations (two ledgers, or two arms of one)
 *
 * T is unix seconds or YYYY-MM-DDTHH:MM:SSZ. --config replaces the cost model the ledger recorded.
 */
#include "tools/meter_cmds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/flags.h"
#include "base/num.h"
#include "meter/audit.h"

static int usage_error(const char *cmd, const char *msg) {
    fprintf(stderr, "frugal %s: %s (see `frugal %s --help`)\n", cmd, msg, cmd);
    return 2;
}

/* T of --since / --until: unix seconds or YYYY-MM-DDTHH:MM:SS[Z] (UTC). */
static bool parse_time(const char *s, double *out) {
    if (fr_parse_double(s, 0, 1e15, out)) return true;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p || (*p && strcmp(p, "Z"))) return false;
    *out = (double)timegm(&tm);
    return true;
}

/* A time flag (--since / --until) read into *out; true when the current argument is `name`. */
static bool flag_time(fr_flags *fl, const char *name, double *out) {
    const char *v = NULL;
    if (!fr_flag_str(fl, name, &v)) return false;
    if (v && !parse_time(v, out))
        fr_flags_fail(fl, "bad %s (unix seconds or YYYY-MM-DDTHH:MM:SSZ)", name);
    return true;
}

static const char *AUDIT_HELP =
    "usage: frugal audit --ledger PATH [options]\n"
    "  --ledger PATH     the SQLite ledger written by the meter (required)\n"
    "  --traces FILE     OTLP JSON-lines traces to match against the ledger\n"
    "  --html FILE       write an HTML report with the heatmap drawn\n"
    "  --png FILE        write the heatmap as a PNG\n"
    "  --since T         only requests that ended at or after T (unix seconds or ISO 8601 UTC)\n"
    "  --until T         only requests that ended at or before T\n"
    "  --config FILE     cost model / thresholds instead of those recorded in the ledger\n"
    "  --ab              compare A/B arms instead: $/1k, J/request, p50/p99, SLO, 95 % intervals\n"
    "  --arms A,B,...    arms to compare, the first is the baseline (default: all, control first)\n";

static int load_config(const char *cmd, const char *path, fr_meter_config *c) {
    fr_meter_config_default(c);
    fr_err err;
    if (fr_meter_config_load(c, path, &err)) {
        fprintf(stderr, "frugal %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

int fr_cmd_audit(int argc, char **argv) {
    const char *ledger = NULL, *traces = NULL, *html = NULL, *png = NULL, *config = NULL, *arms = NULL;
    double since = 0, until = 0;
    bool ab = false;
    fr_flags fl;
    fr_flags_init(&fl, "audit", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            fputs(AUDIT_HELP, stdout);
            return 0;
        }
        if (!(fr_flag_switch(&fl, "--ab", &ab) || fr_flag_str(&fl, "--ledger", &ledger) ||
              fr_flag_str(&fl, "--traces", &traces) || fr_flag_str(&fl, "--html", &html) ||
              fr_flag_str(&fl, "--png", &png) || fr_flag_str(&fl, "--config", &config) ||
              fr_flag_str(&fl, "--arms", &arms) || flag_time(&fl, "--since", &since) ||
              flag_time(&fl, "--until", &until)))
            return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    if (!ledger) return usage_error("audit", "--ledger PATH is required");
    if (arms && !ab) return usage_error("audit", "--arms needs --ab");
    fr_meter_config cfg;
    if (config && load_config("audit", config, &cfg)) return 1;
    fr_audit_opts o = {since, until, config ? &cfg : NULL};
    fr_audit a;
    fr_err err;
    if (fr_audit_load(&a, ledger, &o, &err)) {
        fprintf(stderr, "frugal audit: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (ab) {
        const char *names[FR_METER_MAX_ARMS];
        char buf[512];
        int n = 0;
        if (arms) {
            snprintf(buf, sizeof buf, "%s", arms);
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < FR_METER_MAX_ARMS;
                 t = strtok_r(NULL, ",", &save))
                names[n++] = t;
            if (n < 2) {
                fr_audit_free(&a);
                return usage_error("audit", "--arms needs at least two names");
            }
        }
        fr_ab_report r;
        if (fr_audit_ab(&a, arms ? names : NULL, n, &r, &err)) {
            fprintf(stderr, "frugal audit: %s\n", err.msg);
            rc = 1;
        } else {
            fr_audit_ab_print(&r, stdout);
        }
        fr_audit_free(&a);
        return rc;
    }
    if (traces && fr_audit_load_traces(&a, traces, &err)) {
        fprintf(stderr, "frugal audit: %s\n", err.msg);
        fr_audit_free(&a);
        return 1;
    }
    fr_audit_report *r = fr_xmalloc(sizeof *r);
    fr_audit_compute(&a, r);
    fr_audit_print(&a, r, stdout);
    if (png && fr_audit_write_png(r, png, &err)) {
        fprintf(stderr, "frugal audit: %s\n", err.msg);
        rc = 1;
    }
    if (html && fr_audit_write_html(&a, r, html, png, &err)) {
        fprintf(stderr, "frugal audit: %s\n", err.msg);
        rc = 1;
    }
    free(r);
    fr_audit_free(&a);
    return rc;
}

static const char *ROI_HELP =
    "usage: frugal roi --a LEDGER [--a-arm ARM] --b LEDGER [--b-arm ARM] [options]\n"
    "  --a LEDGER, --b LEDGER     the two measured configurations (may be the same file with arms)\n"
    "  --a-arm ARM, --b-arm ARM   restrict a side to one A/B arm\n"
    "  --a-label L, --b-label L   column titles\n"
    "  --a-config F, --b-config F cost model of a side instead of the one its ledger recorded\n";

int fr_cmd_roi(int argc, char **argv) {
    const char *path[2] = {NULL, NULL}, *arm[2] = {NULL, NULL}, *label[2] = {NULL, NULL}, *conf[2] = {NULL, NULL};
    fr_flags fl;
    fr_flags_init(&fl, "roi", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            fputs(ROI_HELP, stdout);
            return 0;
        }
        if (!(fr_flag_str(&fl, "--a", &path[0]) || fr_flag_str(&fl, "--a-arm", &arm[0]) ||
              fr_flag_str(&fl, "--a-label", &label[0]) || fr_flag_str(&fl, "--a-config", &conf[0]) ||
              fr_flag_str(&fl, "--b", &path[1]) || fr_flag_str(&fl, "--b-arm", &arm[1]) ||
              fr_flag_str(&fl, "--b-label", &label[1]) || fr_flag_str(&fl, "--b-config", &conf[1])))
            return fr_flags_unknown(&fl);
    }
    if (fl.rc) return fl.rc;
    if (!path[0] || !path[1]) return usage_error("roi", "--a LEDGER and --b LEDGER are required");
    fr_roi_side s[2];
    for (int k = 0; k < 2; k++) {
        fr_meter_config cfg;
        if (conf[k] && load_config("roi", conf[k], &cfg)) return 1;
        fr_audit_opts o = {0, 0, conf[k] ? &cfg : NULL};
        fr_audit a;
        fr_err err;
        if (fr_audit_load(&a, path[k], &o, &err) ||
            fr_roi_measure(&a, arm[k], label[k] ? label[k] : arm[k] ? arm[k] : k ? "B" : "A", &s[k], &err)) {
            fprintf(stderr, "frugal roi: %s\n", err.msg);
            fr_audit_free(&a);
            return 1;
        }
        fr_audit_free(&a);
    }
    fr_roi_print(&s[0], &s[1], stdout);
    return 0;
}
