/* intent.c — intent model file format (bounds-checked loader, writer) and inference.
 *
 * Inference: features (textfeat.c) → TF-IDF vector over known rows → per member: first layer as
 * a sum of dequantised int8 rows (linear: logits; MLP: hidden pre-activations → ReLU → dense
 * output layer) → softmax → weighted average of member probabilities → top-k. All scratch is per
 * call, so a loaded model is shared read-only between threads.
 */
#include "stages/nlu/intent.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stages/nlu/intent_impl.h"

/* ---------- little-endian writer ---------- */

static void put_u32(fr_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fr_buf_append(b, x, 4);
}
static void put_f32(fr_buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void put_f32s(fr_buf *b, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) put_f32(b, f[i]);
}

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint8_t *fr_intent_serialize(const fr_intent_model *m, size_t *n) {
    fr_buf b = {0};
    fr_buf_append(&b, FR_INTENT_MAGIC, 8);
    put_u32(&b, m->multilabel ? 3u : 2u);
    put_u32(&b, m->feat.bucket_bits);
    put_u32(&b, m->feat.word_max);
    put_u32(&b, m->feat.char_min);
    put_u32(&b, m->feat.char_max);
    put_u32(&b, m->feat.flags);
    put_f32s(&b, m->group_weight, FR_FEAT_N_GROUPS);
    put_u32(&b, m->n_labels);
    put_u32(&b, m->n_rows);
    put_u32(&b, m->n_members);
    for (uint32_t i = 0; i < m->n_labels; i++) {
        size_t l = strlen(m->labels[i]);
        uint8_t x[2] = {(uint8_t)l, (uint8_t)(l >> 8)};
        fr_buf_append(&b, x, 2);
        fr_buf_append(&b, m->labels[i], l);
    }
    for (uint32_t i = 0; i < m->n_rows; i++) put_u32(&b, m->buckets[i]);
    put_f32s(&b, m->idf, m->n_rows);
    for (uint32_t k = 0; k < m->n_members; k++) {
        const fr_intent_member *mb = &m->members[k];
        put_u32(&b, mb->hidden);
        put_f32(&b, mb->weight);
        put_f32s(&b, mb->scale, m->n_rows);
        fr_buf_append(&b, mb->w1, (size_t)m->n_rows * mb->dim);
        if (mb->hidden) {
            put_f32s(&b, mb->b1, mb->hidden);
            put_f32s(&b, mb->w2, (size_t)m->n_labels * mb->hidden);
        }
        put_f32s(&b, mb->b2, m->n_labels);
    }
    const fr_intent_calib *c = &m->calib;
    put_f32(&b, c->temperature);
    put_u32(&b, (uint32_t)c->oos_label);
    put_f32(&b, c->oos_min_prob);
    put_f32(&b, c->min_conf);
    put_f32(&b, c->min_coverage);
    if (m->multilabel) {
        put_u32(&b, 1);
        put_f32s(&b, m->thresholds, m->n_labels);
    }
    uint64_t h = fnv1a64((const uint8_t *)b.data, b.len);
    put_u32(&b, (uint32_t)h);
    put_u32(&b, (uint32_t)(h >> 32));
    *n = b.len;
    return (uint8_t *)b.data;
}

