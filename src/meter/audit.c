/* audit.c — the cost audit, A/B comparison and ROI over a ledger. See audit.h.
 *
 * The four steps of the audit:
 *   1. collection window: first request start / energy row to last end; requests by outcome;
 *      measured energy (the ledger's per-device energy rows), idle share, total $.
 *   2. heatmap: for each modality × stage, the share of stage time, of energy and of $ (with a
 *      column for idle energy charged to requests under the amortise policy).
 *   3. bottleneck: the modality and the stage with the largest $ share (and the latency stage).
 *   4. candidates, each with a formula on measured numbers, ranked by savings over the window
 *      (and per year at the window's rate):
 *        skip_vision    Σ vision $ of image requests whose OCR text density ≥ audit.ocr_density
 *        waste          Σ $ of failed / cancelled / rejected requests
 *        idle_energy    unamortised idle energy × $/kWh × PUE
 *        idle_capacity  host-seconds no request used × (hardware + labour) $/s
 *        cooling        measured energy $ × (PUE − audit.target_pue)
 *
 * Statistics for A/B: means with Student-t intervals (Welch for differences), latency
 * percentiles with a seeded bootstrap (2,000 resamples: reproducible output), proportions with
 * Wilson intervals (Newcombe's hybrid score for differences). All intervals are 95 %.
 */
#include "meter/audit.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define YEAR_S (365.25 * 86400.0)
#define BOOT 2000

/* ---- statistics ------------------------------------------------------------------------------ */

static double betacf(double a, double b, double x) {
    const double eps = 1e-15, tiny = 1e-300;
    double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps) break;
    }
    return h;
}

/* Regularised incomplete beta I_x(a, b). */
static double betai(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1 - x));
    return x < (a + 1) / (a + b + 2) ? bt * betacf(a, b, x) / a : 1 - bt * betacf(b, a, 1 - x) / b;
}

static double t_cdf(double t, double df) {
    double p = 0.5 * betai(df / 2, 0.5, df / (df + t * t));
    return t >= 0 ? 1 - p : p;
}

double fr_meter_stat_t_quantile(double p, double df) {
    if (!(df > 0) || !(p > 0 && p < 1)) return NAN;
    if (p == 0.5) return 0;
    if (p < 0.5) return -fr_meter_stat_t_quantile(1 - p, df);
    double lo = 0, hi = 1;
    while (t_cdf(hi, df) < p && hi < 1e12) hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = (lo + hi) / 2;
        if (t_cdf(mid, df) < p) lo = mid;
        else hi = mid;
    }
    return (lo + hi) / 2;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double fr_meter_stat_percentile(double *v, int n, double q) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    double h = (n - 1) * q;
    int lo = (int)floor(h);
    if (lo >= n - 1) return v[n - 1];
    return v[lo] + (h - lo) * (v[lo + 1] - v[lo]);
}

void fr_meter_stat_wilson(long k, long n, double z, double ci[2]) {
    if (n <= 0) {
        ci[0] = 0;
        ci[1] = 1;
        return;
    }
    double p = (double)k / (double)n, z2 = z * z, nn = (double)n;
    double den = 1 + z2 / nn, c = (p + z2 / (2 * nn)) / den;
    double h = z / den * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    ci[0] = fmax(0, c - h);
    ci[1] = fmin(1, c + h);
}

static void mean_var(const double *v, int n, double *m, double *var) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *m = n ? s / n : 0;
    double q = 0;
    for (int i = 0; i < n; i++) q += (v[i] - *m) * (v[i] - *m);
    *var = n > 1 ? q / (n - 1) : 0;
}

static void mean_ci(const double *v, int n, double *m, double ci[2]) {
    double var;
    mean_var(v, n, m, &var);
    double h = n > 1 ? fr_meter_stat_t_quantile(0.975, n - 1) * sqrt(var / n) : 0;
    ci[0] = *m - h;
    ci[1] = *m + h;
}

static void welch(const double *a, int na, const double *b, int nb, double *d, double ci[2]) {
    double ma, va, mb, vb;
    mean_var(a, na, &ma, &va);
    mean_var(b, nb, &mb, &vb);
    *d = ma - mb;
    double sa = na ? va / na : 0, sb = nb ? vb / nb : 0, se = sqrt(sa + sb);
    double h = 0;
    if (se > 0 && na > 1 && nb > 1) {
        double df = (sa + sb) * (sa + sb) / (sa * sa / (na - 1) + sb * sb / (nb - 1));
        h = fr_meter_stat_t_quantile(0.975, df) * se;
    }
    ci[0] = *d - h;
    ci[1] = *d + h;
}

