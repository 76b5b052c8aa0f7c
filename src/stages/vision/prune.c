/* prune.c — query-guided visual-token pruning (relevance to the question, max-min diversity,
 * greedy selection) and the spatial-downsampling baseline; the design is in prune.h. */
#include "stages/vision/prune.h"

#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIST_EPS 1e-6 /* added to D_i so that log(D) and the product form stay finite */

fr_vision_prune_params fr_vision_prune_default_params(void) {
    fr_vision_prune_params p;
    memset(&p, 0, sizeof p);
    p.keep_ratio = 1.0;
    p.max_image_tokens = FR_VISION_PRUNE_NO_BUDGET;
    p.relevance_weight = 0.5f;
    p.temperature = 0.1f;
    p.sketch_dim = 128;
    return p;
}

/* Dot product with 32 independent partial sums in a fixed order (four vector accumulators
 * without -ffast-math; fmaf becomes one FMA instruction with -mfma; the same inputs give the
 * same bits in one build). */
static float vdot(const float *a, const float *b, int n) {
    float acc[32] = {0};
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 32; l++) acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
    for (int l = 0; l < 8; l++) acc[l] = (acc[l] + acc[l + 8]) + (acc[l + 16] + acc[l + 24]);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* out[j] = a . b[j] for four rows: one pass over a, 64 partial sums. */
static int check_ratio_budget(const fr_vision_prune_params *p, fr_err *err) {
    if (!p) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: no parameters");
        return -1;
    }
    if (!(isfinite(p->keep_ratio) && p->keep_ratio > 0.0 && p->keep_ratio <= 1.0)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision prune: keep_ratio %g is not a number in (0, 1]", p->keep_ratio);
        return -1;
    }
    if (p->max_image_tokens < 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: max_image_tokens %lld is below 1",
                    (long long)p->max_image_tokens);
        return -1;
    }
    return 0;
}

/* round(ratio * n) in [1, n], before the cap. */
static int64_t ratio_count(int64_t n, double ratio) {
    double k = floor(ratio * (double)n + 0.5);
    if (k < 1) return 1;
    if (k > (double)n) return n;
    return (int64_t)k;
}

int64_t fr_vision_prune_keep_count(int64_t n, const fr_vision_prune_params *p, fr_err *err) {
    int64_t k;
    if (fr_vision_prune_keep_counts(&n, 1, p, &k, err) < 0) return -1;
    return k;
}

int fr_vision_prune_keep_counts(const int64_t *n_tokens, int n_images,
                                const fr_vision_prune_params *p, int64_t *k_out, fr_err *err) {
    if (check_ratio_budget(p, err) < 0) return -1;
    if (n_images < 1 || !n_tokens || !k_out) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: no images (%d)", n_images);
        return -1;
    }
    int64_t total = 0;
    for (int i = 0; i < n_images; i++) {
        if (n_tokens[i] < 1 || n_tokens[i] > FR_VISION_PRUNE_MAX_TOKENS) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "vision prune: image %d has %lld tokens (1..%d allowed)", i,
                        (long long)n_tokens[i], FR_VISION_PRUNE_MAX_TOKENS);
            return -1;
        }
        k_out[i] = ratio_count(n_tokens[i], p->keep_ratio);
        total += k_out[i];
    }
    if (total <= p->max_image_tokens) return 0;
    if (p->max_image_tokens < n_images) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision prune: max_image_tokens %lld is below the number of images %d (each "
                    "keeps at least one token)", (long long)p->max_image_tokens, n_images);
        return -1;
    }
    /* Each image 1, then R = cap - n_images shared in proportion to (k_i - 1), largest
     * remainders first. sum floor(quota) <= R and R < total - n_images, so k_i never grows. */
    int64_t rest = p->max_image_tokens - n_images, spare = total - n_images, given = 0;
    double *frac = fr_xmalloc((size_t)n_images * sizeof *frac);
    for (int i = 0; i < n_images; i++) {
        double q = (double)rest * (double)(k_out[i] - 1) / (double)spare;
        int64_t f = (int64_t)floor(q);
        frac[i] = q - (double)f;
        k_out[i] = 1 + f;
        given += f;
    }
    for (; given < rest; given++) {
        int best = -1;
        for (int i = 0; i < n_images; i++)
            if (frac[i] >= 0 && (best < 0 || frac[i] > frac[best])) best = i;
        FR_ASSERT(best >= 0);
        k_out[best]++;
        frac[best] = -1; /* at most one extra each: the remainders sum to < n_images */
    }
    free(frac);
    return 0;
}

