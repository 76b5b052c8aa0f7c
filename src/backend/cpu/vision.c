/* vision.c — the Qwen2-VL / Qwen2.5-VL vision tower on the CPU, fp32 (see vision.h).
 *
 * It follows transformers 5.17 (Qwen2_5_VisionTransformerPretrainedModel.forward, Qwen2-VL's
 * counterpart, and vision_utils.get_vision_{position_ids,attention_seqlens,window_index}):
 *
 *   plan (from the grids alone):
 *     pos    (n, 2)   (row, col) of each patch in processor order: per frame, merge blocks
 *                     row-major, inside a block row-major (merge x merge);
 *     win    (n/mu)   the merged unit (mu = merge^2 consecutive patches) at each window-order
 *                     place: units grouped by windows of W = window_size/merge/patch units a
 *                     side, windows row-major, units row-major inside (the last row / column of
 *                     windows cut short); identity for Qwen2-VL;
 *     cu_win          window boundaries in window order (in patches); cu_full: frame boundaries.
 *   x  = pixels . patch_w^T, rows permuted into window order (units kept whole)   (n, hidden)
 *   rotary angle of pair k (0 <= k < head_dim/2): row * inv[k] for k < head_dim/4, else
 *          col * inv[k - head_dim/4], inv[j] = theta^(-2j/(head_dim/2)); the pair is (k,
 *          k + head_dim/2) (rotate_half), for q and k of every head;
 *   per block: x += proj(attn(norm1(x))), attention inside the block's segments (cu_full for a
 *          full-attention block, else cu_win), scores scaled by head_dim^-0.5;
 *          x += mlp(norm2(x));
 *   merger: y = fc2(gelu(fc1(norm(x) viewed (n/mu, hidden*mu)))); out[win[i]] = y[i].
 * Norms: RMSNorm (Qwen2.5-VL) or LayerNorm with bias (Qwen2-VL), eps from the hparams (1e-6).
 * Activations: Qwen2.5-VL's MLP silu(gate) * up; Qwen2-VL's quick_gelu x*sigmoid(1.702x); the
 * merger's exact (erf) GELU.
 *
 * The reference computes every op with double accumulators on one thread; the fast path runs the
 * matrix products (linear layers, and Q.K^T / P.V per segment and head, in query chunks so no
 * score matrix exceeds QCHUNK x segment) through OpenBLAS and the row-wise ops on the pool.
 */
#include "backend/cpu/vision.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QCHUNK 256 /* query rows per score block in the fast attention */

/* ---------------------------------------------------------------- the plan */

/* Everything derived from the grids, in window order. */
typedef struct vplan {
    int64_t n, n_tok;   /* patches, merged tokens the tower runs on (the kept ones) */
    int64_t n_all;      /* merged tokens of the grids */
    int mu;             /* patches per merged token */
    int32_t *pos;       /* (n, 2) processor order */
    int32_t *win;       /* (n_tok) */
    int32_t *cu_win;    /* (n_win + 1) */
    int n_win;
    int32_t *cu_full;   /* (n_full + 1): frame boundaries */
    int n_full;
    float *cs, *sn;     /* (n, head_dim/2) cos / sin of each window-order patch's angles */
} vplan;

static void plan_free(vplan *p) {
    free(p->pos);
    free(p->win);
    free(p->cu_win);
    free(p->cu_full);
    free(p->cs);
    free(p->sn);
    memset(p, 0, sizeof *p);
}

/* Allocation that reports failure as "too large" (a huge image). */
static void *vmalloc(size_t n, fr_err *err) {
    void *p = malloc(n ? n : 1);
    if (!p) fr_err_setc(err, FR_ERR_TOO_LARGE, "vision: out of memory (%.0f MiB)",
                        (double)n / (1024.0 * 1024.0));
    return p;
}

