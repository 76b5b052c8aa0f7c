/* intent_train.c — see intent_train.h. CSV reading, stratified split, TF-IDF vocabulary over
 * hashed buckets, and deterministic mini-batch Adam training of the ensemble members. */
#include "stages/nlu/intent_train.h"

#include <math.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/nlu/intent_impl.h"
#include "stages/nlu/intent_multi.h"

/* ---------- CSV ---------- */

/* Parse one CSV field starting at *p (RFC 4180); appends it to out. Returns 1 if the record
 * continues (comma), 0 at end of record, -1 on a quoting error. */
static int csv_field(const char **p, const char *end, fr_buf *out) {
    const char *s = *p;
    out->len = 0;
    if (s < end && *s == '"') {
        s++;
        for (;;) {
            if (s >= end) return -1;
            if (*s == '"') {
                if (s + 1 < end && s[1] == '"') {
                    fr_buf_append(out, "\"", 1);
                    s += 2;
                    continue;
                }
                s++;
                break;
            }
            fr_buf_append(out, s, 1);
            s++;
        }
    } else {
        const char *b = s;
        while (s < end && *s != ',' && *s != '\n' && *s != '\r') s++;
        fr_buf_append(out, b, (size_t)(s - b));
    }
    fr_buf_cstr(out);
    if (s < end && *s == ',') {
        *p = s + 1;
        return 1;
    }
    if (s < end && *s == '\r') s++;
    if (s < end && *s == '\n') s++;
    else if (s < end) return -1; /* junk after a closing quote */
    *p = s;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void fr_intent_data_free(fr_intent_data *d) {
    for (size_t i = 0; i < d->n; i++) free(d->texts[i]);
    free(d->texts);
    free(d->labels);
    for (int i = 0; i < d->n_labels; i++) free(d->names[i]);
    free(d->names);
    free(d->multi);
    free(d->group);
    memset(d, 0, sizeof *d);
}

int fr_intent_data_load_csv(fr_intent_data *d, const char *path, fr_err *err) {
    memset(d, 0, sizeof *d);
    size_t len;
    char *buf = fr_read_file(path, (size_t)1 << 30, &len, err);
    if (!buf) return -1;
    const char *p = buf, *end = buf + len;
    if (len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3;
    fr_buf f = {0};
    /* header */
    int ncol = 0, tcol = -1, lcol = -1, r;
    do {
        r = csv_field(&p, end, &f);
        if (r < 0) break;
        if (!strcmp(f.data, "text") && tcol < 0) tcol = ncol;
        if ((!strcmp(f.data, "category") || !strcmp(f.data, "label") || !strcmp(f.data, "intent")) && lcol < 0)
            lcol = ncol;
        ncol++;
    } while (r == 1);
    if (r < 0 || ncol < 2) {
        fr_err_set(err, "%s: bad CSV header (need a text and a label column)", path);
        free(f.data);
        free(buf);
        return -1;
    }
    if (tcol < 0) tcol = 0;
    if (lcol < 0) lcol = ncol - 1;
    size_t cap = 1024, line = 1;
    char **texts = fr_xmalloc(cap * sizeof *texts), **labs = fr_xmalloc(cap * sizeof *labs);
    size_t n = 0;
    int rc = 0;
    while (p < end) {
        line++;
        if (*p == '\n' || *p == '\r') { /* blank line */
            p += (*p == '\r' && p + 1 < end && p[1] == '\n') ? 2 : 1;
            continue;
        }
        char *t = NULL, *l = NULL;
        int col = 0;
        do {
            r = csv_field(&p, end, &f);
            if (r < 0) break;
            if (col == tcol) t = fr_xstrdup(f.data);
            if (col == lcol) l = fr_xstrdup(f.data);
            col++;
        } while (r == 1);
        if (r < 0 || !t || !l || !*l) {
            fr_err_set(err, "%s: record near line %zu: %s", path, line,
                       r < 0 ? "bad quoting" : "missing text or label");
            free(t);
            free(l);
            rc = -1;
            break;
        }
        if (n == cap) {
            cap *= 2;
            texts = fr_xrealloc(texts, cap * sizeof *texts);
            labs = fr_xrealloc(labs, cap * sizeof *labs);
        }
        texts[n] = t;
        labs[n] = l;
        n++;
    }
    free(f.data);
    free(buf);
    if (rc == 0 && n == 0) {
        fr_err_set(err, "%s: no examples", path);
        rc = -1;
    }
    if (rc == 0) {
        char **sorted = fr_xmalloc(n * sizeof *sorted);
        memcpy(sorted, labs, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_str);
        int nl = 0;
        for (size_t i = 0; i < n; i++)
            if (i == 0 || strcmp(sorted[i], sorted[i - 1])) sorted[nl++] = sorted[i];
        d->names = fr_xmalloc((size_t)nl * sizeof *d->names);
        for (int i = 0; i < nl; i++) d->names[i] = fr_xstrdup(sorted[i]);
        d->n_labels = nl;
        free(sorted);
        d->labels = fr_xmalloc(n * sizeof *d->labels);
        for (size_t i = 0; i < n; i++) {
            char **hit = bsearch(&labs[i], d->names, (size_t)nl, sizeof *d->names, cmp_str);
            FR_ASSERT(hit);
            d->labels[i] = (int)(hit - d->names);
        }
        d->texts = texts;
        d->n = n;
        for (size_t i = 0; i < n; i++) free(labs[i]);
        free(labs);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        free(texts[i]);
        free(labs[i]);
    }
    free(texts);
    free(labs);
    return -1;
}

int fr_intent_data_add_lines(fr_intent_data *d, const char *dir, const char *label, fr_err *err) {
    if (d->multi) {
        fr_err_set(err, "%s: lines cannot be added to a multi-label data set", dir);
        return -1;
    }
    char **files = NULL;
    size_t nfiles = 0;
    DIR *dp = opendir(dir);
    if (dp) {
        struct dirent *de;
        while ((de = readdir(dp))) {
            size_t l = strlen(de->d_name);
            if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
            files = fr_xrealloc(files, (nfiles + 1) * sizeof *files);
            size_t pl = strlen(dir) + l + 2;
            files[nfiles] = fr_xmalloc(pl);
            snprintf(files[nfiles++], pl, "%s/%s", dir, de->d_name);
        }
        closedir(dp);
        if (nfiles) qsort(files, nfiles, sizeof *files, cmp_str);
    } else {
        files = fr_xmalloc(sizeof *files);
        files[nfiles++] = fr_xstrdup(dir);
    }
    /* the label's index, inserted in sorted position */
    int li = -1;
    for (int l = 0; l < d->n_labels; l++)
        if (!strcmp(d->names[l], label)) li = l;
    if (li < 0) {
        li = 0;
        while (li < d->n_labels && strcmp(d->names[li], label) < 0) li++;
        d->names = fr_xrealloc(d->names, (size_t)(d->n_labels + 1) * sizeof *d->names);
        memmove(d->names + li + 1, d->names + li, (size_t)(d->n_labels - li) * sizeof *d->names);
        d->names[li] = fr_xstrdup(label);
        d->n_labels++;
        for (size_t i = 0; i < d->n; i++)
            if (d->labels[i] >= li) d->labels[i]++;
    }
    size_t added = 0;
    int rc = 0;
    for (size_t f = 0; f < nfiles && !rc; f++) {
        size_t len;
        char *buf = fr_read_file(files[f], (size_t)64 << 20, &len, err);
        if (!buf) {
            rc = -1;
            break;
        }
        for (char *p = buf, *e; p < buf + len; p = e + 1) {
            e = memchr(p, '\n', (size_t)(buf + len - p));
            if (!e) e = buf + len;
            size_t l = (size_t)(e - p);
            while (l && (p[l - 1] == '\r' || p[l - 1] == ' ')) l--;
            if (!l) continue;
            d->texts = fr_xrealloc(d->texts, (d->n + 1) * sizeof *d->texts);
            d->labels = fr_xrealloc(d->labels, (d->n + 1) * sizeof *d->labels);
            d->texts[d->n] = fr_xstrndup(p, l);
            d->labels[d->n] = li;
            d->n++;
            added++;
        }
        free(buf);
    }
    for (size_t f = 0; f < nfiles; f++) free(files[f]);
    free(files);
    if (!rc && !added) {
        fr_err_set(err, "%s: no examples (a folder of .txt files, one example per line)", dir);
        rc = -1;
    }
    return rc;
}

/* ---------- split ---------- */

static inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Sequential generator: state advances by the golden gamma, output is the splitmix64 mix. */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t r = splitmix64(*s);
    *s += 0x9e3779b97f4a7c15ULL;
    return r;
}
static inline float rng_unif(uint64_t *s) { return (float)(rng_next(s) >> 40) * (1.0f / 16777216.0f); }

typedef struct {
    uint64_t key; /* hash order key */
    size_t idx;   /* row */
} keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void fr_intent_split3(const fr_intent_data *d, double val_frac, double calib_frac, uint64_t seed,
                      uint8_t *mark) {
    memset(mark, 0, d->n);
    if (val_frac <= 0 && calib_frac <= 0) return;
    keyed *k = fr_xmalloc((d->n + 1) * sizeof *k);
    for (int l = 0; l < d->n_labels; l++) {
        size_t m = 0;
        for (size_t i = 0; i < d->n; i++)
            if (d->labels[i] == l) {
                k[m].key = splitmix64((seed * 0x100000001b3ULL) ^ (uint64_t)i);
                k[m].idx = i;
                m++;
            }
        qsort(k, m, sizeof *k, cmp_keyed);
        size_t take = val_frac > 0 ? (size_t)floor((double)m * val_frac + 0.5) : 0;
        if (take >= m && m > 0) take = m - 1; /* keep one training row per label */
        size_t cal = calib_frac > 0 ? (size_t)floor((double)m * calib_frac + 0.5) : 0;
        if (take + cal >= m && m > 0) cal = m - 1 - take;
        for (size_t j = 0; j < take; j++) mark[k[j].idx] = 1;
        for (size_t j = take; j < take + cal; j++) mark[k[j].idx] = 2;
    }
    free(k);
}

void fr_intent_split(const fr_intent_data *d, double frac, uint64_t seed, uint8_t *is_val) {
    fr_intent_split3(d, frac, 0, seed, is_val);
}

/* ---------- vectors ---------- */

/* Sparse vectors of a set of examples (CSR). */
typedef struct {
    size_t n;      /* examples */
    size_t *off;   /* [n+1] entry offsets */
    int32_t *rows; /* entries' rows */
    float *vals;   /* entries' values */
    int *y;        /* [n] labels */
    size_t *src;   /* [n] row in the data set */
    const uint8_t *multi; /* the data set's multi-hot rows (index by src), or NULL */
} csr;

static void csr_free(csr *c) {
    free(c->off);
    free(c->rows);
    free(c->vals);
    free(c->y);
    free(c->src);
}

static void csr_build(csr *c, const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                      int want) {
    memset(c, 0, sizeof *c);
    size_t cnt = 0;
    for (size_t i = 0; i < d->n; i++) cnt += (mask ? mask[i] : 0) == want;
    c->off = fr_xmalloc((cnt + 1) * sizeof *c->off);
    c->y = fr_xmalloc((cnt + 1) * sizeof *c->y);
    c->src = fr_xmalloc((cnt + 1) * sizeof *c->src);
    c->multi = d->multi;
    size_t cap = 1 << 16, nnz = 0;
    c->rows = fr_xmalloc(cap * sizeof *c->rows);
    c->vals = fr_xmalloc(cap * sizeof *c->vals);
    fr_feat_scratch s = {0};
    c->off[0] = 0;
    for (size_t i = 0; i < d->n; i++) {
        if ((mask ? mask[i] : 0) != want) continue;
        size_t nf = fr_feat_extract(&m->feat, d->texts[i], strlen(d->texts[i]), &s);
        while (nnz + nf > cap) {
            cap *= 2;
            c->rows = fr_xrealloc(c->rows, cap * sizeof *c->rows);
            c->vals = fr_xrealloc(c->vals, cap * sizeof *c->vals);
        }
        nnz += fr_intent_vectorize(m, s.feats, nf, c->rows + nnz, c->vals + nnz);
        c->y[c->n] = d->labels[i];
        c->src[c->n] = i;
        c->off[++c->n] = nnz;
    }
    fr_feat_scratch_free(&s);
}

/* ---------- member training ---------- */

/* Shared read-only state of one training run. */
typedef struct {
    const fr_intent_train_cfg *cfg; /* settings */
    const fr_intent_model *m;       /* rows, idf, labels (members not yet set) */
    const csr *tr, *va;             /* training and validation vectors */
    pthread_mutex_t *print_lock;    /* serialises progress lines */
} train_ctx;

/* Float parameters of a member under training. */
typedef struct {
    uint32_t d, h, c, nr;   /* first-layer width, hidden (0 linear), labels, rows */
    float *w1, *b1, *w2, *b2; /* parameters */
} fparams;

/* Probabilities (into z) for example e; pre/hid get the pre-activations and (dropped-out) hidden
 * layer when non-NULL mask is given. */
static void fwd(const fparams *P, const csr *X, size_t e, float *pre, float *hid, const float *mask,
                float *z) {
    uint32_t d = P->d, c = P->c;
    if (P->h) memcpy(pre, P->b1, d * sizeof *pre);
    else memcpy(pre, P->b2, d * sizeof *pre);
    for (size_t k = X->off[e]; k < X->off[e + 1]; k++) {
        const float *w = P->w1 + (size_t)X->rows[k] * d;
        float v = X->vals[k];
        for (uint32_t j = 0; j < d; j++) pre[j] += v * w[j];
    }
    if (P->h) {
        for (uint32_t j = 0; j < d; j++) {
            float a = pre[j] > 0 ? pre[j] : 0;
            hid[j] = mask ? a * mask[j] : a;
        }
        for (uint32_t k = 0; k < c; k++) {
            const float *w = P->w2 + (size_t)k * d;
            float s = P->b2[k];
            for (uint32_t j = 0; j < d; j++) s += w[j] * hid[j];
            z[k] = s;
        }
    } else {
        memcpy(z, pre, c * sizeof *z);
    }
    if (X->multi) fr_intent_sigmoid(z, c);
    else fr_intent_softmax(z, c);
}

/* Multi-hot labels of example e of X. */
static const uint8_t *multi_of(const csr *X, size_t e, uint32_t c) { return X->multi + X->src[e] * c; }

/* Micro-F1 counts of one multi-label prediction at threshold 0.5. */
static void f1_counts(const float *z, const uint8_t *y, uint32_t c, size_t *tp, size_t *np, size_t *ng) {
    for (uint32_t k = 0; k < c; k++) {
        int p = z[k] >= 0.5f;
        *tp += (size_t)(p && y[k]);
        *np += (size_t)p;
        *ng += y[k];
    }
}

static int argmax(const float *z, uint32_t n) {
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (z[i] > z[b]) b = (int)i;
    return b;
}

static double eval_float(const fparams *P, const csr *X, float *pre, float *hid, float *z) {
    if (!X->n) return 0;
    size_t ok = 0, tp = 0, np = 0, ng = 0;
    for (size_t e = 0; e < X->n; e++) {
        fwd(P, X, e, pre, hid, NULL, z);
        if (X->multi) f1_counts(z, multi_of(X, e, P->c), P->c, &tp, &np, &ng);
        else ok += argmax(z, P->c) == X->y[e];
    }
    if (X->multi) return np + ng ? 2.0 * (double)tp / (double)(np + ng) : 0;
    return (double)ok / (double)X->n;
}

static inline void adam(float *w, float *mo, float *ve, const float *g, size_t n, float lr, float wd,
                        float bc1, float bc2) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    for (size_t i = 0; i < n; i++) {
        mo[i] = b1 * mo[i] + (1 - b1) * g[i];
        ve[i] = b2 * ve[i] + (1 - b2) * g[i] * g[i];
        float mh = mo[i] / bc1, vh = ve[i] / bc2;
        w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[i]);
    }
}