int fr_intent_save(const fr_intent_model *m, const char *path, fr_err *err) {
    size_t n;
    uint8_t *data = fr_intent_serialize(m, &n);
    size_t tl = strlen(path) + 16;
    char *tmp = fr_xmalloc(tl);
    snprintf(tmp, tl, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = -1;
    if (!f) {
        fr_err_set(err, "%s: cannot create: %s", tmp, strerror(errno));
    } else {
        size_t w = fwrite(data, 1, n, f);
        int e = fclose(f);
        if (w != n || e != 0) fr_err_set(err, "%s: write failed: %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0) fr_err_set(err, "%s: rename failed: %s", path, strerror(errno));
        else rc = 0;
        if (rc) remove(tmp);
    }
    free(tmp);
    free(data);
    return rc;
}

/* ---------- bounds-checked reader ---------- */

typedef struct {
    const uint8_t *p; /* next byte */
    size_t left;      /* bytes remaining */
} rd;

static bool rd_u32(rd *r, uint32_t *v) {
    if (r->left < 4) return false;
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    r->left -= 4;
    return true;
}
/* n floats, each finite with |x| <= bound (trained weights are small; the bounds keep every
 * sum in inference finite, so a hostile file cannot produce NaN confidences). */
static bool rd_f32s(rd *r, float *out, size_t n, float bound) {
    if (n > r->left / 4) return false;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
                     (uint32_t)r->p[3] << 24;
        memcpy(&out[i], &u, 4);
        r->p += 4;
        if (!(fabsf(out[i]) <= bound)) return false; /* also rejects NaN and inf */
    }
    r->left -= n * 4;
    return true;
}

void fr_intent_free(fr_intent_model *m) {
    if (!m) return;
    if (m->labels)
        for (uint32_t i = 0; i < m->n_labels; i++) free(m->labels[i]);
    free(m->labels);
    free(m->buckets);
    free(m->row_of);
    free(m->idf);
    if (m->members)
        for (uint32_t k = 0; k < m->n_members; k++) {
            fr_intent_member *mb = &m->members[k];
            free(mb->scale);
            free(mb->w1);
            free(mb->b1);
            free(mb->w2);
            free(mb->b2);
        }
    free(m->members);
    free(m->thresholds);
    free(m);
}

void fr_intent_build_row_map(fr_intent_model *m) {
    size_t nb = (size_t)1 << m->feat.bucket_bits;
    free(m->row_of);
    m->row_of = fr_xmalloc(nb * sizeof *m->row_of);
    for (size_t i = 0; i < nb; i++) m->row_of[i] = -1;
    for (uint32_t r = 0; r < m->n_rows; r++) m->row_of[m->buckets[r]] = (int32_t)r;
}

#define FAIL(...)                          \
    do {                                   \
        fr_err_set(err, __VA_ARGS__);      \
        fr_err_prefix(err, "intent model"); \
        fr_intent_free(m);                 \
        return NULL;                       \
    } while (0)

fr_intent_model *fr_intent_load_mem(const void *data, size_t n, int flags, fr_err *err) {
    fr_intent_model *m = NULL;
    const uint8_t *d = data;
    if (!d || n < 8 + 4 + 8) FAIL("file too short (%zu bytes)", n);
    if (memcmp(d, FR_INTENT_MAGIC, 8) != 0) FAIL("bad magic (not a frugal intent model)");
    if (!(flags & FR_INTENT_LOAD_NO_CHECKSUM)) {
        uint64_t want = (uint64_t)d[n - 8] | (uint64_t)d[n - 7] << 8 | (uint64_t)d[n - 6] << 16 |
                        (uint64_t)d[n - 5] << 24 | (uint64_t)d[n - 4] << 32 |
                        (uint64_t)d[n - 3] << 40 | (uint64_t)d[n - 2] << 48 | (uint64_t)d[n - 1] << 56;
        if (fnv1a64(d, n - 8) != want) FAIL("checksum mismatch (file truncated or corrupt)");
    }
    rd r = {d + 8, n - 8 - 8};
    uint32_t ver;
    if (!rd_u32(&r, &ver)) FAIL("truncated header");
    if (ver < 1 || ver > FR_INTENT_VERSION)
        FAIL("unsupported version %u (this build reads 1..%u)", ver, FR_INTENT_VERSION);
    m = fr_xcalloc(1, sizeof *m);
    fr_intent_calib_identity(&m->calib);
    fr_feat_cfg *fc = &m->feat;
    if (!rd_u32(&r, &fc->bucket_bits) || !rd_u32(&r, &fc->word_max) || !rd_u32(&r, &fc->char_min) ||
        !rd_u32(&r, &fc->char_max) || !rd_u32(&r, &fc->flags))
        FAIL("truncated header");
    const char *bad = fr_feat_cfg_check(fc);
    if (bad) FAIL("bad featuriser settings: %s", bad);
    if (!rd_f32s(&r, m->group_weight, FR_FEAT_N_GROUPS, 1e3f)) FAIL("truncated or non-finite group weights");
    uint32_t nl, nr, nm;
    if (!rd_u32(&r, &nl) || !rd_u32(&r, &nr) || !rd_u32(&r, &nm)) FAIL("truncated header");
    if (nl < 1 || nl > FR_INTENT_MAX_LABELS) FAIL("bad label count %u (1..%u)", nl, FR_INTENT_MAX_LABELS);
    if (nr < 1 || nr > (1u << fc->bucket_bits)) FAIL("bad row count %u for 2^%u buckets", nr, fc->bucket_bits);
    if (nm < 1 || nm > FR_INTENT_MAX_MEMBERS) FAIL("bad member count %u (1..%u)", nm, FR_INTENT_MAX_MEMBERS);
    /* rows + idf alone need 8 bytes per row: reject before allocating */
    if ((size_t)nr > r.left / 8) FAIL("truncated: %u rows do not fit in the file", nr);
    m->labels = fr_xcalloc(nl, sizeof *m->labels);
    m->n_labels = nl;
    for (uint32_t i = 0; i < nl; i++) {
        if (r.left < 2) FAIL("truncated label table");
        size_t l = (size_t)r.p[0] | (size_t)r.p[1] << 8;
        r.p += 2;
        r.left -= 2;
        if (l < 1 || l > 255 || l > r.left) FAIL("bad label length %zu", l);
        if (!fr_utf8_valid((const char *)r.p, l) || memchr(r.p, 0, l)) FAIL("label %u is not valid UTF-8", i);
        m->labels[i] = fr_xstrndup((const char *)r.p, l);
        r.p += l;
        r.left -= l;
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(m->labels[j], m->labels[i])) FAIL("duplicate label '%s'", m->labels[i]);
    }
    if ((size_t)nr > r.left / 8) FAIL("truncated: %u rows do not fit in the file", nr);
    m->n_rows = nr;
    m->buckets = fr_xmalloc((size_t)nr * sizeof *m->buckets);
    for (uint32_t i = 0; i < nr; i++) {
        rd_u32(&r, &m->buckets[i]);
        if (m->buckets[i] >> fc->bucket_bits) FAIL("bucket %u out of range", m->buckets[i]);
        if (i && m->buckets[i] <= m->buckets[i - 1]) FAIL("buckets not strictly ascending at row %u", i);
    }
    m->idf = fr_xmalloc((size_t)nr * sizeof *m->idf);
    if (!rd_f32s(&r, m->idf, nr, 1e6f)) FAIL("truncated or non-finite idf table");
    for (uint32_t i = 0; i < nr; i++)
        if (!(m->idf[i] > 0 && m->idf[i] < 1e6f)) FAIL("idf of row %u out of range", i);
    m->members = fr_xcalloc(nm, sizeof *m->members);
    m->n_members = nm;
    for (uint32_t k = 0; k < nm; k++) {
        fr_intent_member *mb = &m->members[k];
        if (!rd_u32(&r, &mb->hidden) || !rd_f32s(&r, &mb->weight, 1, 1e3f)) FAIL("member %u: truncated or bad weight", k);
        if (mb->hidden > FR_INTENT_MAX_HIDDEN) FAIL("member %u: hidden width %u too large", k, mb->hidden);
        if (!(mb->weight >= 0 && mb->weight <= 1e3f)) FAIL("member %u: bad weight", k);
        mb->dim = mb->hidden ? mb->hidden : nl;
        /* exact size of the rest of this member, checked before allocating */
        size_t need = (size_t)nr * 4 + (size_t)nr * mb->dim + (size_t)nl * 4;
        if (mb->hidden) need += (size_t)mb->hidden * 4 + (size_t)nl * mb->hidden * 4;
        if (need > r.left) FAIL("member %u: truncated (needs %zu bytes, %zu left)", k, need, r.left);
        mb->scale = fr_xmalloc((size_t)nr * sizeof *mb->scale);
        if (!rd_f32s(&r, mb->scale, nr, 1e3f)) FAIL("member %u: non-finite or out-of-range row scale", k);
        mb->w1 = fr_xmalloc((size_t)nr * mb->dim);
        memcpy(mb->w1, r.p, (size_t)nr * mb->dim);
        r.p += (size_t)nr * mb->dim;
        r.left -= (size_t)nr * mb->dim;
        if (mb->hidden) {
            mb->b1 = fr_xmalloc((size_t)mb->hidden * sizeof *mb->b1);
            mb->w2 = fr_xmalloc((size_t)nl * mb->hidden * sizeof *mb->w2);
            if (!rd_f32s(&r, mb->b1, mb->hidden, 1e4f) || !rd_f32s(&r, mb->w2, (size_t)nl * mb->hidden, 1e4f))
                FAIL("member %u: non-finite or out-of-range weights", k);
        }
        mb->b2 = fr_xmalloc((size_t)nl * sizeof *mb->b2);
        if (!rd_f32s(&r, mb->b2, nl, 1e4f)) FAIL("member %u: non-finite or out-of-range bias", k);
    }
    if (ver >= 2) {
        fr_intent_calib *c = &m->calib;
        uint32_t ol;
        if (!rd_f32s(&r, &c->temperature, 1, 1e3f) || !rd_u32(&r, &ol) ||
            !rd_f32s(&r, &c->oos_min_prob, 1, 10.0f) || !rd_f32s(&r, &c->min_conf, 1, 1.0f) ||
            !rd_f32s(&r, &c->min_coverage, 1, 1.0f))
            FAIL("truncated or non-finite calibration block");
        c->oos_label = (int32_t)ol;
        if (!(c->temperature >= 0.01f)) FAIL("calibration temperature %g out of range", c->temperature);
        if (c->oos_label < -1 || c->oos_label >= (int32_t)nl) FAIL("out-of-scope label %d out of range", c->oos_label);
        if (c->oos_min_prob < 0 || c->min_conf < 0 || c->min_coverage < 0) FAIL("negative calibration threshold");
    }
    if (ver >= 3) {
        uint32_t ml;
        if (!rd_u32(&r, &ml) || ml != 1) FAIL("bad multi-label flag");
        if ((size_t)nl > r.left / 4) FAIL("truncated threshold table");
        m->multilabel = 1;
        m->thresholds = fr_xmalloc((size_t)nl * sizeof *m->thresholds);
        if (!rd_f32s(&r, m->thresholds, nl, 1.0f)) FAIL("non-finite or out-of-range threshold");
        for (uint32_t i = 0; i < nl; i++)
            if (!(m->thresholds[i] > 0)) FAIL("threshold of label %u out of range (0, 1]", i);
        if (m->calib.temperature != 1.0f || m->calib.oos_label != -1)
            FAIL("a multi-label model has no temperature or out-of-scope label");
    }
    if (r.left != 0) FAIL("%zu trailing bytes after the last member", r.left);
    float wsum = 0;
    for (uint32_t k = 0; k < nm; k++) wsum += m->members[k].weight;
    if (!(wsum > 0)) FAIL("member weights sum to zero");
    fr_intent_build_row_map(m);
    return m;
}