static int plan_make(const fr_model *m, const int32_t *g, int n_images, int64_t n_patches,
                     const uint8_t *keep, vplan *p, fr_err *err) {
    memset(p, 0, sizeof *p);
    if (!m->vision) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: the model has no vision tower", m->name);
        return -1;
    }
    const fr_vision_hparams *hp = &m->vision->hp;
    int64_t nt = fr_vision_n_tokens(hp, g, n_images);
    if (nt < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: invalid image grid (each t, h, w >= 1, h "
                    "and w multiples of %d, at most %d patches)", hp->merge, FR_VISION_MAX_PATCHES);
        return -1;
    }
    p->mu = hp->merge * hp->merge;
    p->n = nt * p->mu;
    p->n_tok = nt;
    if (p->n != n_patches) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: the grids hold %lld patches, the pixel "
                    "values %lld", (long long)p->n, (long long)n_patches);
        return -1;
    }
    int64_t frames = 0;
    for (int i = 0; i < n_images; i++) frames += g[3 * i];
    int half = hp->head_dim / 2, q = hp->head_dim / 4;
    FR_ASSERT(q >= 1 && q <= 1024 && hp->head_dim % 4 == 0); /* checked at load */
    p->pos = vmalloc((size_t)p->n * 2 * sizeof(int32_t), err);
    p->win = p->pos ? vmalloc((size_t)nt * sizeof(int32_t), err) : NULL;
    p->cu_win = p->win ? vmalloc((size_t)(nt + frames + 1) * sizeof(int32_t), err) : NULL;
    p->cu_full = p->cu_win ? vmalloc((size_t)(frames + 1) * sizeof(int32_t), err) : NULL;
    p->cs = p->cu_full ? vmalloc((size_t)p->n * half * sizeof(float), err) : NULL;
    p->sn = p->cs ? vmalloc((size_t)p->n * half * sizeof(float), err) : NULL;
    if (!p->sn) {
        plan_free(p);
        return -1;
    }
    /* the grids are valid (checked above) and the loaders accept no window under one unit */
    FR_ASSERT(fr_vision_rot_pos(hp, g, n_images, p->pos) == 0);
    FR_ASSERT(fr_vision_window_index(hp, g, n_images, p->win, p->cu_win, &p->n_win) == 0);
    int64_t at = 0;
    p->cu_full[0] = 0;
    for (int i = 0; i < n_images; i++)
        for (int f = 0; f < g[3 * i]; f++) {
            at += (int64_t)g[3 * i + 1] * g[3 * i + 2];
            p->cu_full[++p->n_full] = (int32_t)at;
        }
    p->n_all = nt;
    if (keep) {
        int64_t k;
        fr_vision_plan_keep(hp, keep, nt, p->win, p->cu_win, &p->n_win, p->cu_full, &p->n_full, &k);
        if (k < 1) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: every image token was dropped");
            plan_free(p);
            return -1;
        }
        p->n_tok = k;
        p->n = k * p->mu;
    }
    fr_vision_rope_table(hp, p->pos, p->win, p->n, p->cs, p->sn);
    return 0;
}

/* ---------------------------------------------------------------- row ops (shared) */

typedef struct rows_ctx {
    void (*fn)(void *ctx, int64_t r0, int64_t r1);
    void *ctx;
    int64_t n;
} rows_ctx;

static void rows_thread(void *c, int ith, int nth) {
    rows_ctx *r = c;
    int64_t per = (r->n + nth - 1) / nth, r0 = (int64_t)ith * per;
    int64_t r1 = r0 + per < r->n ? r0 + per : r->n;
    if (r0 < r1) r->fn(r->ctx, r0, r1);
}

/* fn over rows [0, n) split across the pool (or inline). */
static void par_rows(fr_pool *pool, int64_t n, void (*fn)(void *, int64_t, int64_t), void *ctx) {
    if (!pool || n < 64) {
        fn(ctx, 0, n);
        return;
    }
    rows_ctx r = {fn, ctx, n};
    fr_pool_run(pool, rows_thread, &r);
}

typedef struct norm_ctx {
    float *out;
    const float *x;
    const fr_tensor *w, *b; /* b absent: RMSNorm */
    int64_t d;
    float eps;
} norm_ctx;