static uint64_t xs(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Bootstrap interval of quantile q of a (and of a − b when b != NULL). */
static void boot_q(const double *a, int na, const double *b, int nb, double q, uint64_t seed, double ci[2]) {
    if (na == 0 || (b && nb == 0)) {
        ci[0] = ci[1] = NAN;
        return;
    }
    double *st = fr_xmalloc(BOOT * sizeof *st), *ra = fr_xmalloc((size_t)na * sizeof *ra);
    double *rb = b ? fr_xmalloc((size_t)nb * sizeof *rb) : NULL;
    uint64_t s = seed | 1;
    for (int k = 0; k < BOOT; k++) {
        for (int i = 0; i < na; i++) ra[i] = a[xs(&s) % (uint64_t)na];
        double v = fr_meter_stat_percentile(ra, na, q);
        if (b) {
            for (int i = 0; i < nb; i++) rb[i] = b[xs(&s) % (uint64_t)nb];
            v -= fr_meter_stat_percentile(rb, nb, q);
        }
        st[k] = v;
    }
    ci[0] = fr_meter_stat_percentile(st, BOOT, 0.025);
    ci[1] = fr_meter_stat_percentile(st, BOOT, 0.975);
    free(st);
    free(ra);
    free(rb);
}

/* ---- loading --------------------------------------------------------------------------------- */

static const char *col_text(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

static int cmp_req_id(const void *a, const void *b) {
    long x = ((const fr_audit_req *)a)->id, y = ((const fr_audit_req *)b)->id;
    return x < y ? -1 : x > y;
}

static fr_audit_req *find_req(const fr_audit *a, long id) {
    fr_audit_req key;
    key.id = id;
    return bsearch(&key, a->r, (size_t)a->n, sizeof *a->r, cmp_req_id);
}

int fr_audit_load(fr_audit *a, const char *ledger, const fr_audit_opts *o, fr_err *err) {
    memset(a, 0, sizeof *a);
    snprintf(a->path, sizeof a->path, "%s", ledger);
    fr_meter_config_default(&a->cfg);
    sqlite3 *db = NULL;
    if (!fr_path_exists(ledger)) {
        fr_err_set(err, "ledger %s: no such file", ledger);
        return -1;
    }
    size_t ln = strlen(ledger);
    if (ln > 4 && !strcmp(ledger + ln - 4, ".sql")) { /* a dump (fixtures): load it in memory */
        size_t n;
        char *sql = fr_read_file(ledger, (size_t)1 << 30, &n, err);
        if (!sql) return -1;
        char *msg = NULL;
        if (sqlite3_open(":memory:", &db) != SQLITE_OK || sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
            fr_err_set(err, "ledger dump %s: %s", ledger, msg ? msg : "cannot load");
            sqlite3_free(msg);
            sqlite3_close(db);
            free(sql);
            return -1;
        }
        free(sql);
    } else if (sqlite3_open_v2(ledger, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s", ledger, db ? sqlite3_errmsg(db) : "cannot open");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    double since = o && o->since > 0 ? o->since : -1e300, until = o && o->until > 0 ? o->until : 1e300;
    sqlite3_stmt *st = NULL;
    /* configuration */
    if (o && o->config) {
        a->cfg = *o->config;
    } else if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='config'", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            const char *txt = col_text(st, 0);
            fr_err e2;
            fr_meter_config c;
            fr_meter_config_default(&c);
            if (fr_meter_config_parse(&c, txt, strlen(txt), &e2) == 0) {
                a->cfg = c;
                a->cfg_from_ledger = true;
            } else {
                fr_warn("audit: the ledger's configuration does not parse (%s); using defaults", e2.msg);
            }
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    /* requests */
    static const char *q =
        "SELECT id, trace_id, arm, route, tier, modality, status, t_start, t_end, latency_s, joules,"
        " joules_idle, occupancy_s, slo_met, tokens_in, tokens_out, estimated, incomplete, features"
        " FROM requests WHERE t_end >= ?1 AND t_end <= ?2 ORDER BY id";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
        fr_err_set(err, "ledger %s: %s (not a frugal ledger?)", ledger, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    sqlite3_bind_double(st, 1, since);
    sqlite3_bind_double(st, 2, until);
    int cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (a->n == cap) {
            cap = cap ? cap * 2 : 256;
            a->r = fr_xrealloc(a->r, (size_t)cap * sizeof *a->r);
        }
        fr_audit_req *r = &a->r[a->n++];
        memset(r, 0, sizeof *r);
        int i = 0;
        r->id = (long)sqlite3_column_int64(st, i++);
        snprintf(r->trace_id, sizeof r->trace_id, "%s", col_text(st, i++));
        snprintf(r->arm, sizeof r->arm, "%s", col_text(st, i++));
        snprintf(r->route, sizeof r->route, "%s", col_text(st, i++));
        snprintf(r->tier, sizeof r->tier, "%s", col_text(st, i++));
        snprintf(r->modality, sizeof r->modality, "%s", col_text(st, i++));
        snprintf(r->status, sizeof r->status, "%s", col_text(st, i++));
        r->t_start = sqlite3_column_double(st, i++);
        r->t_end = sqlite3_column_double(st, i++);
        r->latency_s = sqlite3_column_double(st, i++);
        r->joules = sqlite3_column_double(st, i++);
        r->joules_idle = sqlite3_column_double(st, i++);
        r->occupancy_s = sqlite3_column_double(st, i++);
        r->slo_met = sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int(st, i);
        i++;
        r->tokens_in = (long)sqlite3_column_int64(st, i++);
        r->tokens_out = (long)sqlite3_column_int64(st, i++);
        r->estimated = sqlite3_column_int(st, i++) != 0;
        r->incomplete = sqlite3_column_int(st, i++) != 0;
        r->ocr_density = NAN;
        cJSON *f = cJSON_Parse(col_text(st, i++));
        cJSON *d = cJSON_GetObjectItem(f, "ocr_text_density");
        if (cJSON_IsNumber(d)) r->ocr_density = d->valuedouble;
        cJSON_Delete(f);
    }
    sqlite3_finalize(st);
    /* stages */
    static const char *qs =
        "SELECT s.request, s.stage, s.seconds, s.joules, s.occupancy_s FROM request_stages s"
        " JOIN requests r ON r.id = s.request WHERE r.t_end >= ?1 AND r.t_end <= ?2";
    if (sqlite3_prepare_v2(db, qs, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_double(st, 1, since);
        sqlite3_bind_double(st, 2, until);
        while (sqlite3_step(st) == SQLITE_ROW) {
            fr_audit_req *r = find_req(a, (long)sqlite3_column_int64(st, 0));
            int stage = fr_meter_stage_from_name(col_text(st, 1));
            if (!r) continue;
            if (stage < 0) stage = FR_MSTAGE_OTHER;
            r->sec[stage] += sqlite3_column_double(st, 2);
            r->j[stage] += sqlite3_column_double(st, 3);
            r->occ[stage] += sqlite3_column_double(st, 4);
        }
    }
    sqlite3_finalize(st);
    /* energy */
    static const char *qe =
        "SELECT device, max(source), min(t_start), max(t_end), sum(measured_j), sum(idle_j) FROM energy"
        " WHERE t_end > ?1 AND t_start < ?2 GROUP BY device ORDER BY device";
    if (sqlite3_prepare_v2(db, qe, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_double(st, 1, since);
        sqlite3_bind_double(st, 2, until);
        while (sqlite3_step(st) == SQLITE_ROW && a->n_dev < FR_AUDIT_MAX_DEV) {
            int k = a->n_dev++;
            snprintf(a->dev[k], sizeof a->dev[k], "%s", col_text(st, 0));
            snprintf(a->dev_src[k], sizeof a->dev_src[k], "%s", col_text(st, 1));
            double t0 = sqlite3_column_double(st, 2), t1 = sqlite3_column_double(st, 3);
            if (!a->has_energy || t0 < a->e_t0) a->e_t0 = t0;
            if (!a->has_energy || t1 > a->e_t1) a->e_t1 = t1;
            a->has_energy = true;
            a->dev_measured[k] = sqlite3_column_double(st, 4);
            a->dev_idle[k] = sqlite3_column_double(st, 5);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* the default hardware rate is per device: a ledger records the host's counts; without them,
     * the GPUs its energy rows name, else the CPUs of this machine (said in the report) */
    if (a->cfg.cost.gpus <= 0 && a->cfg.cost.cpus <= 0) {
        int g = 0;
        for (int d = 0; d < a->n_dev; d++) g += !strncmp(a->dev[d], "gpu", 3);
        fr_cost_resolve_host(&a->cfg.cost, g);
        a->host_counted_here = true;
    }
    return 0;
}

void fr_audit_free(fr_audit *a) {
    free(a->r);
    a->r = NULL;
    a->n = 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int fr_audit_load_traces(fr_audit *a, const char *path, fr_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fr_err_set(err, "traces %s: cannot open", path);
        return -1;
    }
    /* sorted trace ids of the ledger for matching */
    char **ids = fr_xmalloc(((size_t)a->n + 1) * sizeof *ids);
    for (int i = 0; i < a->n; i++) ids[i] = a->r[i].trace_id;
    qsort(ids, (size_t)a->n, sizeof *ids, cmp_str);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)n);
        if (!j) {
            fr_warn("traces %s:%ld: not JSON; skipped", path, lineno);
            continue;
        }
        cJSON *rs, *ss, *sp;
        cJSON_ArrayForEach(rs, cJSON_GetObjectItem(j, "resourceSpans"))
            cJSON_ArrayForEach(ss, cJSON_GetObjectItem(rs, "scopeSpans"))
                cJSON_ArrayForEach(sp, cJSON_GetObjectItem(ss, "spans")) {
            a->n_spans++;
            cJSON *nm = cJSON_GetObjectItem(sp, "name"), *tid = cJSON_GetObjectItem(sp, "traceId");
            if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "request")) continue;
            a->n_traces++;
            if (cJSON_IsString(tid)) {
                const char *key = tid->valuestring;
                if (bsearch(&key, ids, (size_t)a->n, sizeof *ids, cmp_str)) a->traces_matched++;
            }
        }
        cJSON_Delete(j);
    }
    free(line);
    free(ids);
    fclose(f);
    return 0;
}

/* ---- the audit ------------------------------------------------------------------------------- */

const char *fr_audit_col_name(int col) {
    return col == FR_MSTAGE_COUNT ? "idle" : fr_meter_stage_name((fr_meter_stage)col);
}

static int status_idx(const char *s) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, fr_meter_status_name((fr_meter_status)i))) return i;
    return FR_REQ_FAILED;
}