fr_intent_model *fr_intent_load(const char *path, fr_err *err) {
    size_t n;
    char *data = fr_read_file(path, FR_INTENT_MAX_FILE, &n, err);
    if (!data) return NULL;
    fr_intent_model *m = fr_intent_load_mem(data, n, 0, err);
    if (!m) fr_err_prefix(err, "%s", path);
    free(data);
    return m;
}

/* ---------- inference ---------- */

int fr_intent_n_labels(const fr_intent_model *m) { return (int)m->n_labels; }

const char *fr_intent_label(const fr_intent_model *m, int i) {
    return (i >= 0 && (uint32_t)i < m->n_labels) ? m->labels[i] : NULL;
}

int fr_intent_label_index(const fr_intent_model *m, const char *name) {
    for (uint32_t i = 0; i < m->n_labels; i++)
        if (!strcmp(m->labels[i], name)) return (int)i;
    return -1;
}

void fr_intent_describe(const fr_intent_model *m, char *buf, size_t n) {
    int o = snprintf(buf, n, "%u labels, %u rows of 2^%u buckets, members:", m->n_labels, m->n_rows,
                     m->feat.bucket_bits);
    for (uint32_t k = 0; k < m->n_members && o > 0 && (size_t)o < n; k++) {
        const fr_intent_member *mb = &m->members[k];
        if (mb->hidden) o += snprintf(buf + o, n - (size_t)o, " mlp%u", mb->hidden);
        else o += snprintf(buf + o, n - (size_t)o, " linear");
    }
}