/* RMSNorm or LayerNorm of rows, double accumulators (both paths). */
static void norm_rows(void *c, int64_t r0, int64_t r1) {
    norm_ctx *n = c;
    const float *w = n->w->data, *b = fr_tensor_present(n->b) ? n->b->data : NULL;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = n->x + r * n->d;
        float *o = n->out + r * n->d;
        if (b) {
            double s = 0, ss = 0;
            for (int64_t i = 0; i < n->d; i++) s += x[i];
            double mean = s / (double)n->d;
            for (int64_t i = 0; i < n->d; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
            double rs = 1.0 / sqrt(ss / (double)n->d + (double)n->eps);
            for (int64_t i = 0; i < n->d; i++) o[i] = (float)(((double)x[i] - mean) * rs * w[i] + b[i]);
        } else {
            double ss = 0;
            for (int64_t i = 0; i < n->d; i++) ss += (double)x[i] * x[i];
            double rs = 1.0 / sqrt(ss / (double)n->d + (double)n->eps);
            /* HF: weight * (x * rsqrt(var + eps)) in fp32 */
            for (int64_t i = 0; i < n->d; i++) o[i] = (float)((double)x[i] * rs) * w[i];
        }
    }
}

static void norm(fr_pool *pool, float *out, const float *x, int64_t n, int64_t d,
                 const fr_tensor *w, const fr_tensor *b, float eps) {
    norm_ctx c = {out, x, w, b, d, eps};
    par_rows(pool, n, norm_rows, &c);
}

typedef struct rope_ctx {
    float *qkv;            /* (n, 3*hidden) */
    const float *cs, *sn;  /* (n, half) */
    int n_head, head_dim, hidden;
} rope_ctx;

/* rotate_half RoPE of q and k in place (float math; exact order of HF's q*cos + rot(q)*sin). */
static void rope_rows(void *c, int64_t r0, int64_t r1) {
    rope_ctx *r = c;
    int half = r->head_dim / 2;
    for (int64_t t = r0; t < r1; t++) {
        const float *cs = r->cs + t * half, *sn = r->sn + t * half;
        for (int which = 0; which < 2; which++)
            for (int h = 0; h < r->n_head; h++) {
                float *v = r->qkv + t * 3 * r->hidden + which * r->hidden + h * r->head_dim;
                for (int k = 0; k < half; k++) {
                    float x0 = v[k], x1 = v[k + half];
                    v[k] = x0 * cs[k] - x1 * sn[k];
                    v[k + half] = x1 * cs[k] + x0 * sn[k];
                }
            }
    }
}

typedef struct act_ctx {
    float *a;        /* (n, F): gate (or fc1 output), becomes the activation */
    const float *u;  /* (n, F): up, or NULL */
    int64_t F;
    int kind;        /* 0 silu(a)*u, 1 quick_gelu(a), 2 gelu(a) (erf) */
} act_ctx;

static void act_rows(void *c, int64_t r0, int64_t r1) {
    act_ctx *x = c;
    for (int64_t i = r0 * x->F; i < r1 * x->F; i++) {
        double a = x->a[i];
        if (x->kind == 0) x->a[i] = (float)(a / (1.0 + exp(-a)) * x->u[i]);
        else if (x->kind == 1) x->a[i] = (float)(a / (1.0 + exp(-1.702 * a)));
        else x->a[i] = (float)(0.5 * a * (1.0 + erf(a / sqrt(2.0))));
    }
}

static void act(fr_pool *pool, float *a, const float *u, int64_t n, int64_t F, int kind) {
    act_ctx c = {a, u, F, kind};
    par_rows(pool, n, act_rows, &c);
}

/* ---------------------------------------------------------------- linear layers */

/* y (n, N) = x (n, K) . W^T + b, W (N, K) F32. */
static void linear_ref(float *y, const float *x, int64_t n, const fr_tensor *w, const fr_tensor *b) {
    fr_ref_matmul(y, x, w, (int)n);
    int64_t N = w->ne[1];
    if (fr_tensor_present(b)) {
        const float *bb = b->data;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < N; i++) y[t * N + i] += bb[i];
    }
}

static void linear_fast(float *y, const float *x, int64_t n, const fr_tensor *w,
                        const fr_tensor *b) {
    int64_t N = w->ne[1], K = w->ne[0];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)N, (int)K, 1.0f, x, (int)K,
                w->data, (int)K, 0.0f, y, (int)N);
    if (fr_tensor_present(b)) {
        const float *bb = b->data;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < N; i++) y[t * N + i] += bb[i];
    }
}

/* ---------------------------------------------------------------- attention */