static int check_input(const fr_vision_prune_input *in, const fr_vision_prune_params *p,
                       const int64_t *kept, const int32_t *kept_pos, fr_err *err) {
    if (!in || !kept) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: no input or no output buffer");
        return -1;
    }
    if (in->n < 1 || in->n > FR_VISION_PRUNE_MAX_TOKENS || !in->feat) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision prune: %lld image tokens (1..%d allowed, with features)",
                    (long long)in->n, FR_VISION_PRUNE_MAX_TOKENS);
        return -1;
    }
    if (in->d < 1 || in->d > FR_VISION_PRUNE_MAX_DIM) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: feature width %d (1..%d allowed)",
                    in->d, FR_VISION_PRUNE_MAX_DIM);
        return -1;
    }
    if (in->m < 0 || in->m > FR_VISION_PRUNE_MAX_QUERY || (in->m > 0 && !in->query)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision prune: %lld question tokens (0..%d allowed, with embeddings)",
                    (long long)in->m, FR_VISION_PRUNE_MAX_QUERY);
        return -1;
    }
    if (in->n * in->m > ((int64_t)1 << 28)) {
        fr_err_setc(err, FR_ERR_TOO_LARGE,
                    "vision prune: %lld image tokens x %lld question tokens is over 2^28",
                    (long long)in->n, (long long)in->m);
        return -1;
    }
    if (kept_pos && !in->pos) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: kept positions asked without positions");
        return -1;
    }
    if (!(isfinite(p->relevance_weight) && p->relevance_weight >= 0 && p->relevance_weight <= 1)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision prune: relevance_weight %g is not a number in [0, 1]",
                    (double)p->relevance_weight);
        return -1;
    }
    if (!(isfinite(p->temperature) && p->temperature > 0)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: temperature %g is not a number > 0",
                    (double)p->temperature);
        return -1;
    }
    if (p->sketch_dim < 0 || p->sketch_dim > FR_VISION_PRUNE_MAX_DIM) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision prune: sketch_dim %d (0..%d allowed)",
                    p->sketch_dim, FR_VISION_PRUNE_MAX_DIM);
        return -1;
    }
    for (int64_t j = 0; j < in->m; j++) {
        if (in->query_w && !(isfinite(in->query_w[j]) && in->query_w[j] >= 0)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "vision prune: question token %lld has weight %g (a number >= 0 needed)",
                        (long long)j, (double)in->query_w[j]);
            return -1;
        }
        const float *q = in->query + j * (int64_t)in->d;
        for (int c = 0; c < in->d; c++)
            if (!isfinite(q[c])) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST,
                            "vision prune: question token %lld holds a non-finite value",
                            (long long)j);
                return -1;
            }
    }
    return 0;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Scratch of one selection. */