size_t fr_intent_vectorize(const fr_intent_model *m, const fr_feat *feats, size_t nf, int32_t *rows,
                           float *vals) {
    size_t n = 0;
    double ss[FR_FEAT_N_GROUPS] = {0};
    size_t start[FR_FEAT_N_GROUPS + 1] = {0};
    uint32_t mask = (1u << m->feat.bucket_bits) - 1;
    int g_cur = 0;
    for (size_t i = 0; i < nf; i++) {
        int g = (int)(feats[i].key >> 32);
        if (g >= FR_FEAT_N_GROUPS) continue;
        while (g_cur < g) start[++g_cur] = n;
        int32_t r = m->row_of[(uint32_t)feats[i].key & mask];
        if (r < 0) continue;
        float v = (1.0f + logf((float)feats[i].count)) * m->idf[r];
        rows[n] = r;
        vals[n] = v;
        ss[g] += (double)v * v;
        n++;
    }
    while (g_cur < FR_FEAT_N_GROUPS) start[++g_cur] = n;
    for (int g = 0; g < FR_FEAT_N_GROUPS; g++) {
        if (ss[g] <= 0) continue;
        float s = m->group_weight[g] / (float)sqrt(ss[g]);
        for (size_t i = start[g]; i < start[g + 1]; i++) vals[i] *= s;
    }
    return n;
}