static double price(const fr_cost_model *c, double j, double occ, double *parts) {
    double p[FR_COST_N];
    double t = fr_cost_price(c, j, occ, p);
    if (parts)
        for (int i = 0; i < FR_COST_N; i++) parts[i] += p[i];
    return t;
}

static void add_cand(fr_audit_report *r, const char *id, double usd, double j, const char *fmt, ...)
    FR_PRINTF(5, 6);
static void add_cand(fr_audit_report *r, const char *id, double usd, double j, const char *fmt, ...) {
    if (!(usd > 0) || r->n_cand == FR_AUDIT_MAX_CAND) return;
    fr_audit_candidate *c = &r->cand[r->n_cand++];
    snprintf(c->id, sizeof c->id, "%s", id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof c->text, fmt, ap);
    va_end(ap);
    c->usd = usd;
    c->joules = j;
    c->usd_year = r->window_s > 0 ? usd * YEAR_S / r->window_s : 0;
}

static int cmp_cand(const void *a, const void *b) {
    double x = ((const fr_audit_candidate *)a)->usd, y = ((const fr_audit_candidate *)b)->usd;
    return x > y ? -1 : x < y;
}

void fr_audit_compute(const fr_audit *a, fr_audit_report *r) {
    memset(r, 0, sizeof *r);
    const fr_cost_model *cm = &a->cfg.cost;
    double t0 = INFINITY, t1 = -INFINITY;
    if (a->has_energy) {
        t0 = a->e_t0;
        t1 = a->e_t1;
    }
    double occ_sum = 0, req_j = 0;
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        t0 = fmin(t0, q->t_start);
        t1 = fmax(t1, q->t_end);
        r->n_status[status_idx(q->status)]++;
        r->any_estimated |= q->estimated;
        r->any_incomplete |= q->incomplete;
        r->amortised_j += q->joules_idle;
        occ_sum += q->occupancy_s;
        req_j += q->joules + q->joules_idle;
    }
    r->n = a->n;
    r->t0 = isfinite(t0) ? t0 : 0;
    r->t1 = isfinite(t1) ? t1 : 0;
    r->window_s = r->t1 - r->t0;
    if (a->has_energy) {
        for (int d = 0; d < a->n_dev; d++) {
            r->measured_j += a->dev_measured[d];
            r->idle_j += a->dev_idle[d];
            r->any_estimated |= !strcmp(a->dev_src[d], "estimated");
        }
    } else {
        r->measured_j = req_j;
        r->idle_j = r->amortised_j;
    }
    /* heatmap */
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        const char *mod = q->modality[0] ? q->modality : "unknown";
        int m = 0;
        while (m < r->n_mod && strcmp(r->mod[m], mod)) m++;
        if (m == r->n_mod) {
            if (r->n_mod == FR_AUDIT_MAX_MOD) m = FR_AUDIT_MAX_MOD - 1; /* folds into the last */
            else snprintf(r->mod[r->n_mod++], sizeof r->mod[0], "%s", mod);
        }
        r->mod_n[m]++;
        double occ_st = 0;
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) {
            r->sec[m][s] += q->sec[s];
            r->j[m][s] += q->j[s];
            r->usd[m][s] += price(cm, q->j[s], q->occ[s], r->usd_part);
            occ_st += q->occ[s];
        }
        double occ_idle = q->occupancy_s - occ_st > 1e-6 ? q->occupancy_s - occ_st : 0; /* not rounding */
        r->j[m][FR_MSTAGE_COUNT] += q->joules_idle;
        r->usd[m][FR_MSTAGE_COUNT] += price(cm, q->joules_idle, occ_idle, r->usd_part);
    }
    /* order modalities by $ */
    for (int i = 1; i < r->n_mod; i++)
        for (int k = i; k > 0; k--) {
            double a1 = 0, a0 = 0;
            for (int c = 0; c < FR_AUDIT_COLS; c++) a1 += r->usd[k][c], a0 += r->usd[k - 1][c];
            if (a1 <= a0) break;
            char tmp[32];
            memcpy(tmp, r->mod[k], 32);
            memcpy(r->mod[k], r->mod[k - 1], 32);
            memcpy(r->mod[k - 1], tmp, 32);
            long tn = r->mod_n[k];
            r->mod_n[k] = r->mod_n[k - 1];
            r->mod_n[k - 1] = tn;
            for (int c = 0; c < FR_AUDIT_COLS; c++) {
                double x;
                x = r->sec[k][c], r->sec[k][c] = r->sec[k - 1][c], r->sec[k - 1][c] = x;
                x = r->j[k][c], r->j[k][c] = r->j[k - 1][c], r->j[k - 1][c] = x;
                x = r->usd[k][c], r->usd[k][c] = r->usd[k - 1][c], r->usd[k - 1][c] = x;
            }
        }
    double col_usd[FR_AUDIT_COLS] = {0}, col_sec[FR_AUDIT_COLS] = {0};
    double best_cell = -1, best_mod = -1;
    r->bot_mod = r->bot_stage = r->bot_cell_mod = r->bot_cell_stage = r->lat_stage = -1;
    for (int m = 0; m < r->n_mod; m++) {
        double row = 0;
        for (int c = 0; c < FR_AUDIT_COLS; c++) {
            r->tot_sec += r->sec[m][c];
            r->tot_j += r->j[m][c];
            r->tot_usd += r->usd[m][c];
            row += r->usd[m][c];
            col_usd[c] += r->usd[m][c];
            col_sec[c] += r->sec[m][c];
            if (c < FR_MSTAGE_COUNT && r->usd[m][c] > best_cell) {
                best_cell = r->usd[m][c];
                r->bot_cell_mod = m;
                r->bot_cell_stage = c;
            }
        }
        if (row > best_mod) {
            best_mod = row;
            r->bot_mod = m;
        }
    }
    double bs = -1, bt = -1;
    for (int c = 0; c < FR_MSTAGE_COUNT; c++) {
        if (col_usd[c] > bs && col_usd[c] > 0) bs = col_usd[c], r->bot_stage = c;
        if (col_sec[c] > bt && col_sec[c] > 0) bt = col_sec[c], r->lat_stage = c;
    }
    r->usd_total = r->tot_usd;

    /* idle priced */
    double unamortised = fmax(0, r->idle_j - r->amortised_j);
    r->usd_idle_energy = price(cm, unamortised, 0, NULL);
    double cap_rate = fr_cost_hw_usd_per_s(cm) + fr_cost_labour_usd_per_s(cm);
    r->usd_idle_capacity = fmax(0, r->window_s - occ_sum) * cap_rate;

    /* candidates */
    long img = 0, dense = 0;
    double sv_usd = 0, sv_j = 0;
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        if (!strstr(q->modality, "image") || (q->sec[FR_MSTAGE_VISION] <= 0 && q->j[FR_MSTAGE_VISION] <= 0)) continue;
        img++;
        if (q->sec[FR_MSTAGE_OCR] > 0 && isfinite(q->ocr_density) && q->ocr_density >= a->cfg.audit_ocr_density) {
            dense++;
            sv_usd += price(cm, q->j[FR_MSTAGE_VISION], q->occ[FR_MSTAGE_VISION], NULL);
            sv_j += q->j[FR_MSTAGE_VISION];
        }
    }
    add_cand(r, "skip_vision", sv_usd, sv_j,
             "skip the vision encoder when OCR already read the text: OCR text density >= %.2f on %.0f %% "
             "of the image requests that ran vision (%ld of %ld); their vision stage cost $%.6f (%.1f J)",
             a->cfg.audit_ocr_density, img ? 100.0 * dense / img : 0, dense, img, sv_usd, sv_j);
    long nw = 0;
    double w_usd = 0, w_j = 0;
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        if (!strcmp(q->status, "ok")) continue;
        double occ_st = 0;
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) occ_st += q->occ[s];
        double u = 0;
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) u += price(cm, q->j[s], q->occ[s], NULL);
        u += price(cm, q->joules_idle, fmax(0, q->occupancy_s - occ_st), NULL);
        if (u > 0) nw++;
        w_usd += u;
        w_j += q->joules + q->joules_idle;
    }
    add_cand(r, "waste", w_usd, w_j,
             "stop work nobody receives: %ld failed, cancelled or rejected requests spent $%.6f (%.1f J); "
             "cancel engine steps when the client leaves and reject before the expensive stages",
             nw, w_usd, w_j);
    add_cand(r, "idle_energy", r->usd_idle_energy, unamortised,
             "idle energy is %.1f %% of the measured energy (%.1f J not charged to any request): "
             "consolidate replicas, scale to zero or lower clocks while idle",
             r->measured_j > 0 ? 100.0 * r->idle_j / r->measured_j : 0, unamortised);
    add_cand(r, "idle_capacity", r->usd_idle_capacity, 0,
             "the host was busy %.1f %% of the window: serving this traffic on a %.0f %% share of the host "
             "would save the depreciation and labour of the unused time",
             r->window_s > 0 ? 100.0 * occ_sum / r->window_s : 0,
             r->window_s > 0 ? 100.0 * fmin(1, occ_sum / r->window_s) : 0);
    if (cm->pue > a->cfg.audit_target_pue) {
        double e_usd = r->measured_j / 3.6e6 * cm->usd_per_kwh;
        add_cand(r, "cooling", e_usd * (cm->pue - a->cfg.audit_target_pue), 0,
                 "facility overhead: PUE %.2f against %.2f in an efficient facility",
                 cm->pue, a->cfg.audit_target_pue);
    }
    qsort(r->cand, (size_t)r->n_cand, sizeof r->cand[0], cmp_cand);
}