typedef struct {
    const train_ctx *ctx; /* shared state */
    int k;                /* member index */
    fparams P;            /* trained parameters (output) */
    double val_acc;       /* float validation accuracy (output) */
} member_job;

static void train_member(member_job *job) {
    const train_ctx *ctx = job->ctx;
    const fr_intent_member_cfg *mc = &ctx->cfg->member[job->k];
    const csr *tr = ctx->tr;
    fparams *P = &job->P;
    P->c = ctx->m->n_labels;
    P->h = mc->hidden;
    P->d = mc->hidden ? mc->hidden : P->c;
    P->nr = ctx->m->n_rows;
    uint32_t d = P->d, c = P->c, h = P->h;
    size_t nw1 = (size_t)P->nr * d;
    uint64_t rng = splitmix64(ctx->cfg->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)job->k * 7919 + 17);

    P->w1 = fr_xcalloc(nw1, sizeof *P->w1);
    float *m1 = fr_xcalloc(nw1, sizeof *m1), *v1 = fr_xcalloc(nw1, sizeof *v1);
    P->b2 = fr_xcalloc(c, sizeof *P->b2);
    float *mb2 = fr_xcalloc(c, sizeof *mb2), *vb2 = fr_xcalloc(c, sizeof *vb2), *gb2 = fr_xcalloc(c, sizeof *gb2);
    float *mb1 = NULL, *vb1 = NULL, *gb1 = NULL, *mw2 = NULL, *vw2 = NULL, *gw2 = NULL;
    if (h) {
        for (size_t i = 0; i < nw1; i++) P->w1[i] = (2 * rng_unif(&rng) - 1) * mc->init;
        P->b1 = fr_xcalloc(h, sizeof *P->b1);
        P->w2 = fr_xmalloc((size_t)c * h * sizeof *P->w2);
        float a = sqrtf(6.0f / (float)(h + c));
        for (size_t i = 0; i < (size_t)c * h; i++) P->w2[i] = (2 * rng_unif(&rng) - 1) * a;
        mb1 = fr_xcalloc(h, sizeof *mb1);
        vb1 = fr_xcalloc(h, sizeof *vb1);
        gb1 = fr_xcalloc(h, sizeof *gb1);
        mw2 = fr_xcalloc((size_t)c * h, sizeof *mw2);
        vw2 = fr_xcalloc((size_t)c * h, sizeof *vw2);
        gw2 = fr_xcalloc((size_t)c * h, sizeof *gw2);
    }
    /* sparse gradient of the first layer: slot per touched row */
    int32_t *slot_of = fr_xmalloc((size_t)P->nr * sizeof *slot_of);
    for (uint32_t r = 0; r < P->nr; r++) slot_of[r] = -1;
    size_t slot_cap = 4096, n_slots = 0;
    int32_t *slot_row = fr_xmalloc(slot_cap * sizeof *slot_row);
    float *gslot = fr_xmalloc(slot_cap * d * sizeof *gslot);

    float *pre = fr_xmalloc(d * sizeof *pre), *hid = fr_xmalloc(d * sizeof *hid);
    float *mask = fr_xmalloc(d * sizeof *mask), *z = fr_xmalloc(c * sizeof *z);
    float *dz = fr_xmalloc(c * sizeof *dz), *dpre = fr_xmalloc(d * sizeof *dpre);
    size_t *order = fr_xmalloc((tr->n + 1) * sizeof *order);
    for (size_t i = 0; i < tr->n; i++) order[i] = i;

    uint32_t B = mc->batch ? mc->batch : 32;
    size_t steps_per_epoch = (tr->n + B - 1) / B, total = steps_per_epoch * mc->epochs, step = 0;
    double t0 = fr_time_s();
    for (uint32_t ep = 0; ep < mc->epochs; ep++) {
        for (size_t i = tr->n; i > 1; i--) { /* Fisher-Yates */
            size_t j = (size_t)(rng_next(&rng) % i);
            size_t t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        double loss_sum = 0;
        size_t ok = 0, ftp = 0, fnp = 0, fng = 0;
        for (size_t b0 = 0; b0 < tr->n; b0 += B) {
            size_t b1 = FR_MIN(b0 + B, tr->n);
            float inv = 1.0f / (float)(b1 - b0);
            memset(gb2, 0, c * sizeof *gb2);
            if (h) {
                memset(gb1, 0, h * sizeof *gb1);
                memset(gw2, 0, (size_t)c * h * sizeof *gw2);
            }
            for (size_t bi = b0; bi < b1; bi++) {
                size_t e = order[bi];
                if (h) {
                    float keep = 1.0f - mc->dropout;
                    for (uint32_t j = 0; j < h; j++)
                        mask[j] = (mc->dropout > 0 && rng_unif(&rng) >= keep) ? 0.0f : 1.0f / keep;
                }
                fwd(P, tr, e, pre, hid, h ? mask : NULL, z);
                if (tr->multi) { /* binary cross-entropy per label */
                    const uint8_t *ym = multi_of(tr, e, c);
                    f1_counts(z, ym, c, &ftp, &fnp, &fng);
                    for (uint32_t k = 0; k < c; k++) {
                        loss_sum += -log((double)(ym[k] ? z[k] : 1 - z[k]) + 1e-12);
                        dz[k] = (z[k] - (float)ym[k]) * inv;
                    }
                } else {
                    int y = tr->y[e];
                    ok += argmax(z, c) == y;
                    loss_sum += -log((double)z[y] + 1e-12);
                    float off = mc->smooth / (float)c;
                    for (uint32_t k = 0; k < c; k++)
                        dz[k] = (z[k] - off - (k == (uint32_t)y ? 1 - mc->smooth : 0)) * inv;
                }
                const float *gfirst;
                for (uint32_t k = 0; k < c; k++) gb2[k] += dz[k];
                if (h) {
                    for (uint32_t k = 0; k < c; k++) {
                        float g = dz[k];
                        float *gw = gw2 + (size_t)k * h;
                        for (uint32_t j = 0; j < h; j++) gw[j] += g * hid[j];
                    }
                    for (uint32_t j = 0; j < h; j++) dpre[j] = 0;
                    for (uint32_t k = 0; k < c; k++) {
                        float g = dz[k];
                        const float *w = P->w2 + (size_t)k * h;
                        for (uint32_t j = 0; j < h; j++) dpre[j] += g * w[j];
                    }
                    for (uint32_t j = 0; j < h; j++) {
                        dpre[j] = pre[j] > 0 ? dpre[j] * mask[j] : 0;
                        gb1[j] += dpre[j];
                    }
                    gfirst = dpre;
                } else {
                    gfirst = dz;
                }
                for (size_t q = tr->off[e]; q < tr->off[e + 1]; q++) {
                    int32_t r = tr->rows[q];
                    if (slot_of[r] < 0) {
                        if (n_slots == slot_cap) {
                            slot_cap *= 2;
                            slot_row = fr_xrealloc(slot_row, slot_cap * sizeof *slot_row);
                            gslot = fr_xrealloc(gslot, slot_cap * d * sizeof *gslot);
                        }
                        slot_of[r] = (int32_t)n_slots;
                        slot_row[n_slots] = r;
                        memset(gslot + n_slots * d, 0, d * sizeof *gslot);
                        n_slots++;
                    }
                    float v = tr->vals[q];
                    float *g = gslot + (size_t)slot_of[r] * d;
                    for (uint32_t j = 0; j < d; j++) g[j] += v * gfirst[j];
                }
            }
            step++;
            float lr = mc->lr * (1.0f - (float)(step - 1) / (float)total);
            float bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.999f, (float)step);
            for (size_t s = 0; s < n_slots; s++) {
                size_t r = (size_t)slot_row[s];
                adam(P->w1 + r * d, m1 + r * d, v1 + r * d, gslot + s * d, d, lr, mc->wd, bc1, bc2);
                slot_of[r] = -1;
            }
            n_slots = 0;
            adam(P->b2, mb2, vb2, gb2, c, lr, 0, bc1, bc2);
            if (h) {
                adam(P->b1, mb1, vb1, gb1, h, lr, 0, bc1, bc2);
                adam(P->w2, mw2, vw2, gw2, (size_t)c * h, lr, mc->wd, bc1, bc2);
            }
        }
        if (ctx->cfg->verbose) {
            double va = ctx->va->n ? eval_float(P, ctx->va, pre, hid, z) : 0;
            pthread_mutex_lock(ctx->print_lock);
            const char *what = tr->multi ? "micro-F1" : "acc";
            double tra = tr->multi ? (fnp + fng ? 2.0 * (double)ftp / (double)(fnp + fng) : 0)
                                   : (double)ok / (double)tr->n;
            fprintf(stderr, "  member %d (%s%u) epoch %2u/%u  loss %.4f  train %s %.2f%%", job->k,
                    h ? "mlp" : "linear", h ? h : c, ep + 1, mc->epochs, loss_sum / (double)tr->n,
                    what, 100.0 * tra);
            if (ctx->va->n) fprintf(stderr, "  val %s %.2f%%", what, 100.0 * va);
            fprintf(stderr, "  %.1f s\n", fr_time_s() - t0);
            fflush(stderr);
            pthread_mutex_unlock(ctx->print_lock);
        }
    }
    job->val_acc = ctx->va->n ? eval_float(P, ctx->va, pre, hid, z) : 0;
    free(m1);
    free(v1);
    free(mb2);
    free(vb2);
    free(gb2);
    free(mb1);
    free(vb1);
    free(gb1);
    free(mw2);
    free(vw2);
    free(gw2);
    free(slot_of);
    free(slot_row);
    free(gslot);
    free(pre);
    free(hid);
    free(mask);
    free(z);
    free(dz);
    free(dpre);
    free(order);
}