void fr_intent_softmax(float *z, uint32_t n) {
    float mx = z[0];
    for (uint32_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    float s = 0;
    for (uint32_t i = 0; i < n; i++) {
        z[i] = expf(z[i] - mx);
        s += z[i];
    }
    for (uint32_t i = 0; i < n; i++) z[i] /= s;
}

void fr_intent_sigmoid(float *z, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) z[i] = 1.0f / (1.0f + expf(-z[i]));
}

/* Member probabilities into z[n_labels]; h is scratch of the hidden width. */
static void member_forward(const fr_intent_model *m, const fr_intent_member *mb, const int32_t *rows,
                           const float *vals, size_t n, float *z, float *h) {
    uint32_t nl = m->n_labels, d = mb->dim;
    float *acc = mb->hidden ? h : z;
    if (mb->hidden) memcpy(acc, mb->b1, d * sizeof *acc);
    else memcpy(acc, mb->b2, d * sizeof *acc);
    for (size_t i = 0; i < n; i++) {
        const int8_t *w = mb->w1 + (size_t)rows[i] * d;
        float a = vals[i] * mb->scale[rows[i]];
        for (uint32_t j = 0; j < d; j++) acc[j] += a * (float)w[j];
    }
    if (mb->hidden) {
        for (uint32_t j = 0; j < d; j++) h[j] = h[j] > 0 ? h[j] : 0;
        for (uint32_t c = 0; c < nl; c++) {
            const float *w = mb->w2 + (size_t)c * d;
            float s = mb->b2[c];
            for (uint32_t j = 0; j < d; j++) s += w[j] * h[j];
            z[c] = s;
        }
    }
    if (m->multilabel) fr_intent_sigmoid(z, nl);
    else fr_intent_softmax(z, nl);
}

void fr_intent_calib_identity(fr_intent_calib *c) {
    *c = (fr_intent_calib){.temperature = 1.0f, .oos_label = -1, .oos_min_prob = 2.0f,
                           .min_conf = 0.0f, .min_coverage = 0.0f};
}

const fr_intent_calib *fr_intent_get_calib(const fr_intent_model *m) { return &m->calib; }

void fr_intent_set_calib(fr_intent_model *m, const fr_intent_calib *c) { m->calib = *c; }