/* ---- terminal -------------------------------------------------------------------------------- */

static void fmt_time(double t, char *out, size_t n) {
    time_t s = (time_t)floor(t);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, n, "%Y-%m-%d %H:%M:%SZ", &tm);
}

static double pct(double x, double tot) { return tot > 0 ? 100.0 * x / tot : 0; }

/* Columns worth showing: those holding more than a millionth of time, energy or $. */
static int used_cols(const fr_audit_report *r, int *cols) {
    int nc = 0;
    for (int c = 0; c < FR_AUDIT_COLS; c++) {
        double s = 0, j = 0, u = 0;
        for (int m = 0; m < r->n_mod; m++) s += r->sec[m][c], j += r->j[m][c], u += r->usd[m][c];
        if (s > 1e-6 * r->tot_sec || j > 1e-6 * r->tot_j || u > 1e-6 * r->tot_usd) cols[nc++] = c;
    }
    return nc;
}

void fr_audit_print(const fr_audit *a, const fr_audit_report *r, FILE *f) {
    char ta[32], tb[32];
    fmt_time(r->t0, ta, sizeof ta);
    fmt_time(r->t1, tb, sizeof tb);
    fprintf(f, "frugal audit: %s\n\n", a->path);
    fprintf(f, "(1) collection window\n");
    fprintf(f, "    %s .. %s (%.0f s)\n", ta, tb, r->window_s);
    fprintf(f, "    requests     %ld (ok %ld, rejected %ld, cancelled %ld, failed %ld)\n", r->n, r->n_status[0],
            r->n_status[1], r->n_status[2], r->n_status[3]);
    fprintf(f, "    energy       %.1f J measured, %.1f %% idle%s%s\n", r->measured_j, pct(r->idle_j, r->measured_j),
            r->any_estimated ? "  [includes estimated energy]" : "",
            r->any_incomplete ? "  [some requests incomplete]" : "");
    for (int d = 0; d < a->n_dev; d++)
        fprintf(f, "                 %-6s %-12s %.1f J (idle %.1f J)\n", a->dev[d], a->dev_src[d], a->dev_measured[d],
                a->dev_idle[d]);
    fprintf(f, "    cost         $%.6f for requests (energy %.6f, cooling %.6f, depreciation %.6f, labour %.6f)\n",
            r->usd_total, r->usd_part[0], r->usd_part[1], r->usd_part[2], r->usd_part[3]);
    fprintf(f, "                 + $%.6f unamortised idle energy, $%.6f idle host time\n", r->usd_idle_energy,
            r->usd_idle_capacity);
    char basis[96];
    fr_cost_hw_basis(&a->cfg.cost, basis, sizeof basis);
    fprintf(f, "    cost model   %s: $%.4f/kWh, PUE %.2f, hardware $%.4f/h (%s%s), labour $%.2f/month, host share %.2f\n",
            a->cfg_from_ledger ? "as recorded in the ledger" : "given", a->cfg.cost.usd_per_kwh, a->cfg.cost.pue,
            fr_cost_hw_usd_per_s(&a->cfg.cost) * 3600 / (a->cfg.cost.host_share > 0 ? a->cfg.cost.host_share : 1),
            basis,
            a->host_counted_here && !(a->cfg.cost.hw_usd_per_hour > 0) && !(a->cfg.cost.hw_purchase_usd > 0)
                ? "; host counts not recorded: counted here" : "",
            a->cfg.cost.labour_usd_per_month, a->cfg.cost.host_share);
    if (a->n_traces || a->n_spans)
        fprintf(f, "    traces       %ld traces, %ld spans; %ld of %d ledger rows have a trace\n", a->n_traces,
                a->n_spans, a->traces_matched, a->n);

    fprintf(f, "\n(2) modality x stage: share of time / energy / $ (%%)\n");
    int cols[FR_AUDIT_COLS];
    int nc = used_cols(r, cols);
    fprintf(f, "    %-14s %6s", "modality", "reqs");
    for (int k = 0; k < nc; k++) fprintf(f, " %17s", fr_audit_col_name(cols[k]));
    fprintf(f, " %17s\n", "total");
    for (int m = 0; m < r->n_mod; m++) {
        fprintf(f, "    %-14.14s %6ld", r->mod[m], r->mod_n[m]);
        double rs = 0, rj = 0, ru = 0;
        for (int k = 0; k < nc; k++) {
            int c = cols[k];
            char cell[40];
            snprintf(cell, sizeof cell, "%.0f/%.0f/%.0f", pct(r->sec[m][c], r->tot_sec), pct(r->j[m][c], r->tot_j),
                     pct(r->usd[m][c], r->tot_usd));
            fprintf(f, " %17s", cell);
            rs += r->sec[m][c], rj += r->j[m][c], ru += r->usd[m][c];
        }
        char cell[40];
        snprintf(cell, sizeof cell, "%.0f/%.0f/%.0f", pct(rs, r->tot_sec), pct(rj, r->tot_j), pct(ru, r->tot_usd));
        fprintf(f, " %17s\n", cell);
    }
    fprintf(f, "\n(3) bottleneck\n");
    if (r->bot_mod >= 0) {
        double row = 0, col = 0;
        for (int c = 0; c < FR_AUDIT_COLS; c++) row += r->usd[r->bot_mod][c];
        for (int m = 0; m < r->n_mod && r->bot_stage >= 0; m++) col += r->usd[m][r->bot_stage];
        fprintf(f, "    modality %s (%.1f %% of $), stage %s (%.1f %% of $)\n", r->mod[r->bot_mod],
                pct(row, r->tot_usd), r->bot_stage >= 0 ? fr_audit_col_name(r->bot_stage) : "-", pct(col, r->tot_usd));
        if (r->bot_cell_mod >= 0)
            fprintf(f, "    largest cell %s x %s: %.1f %% of $\n", r->mod[r->bot_cell_mod],
                    fr_audit_col_name(r->bot_cell_stage), pct(r->usd[r->bot_cell_mod][r->bot_cell_stage], r->tot_usd));
        if (r->lat_stage >= 0) {
            double ls = 0;
            for (int m = 0; m < r->n_mod; m++) ls += r->sec[m][r->lat_stage];
            fprintf(f, "    latency: stage %s holds %.1f %% of the stage time\n", fr_audit_col_name(r->lat_stage),
                    pct(ls, r->tot_sec));
        }
    } else {
        fprintf(f, "    no requests in the window\n");
    }
    fprintf(f, "\n(4) optimisation candidates, ranked by estimated savings\n");
    if (!r->n_cand) fprintf(f, "    none\n");
    for (int i = 0; i < r->n_cand; i++)
        fprintf(f, "    %d. [%s] $%.6f in the window ($%.2f/year): %s\n", i + 1, r->cand[i].id, r->cand[i].usd,
                r->cand[i].usd_year, r->cand[i].text);
}