typedef struct prune_ws {
    double *mean;   /* (d) feature mean over the tokens */
    float *meanf;   /* (d) the same in fp32 */
    float *x;       /* (n, r) centred, unit-length (sketched) features */
    float *cnorm;   /* (n) exact norm of each centred feature row */
    float *rel;     /* (n) normalised relevance */
    double *dmin;   /* (n) distance to the nearest kept token seen so far */
    double *qual;   /* (n) exp(alpha * (rel - 1)) */
    int64_t *seen;  /* (n) picks that dmin has been updated with */
    int64_t *heap;  /* (n) max-heap of candidates by their (possibly stale) score */
    int64_t *picks; /* (k) kept tokens in the order they were picked */
    float *sign;    /* (d) sketch sign of each feature index */
    float *e;       /* (d) one centred row */
    const float **qrow; /* (ma) the question tokens with a weight > 0 */
    float *qw;      /* (ma) their weights */
    int64_t ma;     /* how many */
    float *dots;    /* (n, ma) raw v_i . q_j, filled by the first pass over the features */
} prune_ws;

static void ws_free(prune_ws *w) {
    free(w->mean);
    free(w->meanf);
    free(w->x);
    free(w->cnorm);
    free(w->rel);
    free(w->dmin);
    free(w->qual);
    free(w->seen);
    free(w->heap);
    free(w->picks);
    free(w->sign);
    free(w->e);
    free(w->qrow);
    free(w->qw);
    free(w->dots);
}

static void sketch_signs(float *sign, int d) {
    for (int c = 0; c < d; c++) sign[c] = (splitmix64((uint64_t)c) >> 63) ? -1.0f : 1.0f;
}

/* Centred unit row x (r) of v (d): the centred row itself when r == d, else its count sketch
 * with bucket c mod r and a fixed random sign per feature index (inner products are kept in
 * expectation; the bucket pattern vectorises). Returns the exact centred norm. */
static float centre_row(const float *v, const float *meanf, const float *sign, int d, int r,
                        float *e, float *x) {
    for (int c = 0; c < d; c++) e[c] = v[c] - meanf[c];
    float nrm = sqrtf(vdot(e, e, d));
    if (r < d) {
        memset(x, 0, (size_t)r * sizeof *x);
        for (int c0 = 0; c0 < d; c0 += r) {
            int len = FR_MIN(r, d - c0);
            for (int j = 0; j < len; j++) x[j] += sign[c0 + j] * e[c0 + j];
        }
    } else {
        memcpy(x, e, (size_t)d * sizeof *x);
    }
    float xs = vdot(x, x, r);
    float inv = xs > 0 ? 1.0f / sqrtf(xs) : 0.0f;
    for (int j = 0; j < r; j++) x[j] *= inv;
    return nrm;
}

/* Mean, exact centred norms, and the centred unit rows x (n, r). -1 with err for a non-finite
 * feature. */
static int centre_and_sketch(const fr_vision_prune_input *in, int r, prune_ws *w, fr_err *err) {
    const int64_t n = in->n;
    const int d = in->d;
    const int64_t ma = w->ma;
    float *blk = w->e; /* fp32 partial sums of up to 32 rows, flushed into the double mean */
    memset(blk, 0, (size_t)d * sizeof *blk);
    for (int64_t i = 0; i < n; i++) { /* the mean */
        const float *v = in->feat + i * (int64_t)d;
        for (int c = 0; c < d; c++) blk[c] += v[c];
        if (i % 32 == 31 || i == n - 1) {
            for (int c = 0; c < d; c++) w->mean[c] += blk[c];
            memset(blk, 0, (size_t)d * sizeof *blk);
        }
    }
    /* the raw dots (n, ma) = features . question^T in one product (OpenBLAS): n * ma * d
     * multiply-adds, the largest fixed cost of a selection (1,024 x 10 x 3,584 at 896^2) */
    if (ma > 0) {
        float *qc = malloc((size_t)ma * (size_t)d * sizeof *qc);
        if (!qc) {
            fr_err_setc(err, FR_ERR_INTERNAL, "vision prune: out of memory");
            return -1;
        }
        for (int64_t j = 0; j < ma; j++) memcpy(qc + j * d, w->qrow[j], (size_t)d * sizeof *qc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)ma, d, 1.0f, in->feat,
                    d, qc, d, 0.0f, w->dots, (int)ma);
        free(qc);
    }
    for (int c = 0; c < d; c++) {
        if (!isfinite(w->mean[c])) { /* a NaN or infinity anywhere reaches the mean */
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "vision prune: the image features hold a non-finite value");
            return -1;
        }
        w->mean[c] /= (double)n;
        w->meanf[c] = (float)w->mean[c];
    }
    sketch_signs(w->sign, d);
    for (int64_t i = 0; i < n; i++)
        w->cnorm[i] = centre_row(in->feat + i * (int64_t)d, w->meanf, w->sign, d, r, w->e,
                                 w->x + i * (int64_t)r);
    return 0;
}

