/* intent_calib.c — calibration of a trained intent model (intent_train.h): the temperature by
 * minimum negative log-likelihood on held-out in-scope rows (golden-section search over log T),
 * then the out-of-scope thresholds by an exhaustive grid on the same rows plus the held-out
 * out-of-scope rows; and the expected calibration error used to report both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/nlu/intent_impl.h"
#include "stages/nlu/intent_train.h"

/* Raw (temperature 1) probabilities and coverage of the selected rows. */
typedef struct rows {
    size_t n;     /* rows */
    int nl;       /* labels */
    float *p;     /* [n][nl] raw ensemble probabilities */
    float *cov;   /* [n] word coverage */
    int *y;       /* [n] model label (-1: unknown to the model) */
} rows;

static void rows_load(rows *r, const fr_intent_model *m, const fr_intent_data *d,
                      const uint8_t *mark, int want) {
    memset(r, 0, sizeof *r);
    r->nl = fr_intent_n_labels(m);
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++) n += !mark || mark[i] == want;
    r->p = fr_xmalloc((n + 1) * (size_t)r->nl * sizeof *r->p);
    r->cov = fr_xmalloc((n + 1) * sizeof *r->cov);
    r->y = fr_xmalloc((n + 1) * sizeof *r->y);
    /* raw probabilities: classify with the identity calibration */
    fr_intent_model tmp = *m;
    fr_intent_calib_identity(&tmp.calib);
    for (size_t i = 0; i < d->n; i++) {
        if (mark && mark[i] != want) continue;
        fr_intent_probs(&tmp, d->texts[i], strlen(d->texts[i]), r->p + r->n * (size_t)r->nl,
                        &r->cov[r->n], NULL);
        r->y[r->n] = fr_intent_label_index(m, d->names[d->labels[i]]);
        r->n++;
    }
}

static void rows_free(rows *r) {
    free(r->p);
    free(r->cov);
    free(r->y);
}

/* p (raw) at temperature t into q. */
static void temper(const float *p, int nl, double t, float *q) {
    double mx = -1e300;
    for (int c = 0; c < nl; c++) mx = fmax(mx, log((double)p[c] + 1e-30) / t);
    double s = 0;
    for (int c = 0; c < nl; c++) s += exp(log((double)p[c] + 1e-30) / t - mx);
    for (int c = 0; c < nl; c++) q[c] = (float)(exp(log((double)p[c] + 1e-30) / t - mx) / s);
}

/* Mean NLL of the in-scope rows at temperature t. */
static double nll(const rows *r, int oos, double t) {
    double s = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        int y = r->y[i];
        if (y < 0 || y == oos) continue;
        const float *p = r->p + i * (size_t)r->nl;
        double mx = -1e300;
        for (int c = 0; c < r->nl; c++) mx = fmax(mx, log((double)p[c] + 1e-30) / t);
        double z = 0;
        for (int c = 0; c < r->nl; c++) z += exp(log((double)p[c] + 1e-30) / t - mx);
        s -= log((double)p[y] + 1e-30) / t - mx - log(z);
        n++;
    }
    return n ? s / (double)n : 0;
}

static double fit_temperature(const rows *r, int oos) {
    double lo = log(0.05), hi = log(5.0), g = (sqrt(5.0) - 1) / 2;
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = nll(r, oos, exp(a)), fb = nll(r, oos, exp(b));
    for (int it = 0; it < 60; it++) {
        if (fa < fb) {
            hi = b, b = a, fb = fa;
            a = hi - g * (hi - lo);
            fa = nll(r, oos, exp(a));
        } else {
            lo = a, a = b, fa = fb;
            b = lo + g * (hi - lo);
            fb = nll(r, oos, exp(b));
        }
    }
    return exp((lo + hi) / 2);
}