/* out (n, hidden) = attention of qkv (n, 3*hidden) inside the segments cu[0..n_seg]. */
static void attention_ref(float *out, const float *qkv, const int32_t *cu, int n_seg,
                          int n_head, int hd, int hidden) {
    double scale = 1.0 / sqrt((double)hd);
    int64_t maxlen = 0;
    for (int s = 0; s < n_seg; s++)
        if (cu[s + 1] - cu[s] > maxlen) maxlen = cu[s + 1] - cu[s];
    double *p = malloc((size_t)(maxlen ? maxlen : 1) * sizeof(double));
    FR_ASSERT(p);
    int64_t st = 3 * (int64_t)hidden;
    for (int s = 0; s < n_seg; s++) {
        int64_t a = cu[s], e = cu[s + 1];
        for (int64_t i = a; i < e; i++)
            for (int h = 0; h < n_head; h++) {
                const float *q = qkv + i * st + h * hd;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = a; j < e; j++) {
                    const float *k = qkv + j * st + hidden + h * hd;
                    double d = 0;
                    for (int c = 0; c < hd; c++) d += (double)q[c] * k[c];
                    p[j - a] = d * scale;
                    if (p[j - a] > mx) mx = p[j - a];
                }
                for (int64_t j = a; j < e; j++) sum += (p[j - a] = exp(p[j - a] - mx));
                float *o = out + i * hidden + h * hd;
                for (int c = 0; c < hd; c++) {
                    double acc = 0;
                    for (int64_t j = a; j < e; j++)
                        acc += p[j - a] * qkv[j * st + 2 * (int64_t)hidden + h * hd + c];
                    o[c] = (float)(acc / sum);
                }
            }
    }
    free(p);
}

typedef struct soft_ctx {
    float *s;      /* (rows, len) scores */
    int64_t len;
    float scale;
} soft_ctx;

static void soft_rows(void *c, int64_t r0, int64_t r1) {
    soft_ctx *x = c;
    for (int64_t r = r0; r < r1; r++) {
        float *s = x->s + r * x->len;
        float mx = -INFINITY;
        for (int64_t j = 0; j < x->len; j++) mx = s[j] > mx ? s[j] : mx;
        double sum = 0;
        for (int64_t j = 0; j < x->len; j++) sum += (s[j] = expf((s[j] - mx) * x->scale));
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < x->len; j++) s[j] *= inv;
    }
}

/* The fast attention: per segment and head, Q, K, V^T gathered contiguous; scores in chunks of
 * QCHUNK query rows. Scratch: q, k, vt (maxlen * hd) and s (QCHUNK * maxlen), o (QCHUNK * hd). */
typedef struct att_scratch {
    float *q, *k, *vt, *s, *o;
} att_scratch;

static void attention_fast(fr_pool *pool, float *out, const float *qkv, const int32_t *cu,
                           int n_seg, int n_head, int hd, int hidden, att_scratch *w) {
    float scale = 1.0f / sqrtf((float)hd);
    int64_t st = 3 * (int64_t)hidden;
    for (int s = 0; s < n_seg; s++) {
        int64_t a = cu[s], L = cu[s + 1] - cu[s];
        for (int h = 0; h < n_head; h++) {
            for (int64_t j = 0; j < L; j++) {
                const float *r = qkv + (a + j) * st + h * hd;
                memcpy(w->q + j * hd, r, (size_t)hd * sizeof(float));
                memcpy(w->k + j * hd, r + hidden, (size_t)hd * sizeof(float));
                for (int c = 0; c < hd; c++) w->vt[c * L + j] = r[2 * hidden + c];
            }
            for (int64_t q0 = 0; q0 < L; q0 += QCHUNK) {
                int64_t nq = L - q0 < QCHUNK ? L - q0 : QCHUNK;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)L, hd, 1.0f,
                            w->q + q0 * hd, hd, w->k, hd, 0.0f, w->s, (int)L);
                soft_ctx sc = {w->s, L, scale};
                par_rows(pool, nq, soft_rows, &sc);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, hd, (int)L, 1.0f,
                            w->s, (int)L, w->vt, (int)L, 0.0f, w->o, hd);
                for (int64_t i = 0; i < nq; i++)
                    memcpy(out + (a + q0 + i) * hidden + h * hd, w->o + i * hd,
                           (size_t)hd * sizeof(float));
            }
        }
    }
}

/* ---------------------------------------------------------------- the tower */