/* The question tokens that count (weight > 0) into w->qrow / w->qw / w->ma. */
static int active_query(const fr_vision_prune_input *in, prune_ws *w) {
    w->ma = 0;
    for (int64_t j = 0; j < in->m; j++) w->ma += !in->query_w || in->query_w[j] > 0;
    w->qrow = malloc((size_t)FR_MAX(w->ma, 1) * sizeof *w->qrow);
    w->qw = malloc((size_t)FR_MAX(w->ma, 1) * sizeof *w->qw);
    w->dots = malloc((size_t)in->n * (size_t)FR_MAX(w->ma, 1) * sizeof *w->dots);
    if (!w->qrow || !w->qw || !w->dots) return -1;
    int64_t a = 0;
    for (int64_t j = 0; j < in->m; j++)
        if (!in->query_w || in->query_w[j] > 0) {
            w->qrow[a] = in->query + j * (int64_t)in->d;
            w->qw[a++] = in->query_w ? in->query_w[j] : 1.0f;
        }
    return 0;
}

/* Normalised relevance into w->rel (needs the raw dots, the mean and the centred norms); the
 * raw range into rmin / rmax. */
static void relevance(const fr_vision_prune_input *in, float tau, prune_ws *w, float *rmin,
                      float *rmax) {
    const int64_t n = in->n, ma = w->ma;
    const int d = in->d;
    double wsum = 0;
    for (int64_t j = 0; j < ma; j++) wsum += w->qw[j];
    if (ma == 0 || !(wsum > 0)) {
        for (int64_t i = 0; i < n; i++) w->rel[i] = 1.0f;
        *rmin = *rmax = 0;
        return;
    }
    /* per question token: its norm and q . mean (so v - mean is never materialised) */
    float *qn = fr_xmalloc((size_t)ma * sizeof *qn);
    float *qm = fr_xmalloc((size_t)ma * sizeof *qm);
    double *s = fr_xmalloc((size_t)ma * sizeof *s);
    for (int64_t j = 0; j < ma; j++) {
        qn[j] = sqrtf(vdot(w->qrow[j], w->qrow[j], d));
        qm[j] = vdot(w->qrow[j], w->meanf, d);
    }
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const float *dt = w->dots + i * ma;
        double smax = -INFINITY;
        for (int64_t j = 0; j < ma; j++) {
            double den = (double)w->cnorm[i] * qn[j];
            s[j] = den > 0 ? ((double)dt[j] - qm[j]) / den : 0.0;
            if (s[j] > smax) smax = s[j];
        }
        double acc = 0;
        for (int64_t j = 0; j < ma; j++) acc += w->qw[j] * exp((s[j] - smax) / tau);
        float ri = (float)(smax + tau * log(acc / wsum));
        w->rel[i] = ri;
        if (ri < lo) lo = ri;
        if (ri > hi) hi = ri;
    }
    *rmin = lo;
    *rmax = hi;
    float span = hi - lo;
    for (int64_t i = 0; i < n; i++) w->rel[i] = span > 0 ? (w->rel[i] - lo) / span : 1.0f;
    free(qn);
    free(qm);
    free(s);
}