void fr_intent_calibrate(fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                         int want, double target, double *in_flagged, double *oos_flagged) {
    rows r;
    rows_load(&r, m, d, mark, want);
    fr_intent_calib *c = &m->calib;
    int oos = c->oos_label;
    c->temperature = (float)fit_temperature(&r, oos);
    /* per row: calibrated best in-scope probability, P(oos), coverage */
    float *best = fr_xmalloc((r.n + 1) * sizeof *best), *po = fr_xmalloc((r.n + 1) * sizeof *po);
    float *q = fr_xmalloc((size_t)r.nl * sizeof *q);
    size_t n_in = 0, n_out = 0;
    for (size_t i = 0; i < r.n; i++) {
        temper(r.p + i * (size_t)r.nl, r.nl, c->temperature, q);
        best[i] = 0;
        for (int k = 0; k < r.nl; k++)
            if (k != oos && q[k] > best[i]) best[i] = q[k];
        po[i] = oos >= 0 ? q[oos] : 0;
        if (r.y[i] == oos && oos >= 0) n_out++;
        else if (r.y[i] >= 0) n_in++;
    }
    /* grid: P(oos) threshold (or off), confidence floor, coverage floor */
    size_t cap = (size_t)floor(target * (double)n_in + 1e-9);
    long best_out = -1;
    size_t best_in = 0;
    fr_intent_calib pick = *c;
    pick.oos_min_prob = 2.0f, pick.min_conf = 0, pick.min_coverage = 0;
    for (int a = 0; a <= 19; a++) {
        float th_o = a == 19 ? 2.0f : 0.05f + 0.05f * (float)a;
        if (oos < 0 && a != 19) continue;
        for (int b = 0; b <= 60; b++) {
            float th_c = 0.01f * (float)b;
            for (int e = 0; e <= 16; e++) {
                float th_v = 0.05f * (float)e;
                size_t fin = 0, fout = 0;
                for (size_t i = 0; i < r.n && fin <= cap; i++) {
                    if (r.y[i] < 0) continue;
                    bool flag = po[i] >= th_o || best[i] < th_c || r.cov[i] < th_v;
                    if (r.y[i] == oos && oos >= 0) fout += flag;
                    else fin += flag;
                }
                if (fin > cap) continue;
                /* more OOS flagged; then fewer in-scope flagged; then the later (larger) grid
                 * point, which leaves more margin on the OOS side */
                if ((long)fout > best_out || ((long)fout == best_out && fin <= best_in)) {
                    best_out = (long)fout;
                    best_in = fin;
                    pick.oos_min_prob = th_o, pick.min_conf = th_c, pick.min_coverage = th_v;
                }
            }
        }
    }
    *c = pick;
    if (in_flagged) *in_flagged = n_in ? (double)best_in / (double)n_in : 0;
    if (oos_flagged) *oos_flagged = n_out && best_out > 0 ? (double)best_out / (double)n_out : 0;
    free(best);
    free(po);
    free(q);
    rows_free(&r);
}

double fr_intent_ece(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                     int want, float t, double *acc) {
    rows r;
    rows_load(&r, m, d, mark, want);
    int oos = fr_intent_get_calib(m)->oos_label;
    enum { NB = 15 };
    double conf[NB] = {0}, hit[NB] = {0};
    size_t cnt[NB] = {0}, n = 0, ok = 0;
    float *q = fr_xmalloc((size_t)r.nl * sizeof *q);
    for (size_t i = 0; i < r.n; i++) {
        if (r.y[i] < 0 || r.y[i] == oos) continue;
        temper(r.p + i * (size_t)r.nl, r.nl, t, q);
        int b = 0;
        for (int k = 1; k < r.nl; k++)
            if (q[k] > q[b]) b = k;
        int bin = FR_MIN((int)(q[b] * NB), NB - 1);
        conf[bin] += q[b];
        hit[bin] += b == r.y[i];
        cnt[bin]++;
        ok += b == r.y[i];
        n++;
    }
    double e = 0;
    for (int k = 0; k < NB; k++)
        if (cnt[k]) e += fabs(conf[k] - hit[k]) / (double)(n ? n : 1);
    if (acc) *acc = n ? (double)ok / (double)n : 0;
    free(q);
    rows_free(&r);
    return e;
}