typedef struct vbufs {
    float *x;    /* (n, hidden) residual stream, window order */
    float *xn;   /* (n, hidden) */
    float *qkv;  /* (n, 3*hidden) */
    float *att;  /* (n, hidden) */
    float *t;    /* (n, hidden) sublayer output */
    float *fa;   /* (n, n_ff) */
    float *fb;   /* (n, n_ff) */
    float *mo;   /* (n_tok, out_hidden) merger output, window order */
    float *px;   /* (n, patch_dim) the kept pixel rows in window order */
    att_scratch as;
} vbufs;

static void bufs_free(vbufs *b) {
    free(b->x), free(b->xn), free(b->qkv), free(b->att), free(b->t), free(b->fa), free(b->fb);
    free(b->mo);
    free(b->px);
    free(b->as.q), free(b->as.k), free(b->as.vt), free(b->as.s), free(b->as.o);
    memset(b, 0, sizeof *b);
}

static int bufs_new(vbufs *b, const fr_vision_hparams *hp, const vplan *p, bool fast,
                    fr_err *err) {
    memset(b, 0, sizeof *b);
    size_t n = (size_t)p->n, H = (size_t)hp->hidden, F = (size_t)hp->n_ff, f = sizeof(float);
    /* the merger's input (n_tok, hidden*mu) is xn; its hidden layer (n_tok, hidden*mu) reuses t */
    size_t sizes[] = {n * H, n * H, n * 3 * H, n * H, n * H, n * F, n * F,
                      (size_t)p->n_tok * (size_t)hp->out_hidden, n * (size_t)fr_vision_patch_dim(hp)};
    float **dst[] = {&b->x, &b->xn, &b->qkv, &b->att, &b->t, &b->fa, &b->fb, &b->mo, &b->px};
    for (size_t i = 0; i < FR_ARRAY_LEN(sizes); i++)
        if (!(*dst[i] = vmalloc(sizes[i] * f, err))) goto fail;
    if (fast) {
        size_t L = 0, hd = (size_t)hp->head_dim;
        for (int s = 0; s < p->n_full; s++)
            if ((size_t)(p->cu_full[s + 1] - p->cu_full[s]) > L) L = (size_t)(p->cu_full[s + 1] - p->cu_full[s]);
        size_t q = L < QCHUNK ? L : QCHUNK;
        if (!(b->as.q = vmalloc(L * hd * f, err)) || !(b->as.k = vmalloc(L * hd * f, err)) ||
            !(b->as.vt = vmalloc(L * hd * f, err)) || !(b->as.s = vmalloc(q * L * f, err)) ||
            !(b->as.o = vmalloc(q * hd * f, err)))
            goto fail;
    }
    return 0;
fail:
    bufs_free(b);
    return -1;
}

static void add_rows(float *x, const float *t, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += t[i];
}