/* Candidate order: score, then relevance, then the lower index (a strict total order). */
static bool key_gt(const prune_ws *w, const double *score, int64_t a, int64_t b) {
    if (score[a] != score[b]) return score[a] > score[b];
    if (w->rel[a] != w->rel[b]) return w->rel[a] > w->rel[b];
    return a < b;
}

static void sift_down(prune_ws *w, const double *score, int64_t size, int64_t at) {
    for (;;) {
        int64_t l = 2 * at + 1, r = l + 1, top = at;
        if (l < size && key_gt(w, score, w->heap[l], w->heap[top])) top = l;
        if (r < size && key_gt(w, score, w->heap[r], w->heap[top])) top = r;
        if (top == at) return;
        int64_t t = w->heap[at];
        w->heap[at] = w->heap[top];
        w->heap[top] = t;
        at = top;
    }
}

/* k greedy steps (prune.h, step 3), lazily: a token's score q_i (D_i + eps) never grows as
 * tokens are kept, so the heap holds upper bounds; the top is brought up to date with the picks
 * made since it was last looked at, and it is kept when it is still on top. This picks exactly
 * what the plain loop over all candidates picks, with far fewer distance evaluations. */
static void select_greedy(int64_t n, int r, int64_t k, float theta, prune_ws *w, double *score) {
    const bool rel_only = theta >= 1.0f;
    const double alpha = rel_only ? 0 : (double)theta / (1.0 - (double)theta);
    for (int64_t i = 0; i < n; i++) {
        w->dmin[i] = 1.0;
        w->seen[i] = 0;
        w->qual[i] = rel_only ? 0 : exp(alpha * ((double)w->rel[i] - 1.0));
        score[i] = rel_only ? (double)w->rel[i] : w->qual[i] * (1.0 + DIST_EPS);
        w->heap[i] = i;
    }
    int64_t size = n, np = 0;
    for (int64_t at = n / 2 - 1; at >= 0; at--) sift_down(w, score, size, at);
    while (np < k) {
        int64_t i = w->heap[0];
        if (rel_only || w->seen[i] == np) { /* up to date and on top: keep it */
            w->picks[np++] = i;
            w->heap[0] = w->heap[--size];
            sift_down(w, score, size, 0);
            continue;
        }
        const float *xi = w->x + i * (int64_t)r;
        for (int64_t t = w->seen[i]; t < np; t++) {
            double dist = 0.5 * (1.0 - (double)vdot(xi, w->x + w->picks[t] * (int64_t)r, r));
            if (dist < w->dmin[i]) w->dmin[i] = dist > 0 ? dist : 0;
        }
        w->seen[i] = np;
        score[i] = w->qual[i] * (w->dmin[i] + DIST_EPS);
        sift_down(w, score, size, 0);
    }
}