/* Ensemble probabilities p[n_labels] (raw, temperature 1) and the coverage. */
static void ensemble(const fr_intent_model *m, const char *text, size_t len, float *p,
                     float *coverage) {
    fr_feat_scratch s = {0};
    size_t nf = fr_feat_extract(&m->feat, text ? text : "", text ? len : 0, &s);
    uint32_t nl = m->n_labels, hmax = 0, mask = (1u << m->feat.bucket_bits) - 1;
    for (uint32_t i = 0; i < m->n_members; i++) hmax = FR_MAX(hmax, m->members[i].hidden);
    double known = 0, total = 0;
    for (size_t i = 0; i < nf; i++) {
        if ((int)(s.feats[i].key >> 32) != FR_FEAT_GROUP_WORD) continue;
        total += s.feats[i].count;
        if (m->row_of[(uint32_t)s.feats[i].key & mask] >= 0) known += s.feats[i].count;
    }
    if (coverage) *coverage = total > 0 ? (float)(known / total) : 0.0f;
    int32_t *rows = fr_xmalloc((nf + 1) * sizeof *rows);
    float *buf = fr_xmalloc(((nf + 1) + (size_t)nl + hmax + 1) * sizeof *buf);
    float *vals = buf, *z = vals + nf + 1, *h = z + nl;
    size_t n = fr_intent_vectorize(m, s.feats, nf, rows, vals);
    memset(p, 0, nl * sizeof *p);
    float wsum = 0;
    for (uint32_t q = 0; q < m->n_members; q++) {
        const fr_intent_member *mb = &m->members[q];
        if (mb->weight <= 0) continue;
        member_forward(m, mb, rows, vals, n, z, h);
        for (uint32_t c = 0; c < nl; c++) p[c] += mb->weight * z[c];
        wsum += mb->weight;
    }
    for (uint32_t c = 0; c < nl; c++) p[c] /= wsum;
    free(rows);
    free(buf);
    fr_feat_scratch_free(&s);
}

/* p ← p^(1/T), renormalised. */
static void apply_temperature(float *p, uint32_t nl, float t) {
    if (t == 1.0f) return; /* always so for multi-label models (the loader checks) */
    double mx = -1e300;
    for (uint32_t c = 0; c < nl; c++) {
        double l = log((double)p[c] + 1e-30) / t;
        p[c] = (float)l;
        mx = l > mx ? l : mx;
    }
    double sum = 0;
    for (uint32_t c = 0; c < nl; c++) sum += exp((double)p[c] - mx);
    for (uint32_t c = 0; c < nl; c++) p[c] = (float)(exp((double)p[c] - mx) / sum);
}

int fr_intent_probs(const fr_intent_model *m, const char *text, size_t len, float *p,
                    float *coverage, fr_err *err) {
    if (!m || !p) {
        fr_err_set(err, "intent: bad arguments");
        return -1;
    }
    ensemble(m, text, len, p, coverage);
    apply_temperature(p, m->n_labels, m->calib.temperature);
    return 0;
}

/* The k best labels of p (skipping `skip`, -1 for none) into out; returns their number. */
static int top_k(const fr_intent_model *m, const float *p, int skip, fr_intent_pred *out, int k) {
    int kk = (int)FR_MIN((uint32_t)k, m->n_labels - (skip >= 0 ? 1u : 0u));
    for (int i = 0; i < kk; i++) {
        int best = -1;
        for (uint32_t c = 0; c < m->n_labels; c++) {
            if ((int)c == skip) continue;
            bool taken = false;
            for (int j = 0; j < i; j++) taken |= out[j].label == (int)c;
            if (!taken && (best < 0 || p[c] > p[best])) best = (int)c;
        }
        out[i].label = best;
        out[i].name = m->labels[best];
        out[i].confidence = p[best];
    }
    return kk;
}

int fr_intent_classify(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                       int k, fr_err *err) {
    if (!m || !out || k < 1) {
        fr_err_set(err, "intent: bad arguments");
        return -1;
    }
    float *p = fr_xmalloc(m->n_labels * sizeof *p);
    fr_intent_probs(m, text, len, p, NULL, err);
    int n = top_k(m, p, -1, out, k);
    free(p);
    return n;
}