typedef struct {
    member_job *jobs;      /* all jobs */
    int n;                 /* job count */
    int next;              /* next job to take */
    pthread_mutex_t lock;  /* guards next */
} job_queue;

static void *worker(void *arg) {
    job_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        int k = q->next < q->n ? q->next++ : -1;
        pthread_mutex_unlock(&q->lock);
        if (k < 0) return NULL;
        train_member(&q->jobs[k]);
    }
}

/* ---------- the recipe ---------- */

void fr_intent_train_defaults(fr_intent_train_cfg *c) {
    /* The shipped recipe, chosen by mean validation accuracy over five seeded 10 % splits
     * (bench/RESULTS.md): word 1-2-grams + char 2-5-grams in 2^18 buckets, buckets seen in at
     * least 5 training rows, and an ensemble of a linear softmax and a 128-unit ReLU layer. */
    memset(c, 0, sizeof *c);
    c->feat.bucket_bits = 18;
    c->feat.word_max = 2;
    c->feat.char_min = 2;
    c->feat.char_max = 5;
    c->feat.flags = 0;
    c->group_weight[FR_FEAT_GROUP_WORD] = 1.0f;
    c->group_weight[FR_FEAT_GROUP_CHAR] = 1.0f;
    c->min_df = 5;
    c->val_frac = 0.1;
    c->calib_frac = 0;
    c->oos_target = 0.01;
    c->seed = 1;
    c->n_members = 2;
    c->member[0] = (fr_intent_member_cfg){.hidden = 0, .epochs = 20, .batch = 32, .lr = 0.003f,
                                          .wd = 0.0f, .dropout = 0, .smooth = 0, .init = 0,
                                          .weight = 1};
    c->member[1] = (fr_intent_member_cfg){.hidden = 128, .epochs = 12, .batch = 32, .lr = 0.002f,
                                          .wd = 0.0f, .dropout = 0.5f, .smooth = 0, .init = 0.05f,
                                          .weight = 1};
    c->threads = 2;
    c->verbose = 1;
}