static int tower(const fr_model *m, fr_pool *pool, bool fast, const float *pixels,
                 int64_t n_patches, const int32_t *grid, int n_images, const uint8_t *keep,
                 const fr_cancel *cancel, float *out, fr_err *err) {
    vplan p;
    if (plan_make(m, grid, n_images, n_patches, keep, &p, err) != 0) return -1;
    const fr_vision *v = m->vision;
    const fr_vision_hparams *hp = &v->hp;
    vbufs b;
    if (bufs_new(&b, hp, &p, fast, err) != 0) {
        plan_free(&p);
        return -1;
    }
    if (!fast) pool = NULL;
    void (*lin)(float *, const float *, int64_t, const fr_tensor *, const fr_tensor *) =
        fast ? linear_fast : linear_ref;
    int64_t n = p.n, H = hp->hidden, F = hp->n_ff, mu = p.mu;
    const fr_tensor none = {0};
    /* the kept units' pixel rows in window order, then the patch embedding (into x) */
    const int64_t PD = fr_vision_patch_dim(hp);
    for (int64_t i = 0; i < p.n_tok; i++)
        memcpy(b.px + i * mu * PD, pixels + (int64_t)p.win[i] * mu * PD,
               (size_t)(mu * PD) * sizeof(float));
    lin(b.x, b.px, n, &v->patch_w, &none);
    bool q25 = hp->kind == FR_VISION_QWEN25VL;
    for (int l = 0; l < hp->depth; l++) {
        fr_cancel_reason why = fr_cancel_check(cancel);
        if (why != FR_CANCEL_NONE) {
            fr_err_setc(err, fr_cancel_reason_code(why), "vision: stopped at block %d of %d (%s)",
                        l, hp->depth, fr_cancel_reason_name(why));
            bufs_free(&b);
            plan_free(&p);
            return -1;
        }
        const fr_vision_block *k = &v->blocks[l];
        const int32_t *cu = hp->fullatt[l] ? p.cu_full : p.cu_win;
        int n_seg = hp->fullatt[l] ? p.n_full : p.n_win;
        norm(pool, b.xn, b.x, n, H, &k->norm1_w, &k->norm1_b, hp->eps);
        lin(b.qkv, b.xn, n, &k->qkv_w, &k->qkv_b);
        rope_ctx rc = {b.qkv, p.cs, p.sn, hp->n_head, hp->head_dim, hp->hidden};
        par_rows(pool, n, rope_rows, &rc);
        if (fast) attention_fast(pool, b.att, b.qkv, cu, n_seg, hp->n_head, hp->head_dim, hp->hidden, &b.as);
        else attention_ref(b.att, b.qkv, cu, n_seg, hp->n_head, hp->head_dim, hp->hidden);
        lin(b.t, b.att, n, &k->proj_w, &k->proj_b);
        add_rows(b.x, b.t, n * H);
        norm(pool, b.xn, b.x, n, H, &k->norm2_w, &k->norm2_b, hp->eps);
        if (q25) {
            lin(b.fa, b.xn, n, &k->gate_w, &k->gate_b);
            lin(b.fb, b.xn, n, &k->up_w, &k->up_b);
            act(pool, b.fa, b.fb, n, F, 0);
        } else {
            lin(b.fa, b.xn, n, &k->up_w, &k->up_b);
            act(pool, b.fa, NULL, n, F, 1);
        }
        lin(b.t, b.fa, n, &k->down_w, &k->down_b);
        add_rows(b.x, b.t, n * H);
    }
    /* merger: (n_tok, hidden*mu) rows are mu consecutive normalised patches */
    norm(pool, b.xn, b.x, n, H, &v->merger_ln_w, &v->merger_ln_b, hp->eps);
    lin(b.t, b.xn, p.n_tok, &v->merger_fc1_w, &v->merger_fc1_b);
    act(pool, b.t, NULL, p.n_tok, H * mu, 2);
    lin(b.mo, b.t, p.n_tok, &v->merger_fc2_w, &v->merger_fc2_b);
    /* out row of unit u: its rank among the kept units (u itself when all are kept) */
    int64_t O = hp->out_hidden;
    int64_t *rank = NULL;
    if (keep) {
        rank = malloc(sizeof(int64_t) * (size_t)p.n_all);
        FR_ASSERT(rank);
        for (int64_t u = 0, r = 0; u < p.n_all; u++) rank[u] = keep[u] ? r++ : -1;
    }
    for (int64_t i = 0; i < p.n_tok; i++)
        memcpy(out + (rank ? rank[p.win[i]] : p.win[i]) * O, b.mo + i * O,
               (size_t)O * sizeof(float));
    free(rank);
    bufs_free(&b);
    plan_free(&p);
    return 0;
}

int fr_vision_forward(const fr_model *m, fr_pool *pool, const float *pixels, int64_t n_patches,
                      const int32_t *grid_thw, int n_images, float *out, fr_err *err) {
    return tower(m, pool, true, pixels, n_patches, grid_thw, n_images, NULL, NULL, out, err);
}

int fr_vision_forward_kept(const fr_model *m, fr_pool *pool, const float *pixels,
                           int64_t n_patches, const int32_t *grid_thw, int n_images,
                           const uint8_t *keep, const fr_cancel *cancel, float *out,
                           fr_err *err) {
    return tower(m, pool, true, pixels, n_patches, grid_thw, n_images, keep, cancel, out, err);
}

int fr_vision_forward_ref(const fr_model *m, const float *pixels, int64_t n_patches,
                          const int32_t *grid_thw, int n_images, float *out, fr_err *err) {
    return tower(m, NULL, false, pixels, n_patches, grid_thw, n_images, NULL, NULL, out, err);
}