/* Allocates the scratch; -1 with err (FR_ERR_INTERNAL) when memory runs out. */
static int ws_alloc(prune_ws *w, const fr_vision_prune_input *in, int r, int64_t k,
                    fr_err *err) {
    const int64_t n = in->n;
    const int d = in->d;
    memset(w, 0, sizeof *w);
    w->mean = calloc((size_t)d, sizeof *w->mean);
    w->meanf = malloc((size_t)d * sizeof *w->meanf);
    w->x = malloc((size_t)n * (size_t)r * sizeof *w->x);
    w->cnorm = malloc((size_t)n * sizeof *w->cnorm);
    w->rel = malloc((size_t)n * sizeof *w->rel);
    w->dmin = malloc((size_t)n * sizeof *w->dmin);
    w->qual = malloc((size_t)n * sizeof *w->qual);
    w->seen = malloc((size_t)n * sizeof *w->seen);
    w->heap = malloc((size_t)n * sizeof *w->heap);
    w->picks = malloc((size_t)FR_MAX(k, 1) * sizeof *w->picks);
    w->sign = malloc((size_t)d * sizeof *w->sign);
    w->e = malloc((size_t)d * sizeof *w->e);
    if (w->mean && w->meanf && w->x && w->cnorm && w->rel && w->dmin && w->qual && w->seen &&
        w->heap && w->picks && w->sign && w->e && active_query(in, w) == 0)
        return 0;
    ws_free(w);
    fr_err_setc(err, FR_ERR_INTERNAL, "vision prune: out of memory for %lld x %d scratch",
                (long long)n, r);
    return -1;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t fr_vision_prune_select(const fr_vision_prune_input *in, const fr_vision_prune_params *p,
                               int64_t *kept, int32_t *kept_pos, float *relevance_out,
                               fr_vision_prune_report *rep, fr_err *err) {
    double t0 = fr_time_s();
    if (check_ratio_budget(p, err) < 0 || check_input(in, p, kept, kept_pos, err) < 0) return -1;
    int64_t k = fr_vision_prune_keep_count(in->n, p, err);
    if (k < 0) return -1;
    const int64_t n = in->n;
    const int d = in->d;
    const int r = (p->sketch_dim > 0 && d > p->sketch_dim) ? p->sketch_dim : d;
    float rmin = 0, rmax = 0, relk = 1;
    if (k == n && !relevance_out) { /* nothing to choose: the features are not read */
        for (int64_t i = 0; i < n; i++) kept[i] = i;
    } else {
        prune_ws w;
        if (ws_alloc(&w, in, r, k, err) < 0) return -1;
        if (centre_and_sketch(in, r, &w, err) < 0) {
            ws_free(&w);
            return -1;
        }
        relevance(in, p->temperature, &w, &rmin, &rmax);
        double *score = malloc((size_t)n * sizeof *score);
        if (!score) {
            ws_free(&w);
            fr_err_setc(err, FR_ERR_INTERNAL, "vision prune: out of memory");
            return -1;
        }
        select_greedy(n, r, k, p->relevance_weight, &w, score);
        free(score);
        memcpy(kept, w.picks, (size_t)k * sizeof *kept);
        qsort(kept, (size_t)k, sizeof *kept, cmp_i64);
        double acc = 0;
        for (int64_t t = 0; t < k; t++) acc += w.rel[kept[t]];
        relk = (float)(acc / (double)k);
        if (relevance_out) memcpy(relevance_out, w.rel, (size_t)n * sizeof *relevance_out);
        ws_free(&w);
    }
    if (kept_pos)
        for (int a = 0; a < 3; a++)
            for (int64_t t = 0; t < k; t++) kept_pos[a * k + t] = in->pos[a * n + kept[t]];
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->n = n;
        rep->n_kept = k;
        rep->rel_min = rmin;
        rep->rel_max = rmax;
        rep->kept_relevance = relk;
        rep->sketch_dim = r;
        rep->ms = (fr_time_s() - t0) * 1e3;
    }
    return k;
}

double fr_vision_prune_coverage(const float *feat, int64_t n, int d, const int64_t *kept,
                                int64_t k, int sketch_dim, fr_err *err) {
    if (!feat || !kept || n < 1 || n > FR_VISION_PRUNE_MAX_TOKENS || d < 1 ||
        d > FR_VISION_PRUNE_MAX_DIM || k < 1 || k > n || sketch_dim < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision coverage: bad arguments (n %lld, d %d, k %lld)",
                    (long long)n, d, (long long)k);
        return -1;
    }
    for (int64_t t = 0; t < k; t++)
        if (kept[t] < 0 || kept[t] >= n) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision coverage: index %lld out of range",
                        (long long)kept[t]);
            return -1;
        }
    const int r = (sketch_dim > 0 && d > sketch_dim) ? sketch_dim : d;
    fr_vision_prune_input in = {.feat = feat, .n = n, .d = d};
    prune_ws w;
    if (ws_alloc(&w, &in, r, k, err) < 0) return -1;
    if (centre_and_sketch(&in, r, &w, err) < 0) {
        ws_free(&w);
        return -1;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double best = 1.0;
        for (int64_t t = 0; t < k; t++) {
            double dist = kept[t] == i ? 0.0
                                       : 0.5 * (1.0 - (double)vdot(w.x + i * (int64_t)r,
                                                                   w.x + kept[t] * (int64_t)r, r));
            if (dist < best) best = dist > 0 ? dist : 0;
        }
        sum += best;
    }
    ws_free(&w);
    return sum / (double)n;
}