double fr_intent_accuracy(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                          int want, size_t *n_used) {
    size_t ok = 0, n = 0;
    int *map = fr_xmalloc((size_t)(d->n_labels + 1) * sizeof *map);
    for (int l = 0; l < d->n_labels; l++) map[l] = fr_intent_label_index(m, d->names[l]);
    for (size_t i = 0; i < d->n; i++) {
        if (mask && mask[i] != want) continue;
        fr_intent_pred p;
        if (fr_intent_classify(m, d->texts[i], strlen(d->texts[i]), &p, 1, NULL) == 1)
            ok += p.label == map[d->labels[i]];
        n++;
    }
    free(map);
    if (n_used) *n_used = n;
    return n ? (double)ok / (double)n : 0;
}

fr_intent_model *fr_intent_train(const fr_intent_data *d, const fr_intent_train_cfg *cfg,
                                 fr_intent_train_report *rep, fr_err *err) {
    fr_intent_train_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    const char *bad = fr_feat_cfg_check(&cfg->feat);
    if (bad) {
        fr_err_set(err, "train-intent: %s", bad);
        return NULL;
    }
    if (cfg->n_members < 1 || cfg->n_members > FR_INTENT_TRAIN_MAX_MEMBERS) {
        fr_err_set(err, "train-intent: member count must be 1..%d", FR_INTENT_TRAIN_MAX_MEMBERS);
        return NULL;
    }
    for (int k = 0; k < cfg->n_members; k++) {
        const fr_intent_member_cfg *mc = &cfg->member[k];
        if (mc->hidden > FR_INTENT_MAX_HIDDEN || mc->epochs < 1 || !(mc->lr > 0) ||
            !(mc->dropout >= 0 && mc->dropout < 1) || !(mc->smooth >= 0 && mc->smooth < 1) ||
            !(mc->weight >= 0) || !(mc->wd >= 0)) {
            fr_err_set(err, "train-intent: bad settings for member %d", k);
            return NULL;
        }
    }
    if (d->n_labels < 2 || (uint32_t)d->n_labels > FR_INTENT_MAX_LABELS) {
        fr_err_set(err, "train-intent: need 2..%u labels, data has %d", FR_INTENT_MAX_LABELS, d->n_labels);
        return NULL;
    }
    if (!(cfg->val_frac >= 0 && cfg->val_frac < 1)) {
        fr_err_set(err, "train-intent: validation fraction must be in [0, 1)");
        return NULL;
    }
    double t0 = fr_time_s();
    if (!(cfg->calib_frac >= 0 && cfg->val_frac + cfg->calib_frac < 1)) {
        fr_err_set(err, "train-intent: validation + calibration fractions must stay below 1");
        return NULL;
    }
    /* is_val: 0 training, 1 validation, 2 calibration (both held out of training) */
    uint8_t *is_val = fr_xmalloc(d->n + 1);
    if (cfg->marks) memcpy(is_val, cfg->marks, d->n);
    else fr_intent_split3(d, cfg->val_frac, cfg->calib_frac, cfg->seed, is_val);
    for (size_t i = 0; i < d->n; i++) {
        if (is_val[i] == 1) rep->n_val++;
        else if (is_val[i] == 2) rep->n_calib++;
        else rep->n_train++;
    }

    /* vocabulary: document frequency per (group, bucket) key over the training rows */
    fr_intent_model *m = fr_xcalloc(1, sizeof *m);
    fr_intent_calib_identity(&m->calib);
    m->feat = cfg->feat;
    memcpy(m->group_weight, cfg->group_weight, sizeof m->group_weight);
    size_t nb = (size_t)1 << cfg->feat.bucket_bits;
    uint32_t *df = fr_xcalloc(nb, sizeof *df);
    fr_feat_scratch s = {0};
    uint32_t mask = (uint32_t)(nb - 1);
    for (size_t i = 0; i < d->n; i++) {
        if (is_val[i]) continue;
        size_t nf = fr_feat_extract(&m->feat, d->texts[i], strlen(d->texts[i]), &s);
        for (size_t j = 0; j < nf; j++) {
            uint32_t b = (uint32_t)s.feats[j].key & mask;
            if (j > 0 && ((uint32_t)s.feats[j - 1].key & mask) == b) continue;
            df[b]++;
        }
    }
    fr_feat_scratch_free(&s);
    uint32_t nr = 0, min_df = cfg->min_df ? cfg->min_df : 1;
    for (size_t b = 0; b < nb; b++) nr += df[b] >= min_df;
    if (nr == 0) {
        fr_err_set(err, "train-intent: no features in the training rows");
        free(df);
        free(is_val);
        fr_intent_free(m);
        return NULL;
    }
    m->n_rows = nr;
    m->buckets = fr_xmalloc((size_t)nr * sizeof *m->buckets);
    m->idf = fr_xmalloc((size_t)nr * sizeof *m->idf);
    double N = (double)rep->n_train;
    for (size_t b = 0, r = 0; b < nb; b++)
        if (df[b] >= min_df) {
            m->buckets[r] = (uint32_t)b;
            m->idf[r] = (float)(log((1.0 + N) / (1.0 + df[b])) + 1.0);
            r++;
        }
    free(df);
    fr_intent_build_row_map(m);
    m->n_labels = (uint32_t)d->n_labels;
    m->labels = fr_xmalloc((size_t)d->n_labels * sizeof *m->labels);
    for (int l = 0; l < d->n_labels; l++) m->labels[l] = fr_xstrdup(d->names[l]);

    csr tr, va;
    csr_build(&tr, m, d, is_val, 0);
    csr_build(&va, m, d, is_val, 1);
    if (cfg->verbose) {
        fprintf(stderr, "train-intent: %zu training rows, %zu validation rows, %d labels, %u feature rows "
                "(2^%u buckets), %.1f entries/row; vectors in %.1f s\n", tr.n, va.n, d->n_labels, nr,
                cfg->feat.bucket_bits, tr.n ? (double)tr.off[tr.n] / (double)tr.n : 0.0, fr_time_s() - t0);
    }

    pthread_mutex_t plock = PTHREAD_MUTEX_INITIALIZER;
    train_ctx ctx = {cfg, m, &tr, &va, &plock};
    member_job *jobs = fr_xcalloc((size_t)cfg->n_members, sizeof *jobs);
    for (int k = 0; k < cfg->n_members; k++) {
        jobs[k].ctx = &ctx;
        jobs[k].k = k;
    }
    job_queue q = {jobs, cfg->n_members, 0, PTHREAD_MUTEX_INITIALIZER};
    int nt = FR_MAX(1, FR_MIN(cfg->threads, cfg->n_members));
    pthread_t th[FR_INTENT_TRAIN_MAX_MEMBERS];
    int started = 0;
    for (int t = 1; t < nt; t++)
        if (pthread_create(&th[started], NULL, worker, &q) == 0) started++;
    worker(&q);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);

    m->n_members = (uint32_t)cfg->n_members;
    m->members = fr_xcalloc(m->n_members, sizeof *m->members);
    for (int k = 0; k < cfg->n_members; k++) {
        fparams *P = &jobs[k].P;
        fr_intent_member *mb = &m->members[k];
        mb->hidden = P->h;
        mb->dim = P->d;
        mb->weight = cfg->member[k].weight;
        fr_intent_quantize_rows(mb, P->w1, nr, P->d);
        mb->b1 = P->b1;
        mb->w2 = P->w2;
        mb->b2 = P->b2;
        free(P->w1);
        rep->member_val_acc[k] = jobs[k].val_acc;
    }
    free(jobs);
    csr_free(&tr);
    csr_free(&va);
    if (d->multi) {
        float *t = fr_xmalloc((size_t)d->n_labels * sizeof *t);
        for (int l = 0; l < d->n_labels; l++) t[l] = 0.5f;
        fr_intent_set_thresholds(m, t);
        free(t);
        if (rep->n_calib) fr_intent_tune_thresholds(m, d, is_val, 2);
        if (rep->n_val) fr_intent_multi_f1(m, d, is_val, 1, &rep->val_micro_f1, &rep->val_macro_f1, NULL);
        rep->seconds = fr_time_s() - t0;
        if (cfg->verbose && rep->n_val)
            fprintf(stderr, "train-intent: validation micro-F1 %.4f, macro-F1 %.4f (%zu rows), %.1f s\n",
                    rep->val_micro_f1, rep->val_macro_f1, rep->n_val, rep->seconds);
        free(is_val);
        return m;
    }
    int oos = -1;
    for (int l = 0; l < d->n_labels; l++)
        if (!strcmp(d->names[l], FR_INTENT_OOS_LABEL)) oos = l;
    m->calib.oos_label = oos;
    if (rep->n_calib) {
        fr_intent_calibrate(m, d, is_val, 2, cfg->oos_target > 0 ? cfg->oos_target : 0.01,
                            &rep->calib_in_flagged, &rep->calib_oos_flagged);
        rep->calib = m->calib;
        if (cfg->verbose)
            fprintf(stderr, "train-intent: calibration on %zu rows: temperature %.3f; out of scope when "
                    "P(%s) >= %.3f, best intent < %.3f or word coverage < %.3f: %.2f%% of in-scope and "
                    "%.2f%% of out-of-scope calibration rows flagged\n", rep->n_calib,
                    m->calib.temperature, FR_INTENT_OOS_LABEL, m->calib.oos_min_prob, m->calib.min_conf,
                    m->calib.min_coverage, 100 * rep->calib_in_flagged, 100 * rep->calib_oos_flagged);
    }
    if (rep->n_calib && cfg->refit) {
        fr_intent_train_cfg c2 = *cfg;
        c2.calib_frac = 0;
        c2.refit = 0;
        fr_intent_train_report r2;
        if (cfg->verbose)
            fprintf(stderr, "train-intent: refit on the training + calibration rows\n");
        fr_intent_model *m2 = fr_intent_train(d, &c2, &r2, err);
        if (!m2) {
            free(is_val);
            fr_intent_free(m);
            return NULL;
        }
        m2->calib = m->calib; /* same labels, same order */
        fr_intent_free(m);
        m = m2;
        rep->n_train = r2.n_train;
        memcpy(rep->member_val_acc, r2.member_val_acc, sizeof rep->member_val_acc);
    }
    if (rep->n_val) rep->val_acc = fr_intent_accuracy(m, d, is_val, 1, NULL);
    rep->seconds = fr_time_s() - t0;
    if (cfg->verbose && rep->n_val)
        fprintf(stderr, "train-intent: validation accuracy of the quantised ensemble %.2f%% (%zu rows), %.1f s\n",
                100.0 * rep->val_acc, rep->n_val, rep->seconds);
    free(is_val);
    return m;
}