/* ---- picture --------------------------------------------------------------------------------- */

/* 5x7 glyphs, one byte per row, bit 4 = leftmost column. */
static const struct { char c; unsigned char rows[7]; } font[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'a', {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}}, {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
    {'c', {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}}, {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
    {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}}, {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
    {'g', {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}}, {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'i', {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}}, {'j', {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}},
    {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}}, {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'m', {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}}, {'n', {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}}, {'p', {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
    {'q', {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}}, {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
    {'s', {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}}, {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
    {'u', {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}}, {'v', {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'w', {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}}, {'x', {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
    {'y', {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}}, {'z', {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}}, {',', {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}},
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'$', {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04}},
    {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}}, {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
    {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}}, {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
    {'/', {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}}, {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {' ', {0, 0, 0, 0, 0, 0, 0}},
    {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}},
};

typedef struct canvas {
    int w, h;          /* pixels */
    unsigned char *px; /* RGB */
} canvas;

static void fill(canvas *cv, int x, int y, int w, int h, unsigned rgb) {
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) {
            if (i < 0 || j < 0 || i >= cv->w || j >= cv->h) continue;
            unsigned char *p = cv->px + ((size_t)j * cv->w + i) * 3;
            p[0] = (unsigned char)(rgb >> 16);
            p[1] = (unsigned char)(rgb >> 8);
            p[2] = (unsigned char)rgb;
        }
}

/* Draw text at (x, y) with pixel scale s; returns the width drawn. */
static int text(canvas *cv, int x, int y, int s, unsigned rgb, const char *t) {
    int x0 = x;
    for (; *t; t++) {
        char c = *t >= 'A' && *t <= 'Z' ? (char)(*t - 'A' + 'a') : *t;
        size_t g = 0;
        while (g < FR_ARRAY_LEN(font) && font[g].c != c) g++;
        if (g == FR_ARRAY_LEN(font)) g = FR_ARRAY_LEN(font) - 1;
        int dy = strchr("gjpqy", c) && c ? 2 : 0; /* descenders sit below the baseline */
        for (int row = 0; row < 7; row++)
            for (int col = 0; col < 5; col++)
                if (font[g].rows[row] >> (4 - col) & 1) fill(cv, x + col * s, y + (row + dy) * s, s, s, rgb);
        x += 6 * s;
    }
    return x - x0;
}

/* White → deep red by share in [0, 1]. */
static unsigned heat(double v) {
    if (!(v > 0)) v = 0;
    if (v > 1) v = 1;
    unsigned r = 255, g = (unsigned)(255 - 200 * v), b = (unsigned)(255 - 230 * v);
    if (v > 0.6) r = (unsigned)(255 - (v - 0.6) * 200);
    return r << 16 | g << 8 | b;
}

unsigned char *fr_audit_png(const fr_audit_report *r, size_t *len) {
    int cols[FR_AUDIT_COLS];
    int nc = used_cols(r, cols);
    const int s = 2, cw = 13 * 6 * s, ch = 3 * 10 * s + 8, lw = 13 * 6 * s, top = 40 * s, left = 10;
    int mods = r->n_mod > 0 ? r->n_mod : 1;
    canvas cv;
    cv.w = left + lw + (nc > 0 ? nc : 1) * cw + 10;
    cv.h = top + mods * ch + 18 * s;
    cv.px = fr_xmalloc((size_t)cv.w * cv.h * 3);
    memset(cv.px, 255, (size_t)cv.w * cv.h * 3);
    text(&cv, left, 8, s, 0x202020, "frugal audit: share of $ (and energy) by modality x stage");
    double max = 0;
    for (int m = 0; m < r->n_mod; m++)
        for (int k = 0; k < nc; k++) max = fmax(max, r->usd[m][cols[k]]);
    for (int k = 0; k < nc; k++) text(&cv, left + lw + k * cw + 4, top - 12 * s, s, 0x202020, fr_audit_col_name(cols[k]));
    for (int m = 0; m < r->n_mod; m++) {
        int y = top + m * ch;
        text(&cv, left, y + ch / 2 - 4 * s, s, 0x202020, r->mod[m]);
        for (int k = 0; k < nc; k++) {
            int c = cols[k], x = left + lw + k * cw;
            double share = r->tot_usd > 0 ? r->usd[m][c] / r->tot_usd : 0;
            unsigned bg = heat(max > 0 ? r->usd[m][c] / max : 0);
            fill(&cv, x + 1, y + 1, cw - 2, ch - 2, bg);
            unsigned fg = max > 0 && r->usd[m][c] / max > 0.55 ? 0xFFFFFF : 0x202020;
            char line[40];
            snprintf(line, sizeof line, "$ %.1f%%", 100 * share);
            text(&cv, x + 6, y + 6, s, fg, line);
            snprintf(line, sizeof line, "j %.1f%%", r->tot_j > 0 ? 100 * r->j[m][c] / r->tot_j : 0);
            text(&cv, x + 6, y + 6 + 10 * s, s, fg, line);
            snprintf(line, sizeof line, "t %.1f%%", r->tot_sec > 0 ? 100 * r->sec[m][c] / r->tot_sec : 0);
            text(&cv, x + 6, y + 6 + 20 * s, s, fg, line);
        }
    }
    text(&cv, left, cv.h - 10 * s, s, 0x606060, "cell: $ share, energy (j) share, time (t) share of the window");
    unsigned char *png = fr_meter_png_encode(cv.px, cv.w, cv.h, len);
    free(cv.px);
    return png;
}

int fr_audit_write_png(const fr_audit_report *r, const char *path, fr_err *err) {
    size_t n;
    unsigned char *png = fr_audit_png(r, &n);
    FILE *f = png ? fopen(path, "wb") : NULL;
    if (!f || fwrite(png, 1, n, f) != n) {
        fr_err_set(err, "%s: cannot write the PNG", path);
        if (f) fclose(f);
        free(png);
        return -1;
    }
    fclose(f);
    free(png);
    return 0;
}

static void html_esc(fr_buf *o, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fr_buf_puts(o, "&lt;");
        else if (*s == '>') fr_buf_puts(o, "&gt;");
        else if (*s == '&') fr_buf_puts(o, "&amp;");
        else if (*s == '"') fr_buf_puts(o, "&quot;");
        else fr_buf_append(o, s, 1);
    }
}

static void base64(fr_buf *o, const unsigned char *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {t[v >> 18 & 63], t[v >> 12 & 63], i + 1 < n ? t[v >> 6 & 63] : '=', i + 2 < n ? t[v & 63] : '='};
        fr_buf_append(o, q, 4);
    }
}

int fr_audit_write_html(const fr_audit *a, const fr_audit_report *r, const char *path, const char *png_name,
                        fr_err *err) {
    fr_buf o = {0};
    char ta[32], tb[32];
    fmt_time(r->t0, ta, sizeof ta);
    fmt_time(r->t1, tb, sizeof tb);
    fr_buf_puts(&o, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>frugal audit</title>\n<style>"
                    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
                    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
                    "th{background:#f4f4f4}td.l,th.l{text-align:left}.heat td.c{min-width:7em}"
                    "small{color:#555}</style></head><body>\n<h1>frugal audit</h1>\n<p>Ledger <code>");
    html_esc(&o, a->path);
    fr_buf_printf(&o, "</code></p>\n<h2>1. Collection window</h2>\n<table>"
                      "<tr><th class=l>window</th><td class=l>%s &ndash; %s (%.0f s)</td></tr>"
                      "<tr><th class=l>requests</th><td class=l>%ld (ok %ld, rejected %ld, cancelled %ld, failed %ld)</td></tr>"
                      "<tr><th class=l>energy</th><td class=l>%.1f J measured, %.1f %% idle%s</td></tr>"
                      "<tr><th class=l>cost</th><td class=l>$%.6f (energy %.6f, cooling %.6f, depreciation %.6f, labour %.6f)"
                      " + $%.6f idle energy + $%.6f idle host time</td></tr></table>\n",
                  ta, tb, r->window_s, r->n, r->n_status[0], r->n_status[1], r->n_status[2], r->n_status[3],
                  r->measured_j, pct(r->idle_j, r->measured_j), r->any_estimated ? " (includes <b>estimated</b> energy)" : "",
                  r->usd_total, r->usd_part[0], r->usd_part[1], r->usd_part[2], r->usd_part[3], r->usd_idle_energy,
                  r->usd_idle_capacity);
    fr_buf_puts(&o, "<h2>2. Modality &times; stage heatmap</h2>\n<p><small>Cell colour: share of $; text: $ / energy / "
                    "time shares of the window.</small></p>\n<table class=heat><tr><th class=l>modality</th><th>requests</th>");
    int cols[FR_AUDIT_COLS];
    int nc = used_cols(r, cols);
    for (int k = 0; k < nc; k++) fr_buf_printf(&o, "<th>%s</th>", fr_audit_col_name(cols[k]));
    fr_buf_puts(&o, "</tr>\n");
    double max = 0;
    for (int m = 0; m < r->n_mod; m++)
        for (int k = 0; k < nc; k++) max = fmax(max, r->usd[m][cols[k]]);
    for (int m = 0; m < r->n_mod; m++) {
        fr_buf_puts(&o, "<tr><td class=l>");
        html_esc(&o, r->mod[m]);
        fr_buf_printf(&o, "</td><td>%ld</td>", r->mod_n[m]);
        for (int k = 0; k < nc; k++) {
            int c = cols[k];
            unsigned bg = heat(max > 0 ? r->usd[m][c] / max : 0);
            fr_buf_printf(&o, "<td class=c style=\"background:#%06x%s\" title=\"$%.6f, %.2f J, %.3f s\">"
                              "$ %.1f%%<br><small>J %.1f%% &middot; t %.1f%%</small></td>",
                          bg, max > 0 && r->usd[m][c] / max > 0.55 ? ";color:#fff" : "", r->usd[m][c], r->j[m][c],
                          r->sec[m][c], pct(r->usd[m][c], r->tot_usd), pct(r->j[m][c], r->tot_j),
                          pct(r->sec[m][c], r->tot_sec));
        }
        fr_buf_puts(&o, "</tr>\n");
    }
    fr_buf_puts(&o, "</table>\n");
    size_t pn;
    unsigned char *png = fr_audit_png(r, &pn);
    if (png) {
        fr_buf_puts(&o, "<p><img alt=\"heatmap\" src=\"data:image/png;base64,");
        base64(&o, png, pn);
        fr_buf_puts(&o, "\"></p>\n");
        free(png);
    }
    if (png_name) {
        fr_buf_puts(&o, "<p><small>PNG: <a href=\"");
        html_esc(&o, png_name);
        fr_buf_puts(&o, "\">");
        html_esc(&o, png_name);
        fr_buf_puts(&o, "</a></small></p>\n");
    }
    fr_buf_puts(&o, "<h2>3. Bottleneck</h2>\n<p>");
    if (r->bot_mod >= 0) {
        double row = 0, col = 0;
        for (int c = 0; c < FR_AUDIT_COLS; c++) row += r->usd[r->bot_mod][c];
        for (int m = 0; m < r->n_mod && r->bot_stage >= 0; m++) col += r->usd[m][r->bot_stage];
        fr_buf_puts(&o, "Modality <b>");
        html_esc(&o, r->mod[r->bot_mod]);
        fr_buf_printf(&o, "</b> (%.1f %% of $), stage <b>%s</b> (%.1f %% of $).", pct(row, r->tot_usd),
                      r->bot_stage >= 0 ? fr_audit_col_name(r->bot_stage) : "-", pct(col, r->tot_usd));
        if (r->lat_stage >= 0) fr_buf_printf(&o, " Latency: stage <b>%s</b> holds the most stage time.", fr_audit_col_name(r->lat_stage));
    } else {
        fr_buf_puts(&o, "No requests in the window.");
    }
    fr_buf_puts(&o, "</p>\n<h2>4. Optimisation candidates</h2>\n<table><tr><th>#</th><th class=l>candidate</th>"
                    "<th>saves in window</th><th>per year</th><th class=l>evidence</th></tr>\n");
    for (int i = 0; i < r->n_cand; i++) {
        fr_buf_printf(&o, "<tr><td>%d</td><td class=l>%s</td><td>$%.6f</td><td>$%.2f</td><td class=l>", i + 1,
                      r->cand[i].id, r->cand[i].usd, r->cand[i].usd_year);
        html_esc(&o, r->cand[i].text);
        fr_buf_puts(&o, "</td></tr>\n");
    }
    fr_buf_puts(&o, "</table>\n</body></html>\n");
    FILE *f = fopen(path, "w");
    if (!f || fwrite(o.data, 1, o.len, f) != o.len) {
        fr_err_set(err, "%s: cannot write the report", path);
        if (f) fclose(f);
        fr_buf_free(&o);
        return -1;
    }
    fclose(f);
    fr_buf_free(&o);
    return 0;
}

/* ---- A/B ------------------------------------------------------------------------------------- */

typedef struct arm_data {
    double *usd, *j, *lat; /* per request: $ × 1000, joules, latency (ok only) */
    int n, n_lat;          /* counts */
    long slo_k, slo_n;     /* SLO verdicts */
} arm_data;

static void gather(const fr_audit *a, const char *arm, arm_data *d) {
    memset(d, 0, sizeof *d);
    d->usd = fr_xmalloc(((size_t)a->n + 1) * sizeof(double));
    d->j = fr_xmalloc(((size_t)a->n + 1) * sizeof(double));
    d->lat = fr_xmalloc(((size_t)a->n + 1) * sizeof(double));
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        if (strcmp(q->arm, arm)) continue;
        double occ_st = 0, u = 0;
        for (int s = 0; s < FR_MSTAGE_COUNT; s++) {
            occ_st += q->occ[s];
            u += price(&a->cfg.cost, q->j[s], q->occ[s], NULL);
        }
        u += price(&a->cfg.cost, q->joules_idle, fmax(0, q->occupancy_s - occ_st), NULL);
        d->usd[d->n] = 1000 * u;
        d->j[d->n] = q->joules + q->joules_idle;
        d->n++;
        if (!strcmp(q->status, "ok")) d->lat[d->n_lat++] = q->latency_s;
        if (q->slo_met >= 0) {
            d->slo_n++;
            d->slo_k += q->slo_met == 1;
        }
    }
}

static void free_arm(arm_data *d) {
    free(d->usd);
    free(d->j);
    free(d->lat);
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int fr_audit_ab(const fr_audit *a, const char *const *arms, int n_arms, fr_ab_report *r, fr_err *err) {
    memset(r, 0, sizeof *r);
    r->boot = BOOT;
    char names[FR_METER_MAX_ARMS][32];
    int nn = 0;
    if (arms) {
        for (int i = 0; i < n_arms && nn < FR_METER_MAX_ARMS; i++) snprintf(names[nn++], 32, "%s", arms[i]);
    } else {
        for (int i = 0; i < a->n; i++) {
            const char *arm = a->r[i].arm;
            if (!arm[0]) continue;
            int k = 0;
            while (k < nn && strcmp(names[k], arm)) k++;
            if (k == nn && nn < FR_METER_MAX_ARMS) snprintf(names[nn++], 32, "%s", arm);
        }
        qsort(names, (size_t)nn, sizeof names[0], cmp_name);
        for (int k = 1; k < nn; k++) /* "control" is the baseline when present */
            if (!strcmp(names[k], "control")) {
                char t[32];
                memcpy(t, names[k], 32);
                memmove(names[1], names[0], (size_t)k * 32);
                memcpy(names[0], t, 32);
            }
    }
    if (nn < 2) {
        fr_err_set(err, "A/B needs two arms; the ledger has %d", nn);
        return -1;
    }
    arm_data d[FR_METER_MAX_ARMS];
    for (int k = 0; k < nn; k++) {
        gather(a, names[k], &d[k]);
        if (d[k].n == 0) {
            fr_err_set(err, "arm '%s' has no requests in the window", names[k]);
            for (int i = 0; i <= k; i++) free_arm(&d[i]);
            return -1;
        }
    }
    r->n_arms = nn;
    for (int i = 0; i < a->n; i++) r->estimated |= a->r[i].estimated;
    for (int k = 0; k < a->n_dev; k++) r->estimated |= !strcmp(a->dev_src[k], "estimated");
    for (int k = 0; k < nn; k++) {
        fr_ab_arm *x = &r->arm[k];
        snprintf(x->name, sizeof x->name, "%s", names[k]);
        x->n = d[k].n;
        x->n_ok = d[k].n_lat;
        x->n_slo = d[k].slo_n;
        mean_ci(d[k].usd, d[k].n, &x->usd_1k, x->usd_1k_ci);
        mean_ci(d[k].j, d[k].n, &x->j_req, x->j_req_ci);
        double *tmp = fr_xmalloc(((size_t)d[k].n_lat + 1) * sizeof *tmp);
        memcpy(tmp, d[k].lat, (size_t)d[k].n_lat * sizeof *tmp);
        x->p50 = fr_meter_stat_percentile(tmp, d[k].n_lat, 0.5);
        x->p99 = fr_meter_stat_percentile(tmp, d[k].n_lat, 0.99);
        free(tmp);
        boot_q(d[k].lat, d[k].n_lat, NULL, 0, 0.5, 0x5eed0001ULL + (uint64_t)k, x->p50_ci);
        boot_q(d[k].lat, d[k].n_lat, NULL, 0, 0.99, 0x5eed0101ULL + (uint64_t)k, x->p99_ci);
        x->slo = d[k].slo_n ? (double)d[k].slo_k / (double)d[k].slo_n : NAN;
        fr_meter_stat_wilson(d[k].slo_k, d[k].slo_n, 1.959963984540054, x->slo_ci);
        if (k == 0) continue;
        fr_ab_diff *df = &r->diff[k];
        welch(d[k].usd, d[k].n, d[0].usd, d[0].n, &df->usd_1k, df->usd_1k_ci);
        welch(d[k].j, d[k].n, d[0].j, d[0].n, &df->j_req, df->j_req_ci);
        df->p50 = x->p50 - r->arm[0].p50;
        df->p99 = x->p99 - r->arm[0].p99;
        boot_q(d[k].lat, d[k].n_lat, d[0].lat, d[0].n_lat, 0.5, 0x5eed0201ULL + (uint64_t)k, df->p50_ci);
        boot_q(d[k].lat, d[k].n_lat, d[0].lat, d[0].n_lat, 0.99, 0x5eed0301ULL + (uint64_t)k, df->p99_ci);
        double p1 = x->slo, p2 = r->arm[0].slo;
        df->slo = p1 - p2;
        df->slo_ci[0] = df->slo - sqrt(pow(p1 - x->slo_ci[0], 2) + pow(r->arm[0].slo_ci[1] - p2, 2));
        df->slo_ci[1] = df->slo + sqrt(pow(x->slo_ci[1] - p1, 2) + pow(p2 - r->arm[0].slo_ci[0], 2));
    }
    for (int k = 0; k < nn; k++) free_arm(&d[k]);
    return 0;
}

static const char *sig(const double ci[2]) { return ci[0] > 0 || ci[1] < 0 ? " *" : ""; }

/* "v [lo, hi]" with `dec` decimals (signed when `plus`), "n/a" for a value that is not a number
 * and "[n/a]" for an interval that is not (one sample, no SLO). */
static void ci_cell(char *o, size_t n, double v, const double ci[2], int dec, bool plus, bool mark) {
    if (!isfinite(v)) {
        snprintf(o, n, "n/a");
        return;
    }
    if (!isfinite(ci[0]) || !isfinite(ci[1])) {
        snprintf(o, n, plus ? "%+.*f [n/a]" : "%.*f [n/a]", dec, v);
        return;
    }
    snprintf(o, n, plus ? "%+.*f [%+.*f, %+.*f]%s" : "%.*f [%.*f, %.*f]%s", dec, v, dec, ci[0], dec, ci[1],
             mark ? sig(ci) : "");
}

void fr_audit_ab_print(const fr_ab_report *r, FILE *f) {
    fprintf(f, "A/B comparison (95 %% intervals: t for means, bootstrap x%d for percentiles, Wilson for SLO)%s\n\n",
            r->boot, r->estimated ? "\n[energy includes estimated values]" : "");
    fprintf(f, "%-16s %7s %26s %26s %24s %24s %22s\n", "arm", "n", "$ / 1k requests", "J / request", "p50 latency (s)",
            "p99 latency (s)", "SLO attainment");
    for (int k = 0; k < r->n_arms; k++) {
        const fr_ab_arm *x = &r->arm[k];
        char c1[64], c2[64], c3[64], c4[64], c5[64];
        ci_cell(c1, sizeof c1, x->usd_1k, x->usd_1k_ci, 4, false, false);
        ci_cell(c2, sizeof c2, x->j_req, x->j_req_ci, 2, false, false);
        ci_cell(c3, sizeof c3, x->p50, x->p50_ci, 3, false, false);
        ci_cell(c4, sizeof c4, x->p99, x->p99_ci, 3, false, false);
        ci_cell(c5, sizeof c5, x->slo, x->slo_ci, 3, false, false);
        fprintf(f, "%-16s %7ld %26s %26s %24s %24s %22s\n", x->name, x->n, c1, c2, c3, c4, c5);
    }
    fprintf(f, "\ndifference to %s (* = the interval excludes 0)\n", r->arm[0].name);
    for (int k = 1; k < r->n_arms; k++) {
        const fr_ab_diff *d = &r->diff[k];
        char c1[64], c2[64], c3[64], c4[64], c5[64];
        ci_cell(c1, sizeof c1, d->usd_1k, d->usd_1k_ci, 4, true, true);
        ci_cell(c2, sizeof c2, d->j_req, d->j_req_ci, 2, true, true);
        ci_cell(c3, sizeof c3, d->p50, d->p50_ci, 3, true, true);
        ci_cell(c4, sizeof c4, d->p99, d->p99_ci, 3, true, true);
        ci_cell(c5, sizeof c5, d->slo, d->slo_ci, 3, true, true);
        fprintf(f, "%-16s %7s %26s %26s %24s %24s %22s\n", r->arm[k].name, "", c1, c2, c3, c4, c5);
    }
}

/* ---- ROI ------------------------------------------------------------------------------------- */

int fr_roi_measure(const fr_audit *a, const char *arm, const char *label, fr_roi_side *s, fr_err *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%.63s", label ? label : arm ? arm : a->path);
    fr_audit_report *r = fr_xmalloc(sizeof *r);
    fr_audit_compute(a, r);
    long n_all = a->n, n = 0, slo_k = 0, slo_n = 0;
    double j_all = 0, j_arm = 0;
    for (int i = 0; i < a->n; i++) {
        const fr_audit_req *q = &a->r[i];
        j_all += q->joules + q->joules_idle;
        if (arm && strcmp(q->arm, arm)) continue;
        n++;
        j_arm += q->joules + q->joules_idle;
        if (q->slo_met >= 0) {
            slo_n++;
            slo_k += q->slo_met == 1;
        }
    }
    double window = r->window_s, measured = r->measured_j;
    s->estimated = r->any_estimated;
    free(r);
    if (n == 0 || !(window > 0)) {
        fr_err_set(err, "%s%s%s: no requests or an empty window", a->path, arm ? " arm " : "", arm ? arm : "");
        return -1;
    }
    s->window_s = window;
    s->n = n;
    s->frac = (double)n / (double)n_all;
    /* energy of this configuration running the host: its requests + its share of what no request
     * was charged, scaled to the whole host */
    double e = (j_arm + fmax(0, measured - j_all) * s->frac) / s->frac;
    s->qps = (double)n / (window * s->frac);
    s->sla = slo_n ? (double)slo_k / (double)slo_n : NAN;
    s->n_slo = slo_n;
    s->power_w = e / window;
    s->j_req = e / (s->qps * window);
    const fr_cost_model *c = &a->cfg.cost;
    s->elec_yr = s->power_w * YEAR_S / 3.6e6 * c->usd_per_kwh;
    s->cool_yr = s->elec_yr * (c->pue - 1);
    s->dep_yr = fr_cost_hw_usd_per_s(c) * YEAR_S;
    s->labour_yr = fr_cost_labour_usd_per_s(c) * YEAR_S;
    s->tco_yr = s->elec_yr + s->cool_yr + s->dep_yr + s->labour_yr;
    s->usd_req = s->tco_yr / (s->qps * YEAR_S);
    return 0;
}

/* A number, or "n/a" when it is not one (no request had an SLO, an empty arm): never "nan". */
static void num_or_na(char *o, size_t n, const char *fmt, int dec, double v) {
    if (isfinite(v)) snprintf(o, n, fmt, dec, v);
    else snprintf(o, n, "n/a");
}

static void roi_row(FILE *f, const char *name, double a, double b, int dec) {
    char x[48], y[48], d[48], p[24];
    num_or_na(x, sizeof x, "%.*f", dec, a);
    num_or_na(y, sizeof y, "%.*f", dec, b);
    num_or_na(d, sizeof d, "%+.*f", dec, b - a);
    if (a != 0 && isfinite(a) && isfinite(b)) snprintf(p, sizeof p, "%+.1f %%", 100 * (b - a) / fabs(a));
    else snprintf(p, sizeof p, "-");
    fprintf(f, "%-28s %18s %18s %18s %10s\n", name, x, y, d, p);
}

void fr_roi_print(const fr_roi_side *a, const fr_roi_side *b, FILE *f) {
    fprintf(f, "ROI: %s -> %s (TCO per year at the measured QPS)%s\n\n", a->label, b->label,
            a->estimated || b->estimated ? "\n[energy includes estimated values]" : "");
    fprintf(f, "%-28s %18.18s %18.18s %18s %10s\n", "", a->label, b->label, "change", "change");
    roi_row(f, "window (s)", a->window_s, b->window_s, 0);
    roi_row(f, "requests", (double)a->n, (double)b->n, 0);
    roi_row(f, "QPS", a->qps, b->qps, 4);
    char sla[64];
    snprintf(sla, sizeof sla, "SLA attainment (%ld/%ld SLO)", a->n_slo, b->n_slo);
    roi_row(f, sla, a->sla, b->sla, 4);
    roi_row(f, "energy / request (J)", a->j_req, b->j_req, 2);
    roi_row(f, "average IT power (W)", a->power_w, b->power_w, 2);
    roi_row(f, "TCO/yr depreciation ($)", a->dep_yr, b->dep_yr, 2);
    roi_row(f, "TCO/yr electricity ($)", a->elec_yr, b->elec_yr, 2);
    roi_row(f, "TCO/yr cooling ($)", a->cool_yr, b->cool_yr, 2);
    roi_row(f, "TCO/yr labour ($)", a->labour_yr, b->labour_yr, 2);
    roi_row(f, "TCO/yr total ($)", a->tco_yr, b->tco_yr, 2);
    roi_row(f, "cost / request ($)", a->usd_req, b->usd_req, 8);
    roi_row(f, "cost / 1k requests ($)", 1000 * a->usd_req, 1000 * b->usd_req, 5);
}