int fr_intent_rule_in_scope(const fr_intent_calib *c, const float *p, int n_labels, float coverage,
                            const char **reason) {
    float best = 0, oos = c->oos_label >= 0 ? p[c->oos_label] : 0;
    for (int i = 0; i < n_labels; i++)
        if (i != c->oos_label && p[i] > best) best = p[i];
    const char *why = "";
    if (oos >= c->oos_min_prob) why = "the out-of-scope class wins";
    else if (best < c->min_conf) why = "no intent is confident enough";
    else if (coverage < c->min_coverage) why = "too few known words";
    if (reason) *reason = why;
    return !why[0];
}

int fr_intent_assess(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                     int k, fr_intent_verdict *v, fr_err *err) {
    if (!m || !out || !v || k < 1 || (m->n_labels < 2 && m->calib.oos_label >= 0)) {
        fr_err_set(err, "intent: bad arguments");
        return -1;
    }
    float *p = fr_xmalloc(m->n_labels * sizeof *p);
    float cov = 0;
    fr_intent_probs(m, text, len, p, &cov, err);
    int n = top_k(m, p, m->calib.oos_label, out, k);
    v->confidence = n > 0 ? out[0].confidence : 0;
    v->oos_prob = m->calib.oos_label >= 0 ? p[m->calib.oos_label] : 0;
    v->coverage = cov;
    v->in_scope = fr_intent_rule_in_scope(&m->calib, p, (int)m->n_labels, cov, &v->reason);
    free(p);
    return n;
}

void fr_intent_quantize_rows(fr_intent_member *mb, const float *w, uint32_t n_rows, uint32_t dim) {
    mb->scale = fr_xmalloc((size_t)n_rows * sizeof *mb->scale);
    mb->w1 = fr_xmalloc((size_t)n_rows * dim);
    for (uint32_t r = 0; r < n_rows; r++) {
        const float *x = w + (size_t)r * dim;
        float mx = 0;
        for (uint32_t j = 0; j < dim; j++) mx = fabsf(x[j]) > mx ? fabsf(x[j]) : mx;
        float s = mx > 0 ? mx / 127.0f : 1.0f;
        mb->scale[r] = mx > 0 ? s : 0.0f;
        for (uint32_t j = 0; j < dim; j++) {
            float q = roundf(x[j] / s);
            mb->w1[(size_t)r * dim + j] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
        }
    }
}

int fr_intent_is_multilabel(const fr_intent_model *m) { return m && m->multilabel ? 1 : 0; }

const float *fr_intent_thresholds(const fr_intent_model *m) { return m->multilabel ? m->thresholds : NULL; }

void fr_intent_set_thresholds(fr_intent_model *m, const float *t) {
    if (!m->thresholds) m->thresholds = fr_xmalloc(m->n_labels * sizeof *m->thresholds);
    for (uint32_t i = 0; i < m->n_labels; i++)
        m->thresholds[i] = t[i] < 0.01f ? 0.01f : t[i] > 1.0f ? 1.0f : t[i];
    m->multilabel = 1;
    fr_intent_calib_identity(&m->calib);
}

int fr_intent_select(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                     int cap, fr_err *err) {
    if (!m || !m->multilabel || cap < 0 || (cap > 0 && !out)) {
        fr_err_set(err, "intent: bad arguments (a multi-label model is needed)");
        return -1;
    }
    float *p = fr_xmalloc(m->n_labels * sizeof *p);
    ensemble(m, text, len, p, NULL);
    int n = 0;
    for (uint32_t c = 0; c < m->n_labels; c++) {
        if (p[c] < m->thresholds[c]) continue;
        /* insertion into out, most probable first (ties: lower label index first) */
        if (n < cap || (cap > 0 && p[c] > out[cap - 1].confidence)) {
            int j = n < cap ? n : cap - 1;
            while (j > 0 && out[j - 1].confidence < p[c]) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = (fr_intent_pred){m->labels[c], p[c], (int)c};
        }
        n++;
    }
    free(p);
    return n;
}