void fr_vision_prune_gather(const float *feat, int64_t n, int d, const int64_t *kept, int64_t k,
                            float *out) {
    for (int64_t t = 0; t < k; t++) {
        FR_ASSERT(kept[t] >= 0 && kept[t] < n);
        memcpy(out + t * (int64_t)d, feat + kept[t] * (int64_t)d, (size_t)d * sizeof *out);
    }
}

bool fr_vision_prune_is_stopword(const char *piece, size_t len) {
    static const char *const words[] = {
        "a", "an", "the", "is", "are", "was", "were", "be", "been", "am", "do", "does", "did",
        "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "as", "it",
        "its", "this", "that", "these", "those", "there", "here", "i", "you", "me", "my", "your",
        "we", "our", "he", "she", "they", "them", "his", "her", "their", "can", "could", "would",
        "should", "will", "shall", "may", "might", "must", "please", "tell", "what", "which",
        "who", "whom", "whose", "how", "s", "image", "picture", "photo"};
    char w[16];
    size_t a = 0, b = len;
    if (!piece) return true;
    while (a < b && (isspace((unsigned char)piece[a]) || ispunct((unsigned char)piece[a]))) a++;
    while (b > a && (isspace((unsigned char)piece[b - 1]) || ispunct((unsigned char)piece[b - 1])))
        b--;
    if (a == b) return true;
    if (b - a >= sizeof w) return false;
    for (size_t i = a; i < b; i++) {
        unsigned char c = (unsigned char)piece[i];
        if (c >= 0x80) return false;
        w[i - a] = (char)tolower(c);
    }
    w[b - a] = 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(words); i++)
        if (!strcmp(w, words[i])) return true;
    return false;
}

/* ---- downsampling baseline ---------------------------------------------------------------- */

/* t * h * w, or -1 with err for a side < 1 or more than FR_VISION_PRUNE_MAX_TOKENS tokens. */
static int64_t grid_tokens(int gt, int gh, int gw, fr_err *err) {
    if (gt < 1 || gh < 1 || gw < 1 || gt > FR_VISION_PRUNE_MAX_TOKENS ||
        gh > FR_VISION_PRUNE_MAX_TOKENS || gw > FR_VISION_PRUNE_MAX_TOKENS ||
        (int64_t)gt * gh * gw > FR_VISION_PRUNE_MAX_TOKENS) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision downsample: grid %dx%dx%d (sides >= 1, at most %d tokens)", gt, gh, gw,
                    FR_VISION_PRUNE_MAX_TOKENS);
        return -1;
    }
    return (int64_t)gt * gh * gw;
}

/* Calls fn(ctx, frame, r0, r1, c0, c1, out_index) for each of the k cells, in order. */
typedef void (*cell_fn)(void *ctx, int64_t frame_base, int r0, int r1, int c0, int c1, int w,
                        int64_t out);

static int64_t for_each_cell(int gt, int gh, int gw, int64_t k, cell_fn fn, void *ctx,
                             fr_err *err) {
    int64_t n = grid_tokens(gt, gh, gw, err);
    if (n < 0) return -1;
    if (k < 1 || k > n) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision downsample: %lld tokens asked of %lld",
                    (long long)k, (long long)n);
        return -1;
    }
    int64_t out = 0;
    for (int f = 0; f < gt; f++) {
        int64_t kf = (f + 1) * k / gt - f * k / gt; /* k shared over the frames */
        if (kf == 0) continue;
        int64_t lo = (kf + gw - 1) / gw, hi = FR_MIN((int64_t)gh, kf);
        int64_t hb = (int64_t)floor(sqrt((double)kf * gh / gw) + 0.5);
        if (hb < lo) hb = lo;
        if (hb > hi) hb = hi;
        for (int64_t b = 0; b < hb; b++) {
            int r0 = (int)(b * gh / hb), r1 = (int)((b + 1) * gh / hb);
            int64_t cb = (b + 1) * kf / hb - b * kf / hb;
            for (int64_t c = 0; c < cb; c++) {
                int c0 = (int)(c * gw / cb), c1 = (int)((c + 1) * gw / cb);
                fn(ctx, (int64_t)f * gh * gw, r0, r1, c0, c1, gw, out++);
            }
        }
    }
    FR_ASSERT(out == k);
    return k;
}

static void stride_cell(void *ctx, int64_t base, int r0, int r1, int c0, int c1, int w,
                        int64_t out) {
    int64_t *kept = ctx;
    kept[out] = base + (int64_t)((r0 + r1 - 1) / 2) * w + (c0 + c1 - 1) / 2;
}

int64_t fr_vision_downsample_stride(int grid_t, int grid_h, int grid_w, int64_t k, int64_t *kept,
                                    fr_err *err) {
    if (!kept) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision downsample: no output buffer");
        return -1;
    }
    return for_each_cell(grid_t, grid_h, grid_w, k, stride_cell, kept, err);
}

typedef struct pool_ctx {
    const float *feat; /* (n, d) */
    int d;
    const int32_t *pos; /* (3, n) or NULL */
    int64_t n, k;
    float *out;        /* (k, d) */
    int32_t *out_pos;  /* (3, k) or NULL */
    double *acc;       /* (d) */
} pool_ctx;

static void pool_cell(void *ctx, int64_t base, int r0, int r1, int c0, int c1, int w,
                      int64_t out) {
    pool_ctx *p = ctx;
    memset(p->acc, 0, (size_t)p->d * sizeof *p->acc);
    for (int y = r0; y < r1; y++)
        for (int x = c0; x < c1; x++) {
            const float *v = p->feat + (base + (int64_t)y * w + x) * p->d;
            for (int c = 0; c < p->d; c++) p->acc[c] += v[c];
        }
    double inv = 1.0 / ((double)(r1 - r0) * (double)(c1 - c0));
    float *o = p->out + out * p->d;
    for (int c = 0; c < p->d; c++) o[c] = (float)(p->acc[c] * inv);
    if (p->out_pos) {
        int64_t centre = base + (int64_t)((r0 + r1 - 1) / 2) * w + (c0 + c1 - 1) / 2;
        for (int a = 0; a < 3; a++) p->out_pos[a * p->k + out] = p->pos[a * p->n + centre];
    }
}

int64_t fr_vision_downsample_pool(const float *feat, int d, const int32_t *pos, int grid_t,
                                  int grid_h, int grid_w, int64_t k, float *out_feat,
                                  int32_t *out_pos, fr_err *err) {
    if (!feat || !out_feat || d < 1 || d > FR_VISION_PRUNE_MAX_DIM || (!pos != !out_pos)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision downsample: missing buffers or feature width %d (1..%d)", d,
                    FR_VISION_PRUNE_MAX_DIM);
        return -1;
    }
    int64_t n = grid_tokens(grid_t, grid_h, grid_w, err);
    if (n < 0) return -1;
    pool_ctx c = {feat, d, pos, n, k, out_feat, out_pos, NULL};
    c.acc = fr_xmalloc((size_t)d * sizeof *c.acc);
    int64_t r = for_each_cell(grid_t, grid_h, grid_w, k, pool_cell, &c, err);
    free(c.acc);
    return r;
}
