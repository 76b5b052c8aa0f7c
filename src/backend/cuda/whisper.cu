/* whisper.cu — the Whisper encoder and decoder on CUDA (cuda_whisper.h).
 *
 * The computation is the CPU reference's (backend/cpu/whisper.c), in bf16 weights and matrix
 * inputs with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F), an fp32 residual stream,
 * fp32 LayerNorm statistics and fp32 softmax; caches in bf16.
 *
 * Encoder, B windows at once (n2 = B * 2T rows before the stride, n = B * T after):
 *   col  = im2col1(mel)                               (n2, 3 M) bf16   (k_wh_elt)
 *   y1   = gelu(col . conv1^T + b1)                   (n2, d) bf16     cuBLAS + bias/GELU epilogue
 *   col  = im2col2(y1) (stride 2)                     (n, 3 d) bf16
 *   x    = gelu(col . conv2^T + b2) + pos             (n, d) f32       epilogue adds positions
 *   per block: xn = LN1(x) bf16; qkv = xn . [Wq; Wk; Wv]^T f32, + (bq, 0, bv) into bf16;
 *        att = attention per window (segments of T rows): k_vit_attn's tensor-core flash kernel
 *        when head_dim % 16 == 0 (Whisper's 64), else k_wh_attn (any head size <= 128);
 *        x += att . Wo^T + bo; xn = LN2(x); x += fc2(gelu(fc1 xn + b)) + b (GELU fused into the
 *        bias epilogue, erf form as HF: cuBLASLt's GELU epilogue is the tanh form, so not used)
 *   enc  = LN_post(x)                                 (n, d) bf16 (and f32 when asked)
 *   cross, per window: [K | V] of every decoder layer in one product:
 *        (T, L * 2d) = enc . [Wk_0; Wv_0; Wk_1; ...]^T + (0, bv_0, 0, bv_1, ...) as bf16, kept as
 *        the window's cross cache (row j: layer l's K at l * 2d, V at l * 2d + d).
 * Decoder step over R rows (rows = sequences, or the tokens of one sequence's prompt):
 *   x = emb[tok] + pos_tab[pos]; per block: xn = LN1(x); qkv = xn . Wqkv^T; q + bq into bf16,
 *   k and v + bv into each row's cache at its position (k_wh_self_kv); self-attention over
 *   positions 0..pos (k_wh_attn; rows of one sequence see each other's keys: the cache write
 *   precedes the attention); x += o(att); LN2; q = xn . Wq^T + bq; cross-attention over the
 *   row's window; x += o(att); LN3, MLP; then LN, logits = xn . proj^T (vocabulary padded to a
 *   multiple of 64 with zero rows) and the argmax per row on the device.
 *   The step reads its rows (token, position, key counts, cache pointers) from one device
 *   block copied from pinned memory before each launch, so one CUDA graph per bucket of
 *   1, 2, 4, ... 64 rows serves every later step of that size (rows past R are dummies on a
 *   private cache).
 * Memory: weights cudaMalloc'd at creation; activations of the step at creation (64 rows);
 * encoder activations grown to the largest batch; caches and the encoder's buffers from the
 * handle's own memory pool, stream-ordered (no implicit device synchronisation).
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/cuda_whisper.h"
#include "backend/cuda/vit_kernels.h"
#include "backend/cuda/whisper_kernels.h"

#include <math.h>
#include <pthread.h>

#define LN_EPS 1e-5f
#define MR FR_CUDA_WHISPER_MAX_ROWS
#define N_BUCKETS 7 /* 1, 2, 4, 8, 16, 32, 64 rows */

typedef struct dlin {
    uint16_t *w; /* bf16 [out][in] */
    float *b;    /* f32 [out], or NULL */
} dlin;

typedef struct dln {
    float *w, *b; /* f32 [d] */
} dln;

typedef struct elayer {
    dln ln1, ln2;
    dlin qkv;     /* [3d][d], bias (bq, 0, bv) */
    dlin o, fc1, fc2;
} elayer;

typedef struct dlayer {
    dln ln1, ln2, ln3;
    uint16_t *qkv_w; /* [3d][d] self-attention q, k, v */
    float *bq, *bv;  /* [d] */
    dlin o;          /* self-attention out */
    dlin cq, co;     /* cross-attention q and out */
    dlin fc1, fc2;
} dlayer;

struct fr_cuda_whisper_cross {
    uint16_t *d; /* bf16 (n_audio_ctx, n_text_layer, 2, d) */
};

/* Encoder activations for cap windows (grown by ensure_enc). */
typedef struct ebufs {
    int cap;
    float *mel;        /* (B, M, 2T) */
    uint16_t *col;     /* im2col, max(n2 * 3M, n * 3d) */
    float *fa;         /* products, max(n2 d, n 3d, n ff, T 2Ld) f32 */
    uint16_t *ha;      /* bf16 activations, max(n2 d, n 3d, n ff) */
    float *x;          /* (n, d) residual stream */
    uint16_t *xn;      /* (n, d) normed bf16 (after the last block: the encoder output) */
    uint16_t *att;     /* (n, d) */
    float *t;          /* (n, d) sublayer outputs */
    float *out;        /* (n, d) encoder output f32 (for the host) */
    int32_t *cu;       /* (B + 1) window starts (k_vit_attn) */
    int32_t *len;      /* (n) keys per row = T (k_wh_attn) */
    uint16_t **rowbase; /* (n) each row's window start in ha (k_wh_attn) */
} ebufs;

/* The rows of one step, copied to the device before each launch (graphs read it). */
typedef struct step_in {
    int32_t tok[MR], pos[MR], len[MR], lenx[MR];
    uint16_t *kvp[MR]; /* self cache of the row's sequence */
    uint16_t *xkp[MR]; /* cross cache of the row's window */
} step_in;

typedef struct sbufs {
    step_in *in;    /* device */
    step_in *in_h;  /* pinned host */
    int32_t *next_h; /* pinned host [MR] */
    float *lg_h;     /* pinned host (MR, V): the logits of a step */
    float *x;       /* (MR, d) */
    uint16_t *xn;   /* (MR, d) */
    float *qkv;     /* (MR, 3d) */
    uint16_t *qh;   /* (MR, d) */
    uint16_t *att;  /* (MR, d) */
    float *t;       /* (MR, d) */
    float *f;       /* (MR, ff) */
    uint16_t *fh;   /* (MR, ff) */
    float *logits;  /* (MR, Vp) */
    int32_t *next;  /* (MR) */
} sbufs;

struct fr_cuda_whisper {
    fr_whisper_hparams hp;
    int V, Vp;             /* vocabulary, padded to a multiple of 64 */
    int dev;
    cudaStream_t st;
    cublasHandle_t cub;
    cudaMemPool_t pool;    /* caches and encoder buffers */
    pthread_mutex_t mu;    /* the stream, cuBLAS, buffers and graphs */
    pthread_mutex_t qmu;   /* the queues below and stats */
    pthread_cond_t qcv;    /* a leader finished a batch */
    struct ereq *eq_head, *eq_tail; /* encoder calls waiting */
    struct sreq *sq_head, *sq_tail; /* step calls waiting */
    bool e_leading, s_leading;      /* a caller is running a batch */
    fr_cuda_whisper_stats stats;
    bool graphs;
    cudaGraphExec_t g[N_BUCKETS];
    uint16_t *conv1_w, *conv2_w; /* [d][3M], [d][3d] */
    float *conv1_b, *conv2_b, *enc_pos;
    elayer *enc;
    dln enc_ln;
    uint16_t *proj;        /* [Vp][d] */
    uint16_t *emb;         /* [V][d]: proj when tied */
    float *dec_pos;        /* [n_text_ctx][d] */
    dlayer *dec;
    dln dec_ln;
    uint16_t *xkv_w;       /* [L 2d][d] */
    float *xkv_b;          /* [L 2d] */
    uint16_t *dummy_kv;    /* the padding rows' cache */
    ebufs e;
    sbufs s;
    void **allocs;         /* cudaMalloc'd at creation, for free */
    int n_allocs, cap_allocs;
};

/* ---------------------------------------------------------------- upload */

static void *dmalloc(fr_cuda_whisper *cw, size_t bytes, fr_err *err) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        (void)cudaGetLastError();
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda whisper: out of device memory (%.1f MiB)",
                    (double)bytes / 1048576.0);
        return NULL;
    }
    if (cw->n_allocs == cw->cap_allocs) {
        int nc = cw->cap_allocs ? 2 * cw->cap_allocs : 256;
        void **na = (void **)realloc(cw->allocs, (size_t)nc * sizeof(void *));
        FR_ASSERT(na);
        cw->allocs = na, cw->cap_allocs = nc;
    }
    cw->allocs[cw->n_allocs++] = p;
    return p;
}

/* From the handle's pool, ordered on its stream. */
static void *pmalloc(fr_cuda_whisper *cw, size_t bytes, fr_err *err) {
    void *p = NULL;
    if (cudaMallocFromPoolAsync(&p, bytes ? bytes : 16, cw->pool, cw->st) != cudaSuccess) {
        (void)cudaGetLastError();
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda whisper: out of device memory (%.1f MiB)",
                    (double)bytes / 1048576.0);
        return NULL;
    }
    return p;
}
static void pfree(fr_cuda_whisper *cw, void *p) {
    if (p) FR_CK(cudaFreeAsync(p, cw->st));
}

static float *up_f32(fr_cuda_whisper *cw, const float *src, size_t n, fr_err *err) {
    float *d = (float *)dmalloc(cw, n * 4, err);
    if (d) FR_CK(cudaMemcpy(d, src, n * 4, cudaMemcpyHostToDevice));
    return d;
}

/* Rows of bf16 weights from several f32 sources stacked: parts[i] of n[i] values (NULL: zeros),
 * into total elements (padding zero). */
static uint16_t *up_bf16_parts(fr_cuda_whisper *cw, const float *const *parts, const size_t *n,
                               int n_parts, size_t total, fr_err *err) {
    uint16_t *h = (uint16_t *)calloc(total ? total : 1, 2);
    if (!h) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda whisper: out of host memory");
        return NULL;
    }
    size_t at = 0;
    for (int i = 0; i < n_parts; i++) {
        FR_ASSERT(at + n[i] <= total);
        if (parts[i])
            for (size_t j = 0; j < n[i]; j++) h[at + j] = fr_f32_to_bf16(parts[i][j]);
        at += n[i];
    }
    uint16_t *d = (uint16_t *)dmalloc(cw, total * 2, err);
    if (d) FR_CK(cudaMemcpy(d, h, total * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}
static uint16_t *up_bf16(fr_cuda_whisper *cw, const float *src, size_t n, fr_err *err) {
    return up_bf16_parts(cw, &src, &n, 1, n, err);
}
/* f32 values of several sources (NULL: zeros) stacked. */
static float *up_f32_parts(fr_cuda_whisper *cw, const float *const *parts, const size_t *n,
                           int n_parts, fr_err *err) {
    size_t total = 0;
    for (int i = 0; i < n_parts; i++) total += n[i];
    float *h = (float *)calloc(total ? total : 1, 4);
    if (!h) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda whisper: out of host memory");
        return NULL;
    }
    size_t at = 0;
    for (int i = 0; i < n_parts; i++) {
        if (parts[i]) memcpy(h + at, parts[i], n[i] * 4);
        at += n[i];
    }
    float *d = up_f32(cw, h, total, err);
    free(h);
    return d;
}

static int up_lin(fr_cuda_whisper *cw, const float *w, const float *b, int out, int in, dlin *d,
                  fr_err *err) {
    if (!(d->w = up_bf16(cw, w, (size_t)out * in, err))) return -1;
    d->b = NULL;
    if (b && !(d->b = up_f32(cw, b, (size_t)out, err))) return -1;
    return 0;
}
static int up_ln(fr_cuda_whisper *cw, const float *w, const float *b, int d, dln *o, fr_err *err) {
    return (o->w = up_f32(cw, w, (size_t)d, err)) && (o->b = up_f32(cw, b, (size_t)d, err)) ? 0 : -1;
}

static void ebufs_free(fr_cuda_whisper *cw) {
    ebufs *e = &cw->e;
    void *p[] = {e->mel, e->col, e->fa, e->ha, e->x, e->xn, e->att, e->t, e->out, e->cu, e->len,
                 e->rowbase};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) pfree(cw, p[i]);
    memset(e, 0, sizeof *e);
}

void fr_cuda_whisper_free(fr_cuda_whisper *cw) {
    if (!cw) return;
    FR_CK(cudaSetDevice(cw->dev));
    for (int i = 0; i < N_BUCKETS; i++)
        if (cw->g[i]) FR_CK(cudaGraphExecDestroy(cw->g[i]));
    if (cw->st) {
        ebufs_free(cw);
        FR_CK(cudaStreamSynchronize(cw->st));
    }
    for (int i = 0; i < cw->n_allocs; i++) FR_CK(cudaFree(cw->allocs[i]));
    if (cw->s.in_h) FR_CK(cudaFreeHost(cw->s.in_h));
    if (cw->s.next_h) FR_CK(cudaFreeHost(cw->s.next_h));
    if (cw->s.lg_h) FR_CK(cudaFreeHost(cw->s.lg_h));
    free(cw->allocs);
    free(cw->enc);
    free(cw->dec);
    if (cw->pool) FR_CK(cudaMemPoolDestroy(cw->pool));
    if (cw->cub) FR_CKB(cublasDestroy(cw->cub));
    if (cw->st) FR_CK(cudaStreamDestroy(cw->st));
    pthread_mutex_destroy(&cw->mu);
    pthread_mutex_destroy(&cw->qmu);
    pthread_cond_destroy(&cw->qcv);
    free(cw);
}

int fr_cuda_whisper_device(const fr_cuda_whisper *cw) { return cw->dev; }

void fr_cuda_whisper_set_graphs(fr_cuda_whisper *cw, bool on) {
    pthread_mutex_lock(&cw->mu);
    cw->graphs = on;
    pthread_mutex_unlock(&cw->mu);
}

fr_cuda_whisper *fr_cuda_whisper_new(const fr_whisper_model *m, int device, fr_err *err) {
    const fr_whisper_hparams *hp = &m->hp;
    const int d = hp->n_audio_state;
    if (hp->n_text_state != d || d % hp->n_audio_head || d % hp->n_text_head ||
        d / hp->n_audio_head > FRK_WH_MAX_HEAD_DIM || d / hp->n_text_head > FRK_WH_MAX_HEAD_DIM) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "cuda whisper: widths %d / %d with %d / %d heads "
                    "not supported (equal widths, head size at most %d)", d, hp->n_text_state,
                    hp->n_audio_head, hp->n_text_head, FRK_WH_MAX_HEAD_DIM);
        return NULL;
    }
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || device < 0 || device >= n_dev) {
        (void)cudaGetLastError();
        fr_err_setc(err, FR_ERR_UNAVAILABLE, "cuda whisper: no CUDA device %d (%d present)",
                    device, n_dev);
        return NULL;
    }
    fr_cuda_whisper *cw = (fr_cuda_whisper *)calloc(1, sizeof *cw);
    FR_ASSERT(cw);
    pthread_mutex_init(&cw->mu, NULL);
    pthread_mutex_init(&cw->qmu, NULL);
    pthread_cond_init(&cw->qcv, NULL);
    cw->hp = *hp, cw->dev = device, cw->graphs = true;
    cw->V = hp->n_vocab, cw->Vp = (hp->n_vocab + 63) / 64 * 64;
    FR_CK(cudaSetDevice(device));
    FR_CK(cudaStreamCreateWithFlags(&cw->st, cudaStreamNonBlocking));
    FR_CKB(cublasCreate(&cw->cub));
    FR_CKB(cublasSetStream(cw->cub, cw->st));
    {
        cudaMemPoolProps pp;
        memset(&pp, 0, sizeof pp);
        pp.allocType = cudaMemAllocationTypePinned;
        pp.location.type = cudaMemLocationTypeDevice;
        pp.location.id = device;
        FR_CK(cudaMemPoolCreate(&cw->pool, &pp));
        uint64_t keep = UINT64_MAX; /* freed blocks stay in the pool for the next request */
        FR_CK(cudaMemPoolSetAttribute(cw->pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    const int M = hp->n_mels, T = hp->n_audio_ctx, ff = hp->n_audio_ff, L = hp->n_text_layer;
    const int dff = hp->n_text_ff, C = hp->n_text_ctx;
    const size_t dd = (size_t)d * d;
    void *ws = dmalloc(cw, 32u << 20, err); /* cuBLAS workspace: no allocation inside a capture */
    if (!ws) goto fail;
    FR_CKB(cublasSetWorkspace(cw->cub, ws, 32u << 20));
    cw->enc = (elayer *)calloc((size_t)hp->n_audio_layer, sizeof(elayer));
    cw->dec = (dlayer *)calloc((size_t)L, sizeof(dlayer));
    FR_ASSERT(cw->enc && cw->dec);
    if (!(cw->conv1_w = up_bf16(cw, m->conv1_w, (size_t)d * M * 3, err)) ||
        !(cw->conv1_b = up_f32(cw, m->conv1_b, (size_t)d, err)) ||
        !(cw->conv2_w = up_bf16(cw, m->conv2_w, dd * 3, err)) ||
        !(cw->conv2_b = up_f32(cw, m->conv2_b, (size_t)d, err)) ||
        !(cw->enc_pos = up_f32(cw, m->enc_pos, (size_t)T * d, err)) ||
        up_ln(cw, m->enc_ln_w, m->enc_ln_b, d, &cw->enc_ln, err))
        goto fail;
    for (int l = 0; l < hp->n_audio_layer; l++) {
        const fr_whisper_layer *S = &m->enc[l];
        elayer *E = &cw->enc[l];
        const float *wp[3] = {S->attn.q_w, S->attn.k_w, S->attn.v_w};
        const float *bp[3] = {S->attn.q_b, NULL, S->attn.v_b};
        const size_t wn[3] = {dd, dd, dd}, bn[3] = {(size_t)d, (size_t)d, (size_t)d};
        if (up_ln(cw, S->attn_ln_w, S->attn_ln_b, d, &E->ln1, err) ||
            up_ln(cw, S->mlp_ln_w, S->mlp_ln_b, d, &E->ln2, err) ||
            !(E->qkv.w = up_bf16_parts(cw, wp, wn, 3, 3 * dd, err)) ||
            !(E->qkv.b = up_f32_parts(cw, bp, bn, 3, err)) ||
            up_lin(cw, S->attn.o_w, S->attn.o_b, d, d, &E->o, err) ||
            up_lin(cw, S->fc1_w, S->fc1_b, ff, d, &E->fc1, err) ||
            up_lin(cw, S->fc2_w, S->fc2_b, d, ff, &E->fc2, err))
            goto fail;
    }
    {
        const float *pp = m->proj;
        const size_t pn = (size_t)cw->V * d;
        if (!(cw->proj = up_bf16_parts(cw, &pp, &pn, 1, (size_t)cw->Vp * d, err))) goto fail;
        if (m->tok_emb == m->proj) cw->emb = cw->proj;
        else if (!(cw->emb = up_bf16(cw, m->tok_emb, pn, err))) goto fail;
    }
    if (!(cw->dec_pos = up_f32(cw, m->dec_pos, (size_t)C * d, err)) ||
        up_ln(cw, m->dec_ln_w, m->dec_ln_b, d, &cw->dec_ln, err))
        goto fail;
    {
        const float **xw = (const float **)calloc((size_t)2 * L, sizeof(float *));
        const float **xb = (const float **)calloc((size_t)2 * L, sizeof(float *));
        size_t *xn = (size_t *)calloc((size_t)2 * L, sizeof(size_t));
        size_t *xbn = (size_t *)calloc((size_t)2 * L, sizeof(size_t));
        FR_ASSERT(xw && xb && xn && xbn);
        for (int l = 0; l < L; l++) {
            xw[2 * l] = m->dec[l].cross.k_w, xw[2 * l + 1] = m->dec[l].cross.v_w;
            xb[2 * l] = NULL, xb[2 * l + 1] = m->dec[l].cross.v_b;
            xn[2 * l] = xn[2 * l + 1] = dd;
            xbn[2 * l] = xbn[2 * l + 1] = (size_t)d;
        }
        cw->xkv_w = up_bf16_parts(cw, xw, xn, 2 * L, 2 * (size_t)L * dd, err);
        cw->xkv_b = cw->xkv_w ? up_f32_parts(cw, xb, xbn, 2 * L, err) : NULL;
        free(xw), free(xb), free(xn), free(xbn);
        if (!cw->xkv_b) goto fail;
    }
    for (int l = 0; l < L; l++) {
        const fr_whisper_layer *S = &m->dec[l];
        dlayer *D = &cw->dec[l];
        const float *wp[3] = {S->attn.q_w, S->attn.k_w, S->attn.v_w};
        const size_t wn[3] = {dd, dd, dd};
        if (up_ln(cw, S->attn_ln_w, S->attn_ln_b, d, &D->ln1, err) ||
            up_ln(cw, S->cross_ln_w, S->cross_ln_b, d, &D->ln2, err) ||
            up_ln(cw, S->mlp_ln_w, S->mlp_ln_b, d, &D->ln3, err) ||
            !(D->qkv_w = up_bf16_parts(cw, wp, wn, 3, 3 * dd, err)) ||
            !(D->bq = up_f32(cw, S->attn.q_b, (size_t)d, err)) ||
            !(D->bv = up_f32(cw, S->attn.v_b, (size_t)d, err)) ||
            up_lin(cw, S->attn.o_w, S->attn.o_b, d, d, &D->o, err) ||
            up_lin(cw, S->cross.q_w, S->cross.q_b, d, d, &D->cq, err) ||
            up_lin(cw, S->cross.o_w, S->cross.o_b, d, d, &D->co, err) ||
            up_lin(cw, S->fc1_w, S->fc1_b, dff, d, &D->fc1, err) ||
            up_lin(cw, S->fc2_w, S->fc2_b, d, dff, &D->fc2, err))
            goto fail;
    }
    {
        sbufs *s = &cw->s;
        struct { void **p; size_t bytes; } want[] = {
            {(void **)&s->in, sizeof(step_in)},
            {(void **)&s->x, (size_t)MR * d * 4},      {(void **)&s->xn, (size_t)MR * d * 2},
            {(void **)&s->qkv, (size_t)MR * 3 * d * 4}, {(void **)&s->qh, (size_t)MR * d * 2},
            {(void **)&s->att, (size_t)MR * d * 2},    {(void **)&s->t, (size_t)MR * d * 4},
            {(void **)&s->f, (size_t)MR * dff * 4},    {(void **)&s->fh, (size_t)MR * dff * 2},
            {(void **)&s->logits, (size_t)MR * cw->Vp * 4}, {(void **)&s->next, (size_t)MR * 4},
            {(void **)&cw->dummy_kv, (size_t)2 * L * C * d * 2},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if (!(*want[i].p = dmalloc(cw, want[i].bytes, err))) goto fail;
        if (cudaMallocHost((void **)&s->in_h, sizeof(step_in)) != cudaSuccess ||
            cudaMallocHost((void **)&s->next_h, (size_t)MR * 4) != cudaSuccess ||
            cudaMallocHost((void **)&s->lg_h, (size_t)MR * cw->V * 4) != cudaSuccess) {
            (void)cudaGetLastError();
            fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda whisper: out of pinned host memory");
            goto fail;
        }
        memset(s->in_h, 0, sizeof(step_in));
    }
    return cw;
fail:
    fr_cuda_whisper_free(cw);
    return NULL;
}

/* ---------------------------------------------------------------- products */

/* y (n, M) f32 = x (n, K) bf16 . W^T (W bf16 [M][K]). */
static void gemm(fr_cuda_whisper *cw, const uint16_t *x, int n, const uint16_t *W, int M, int K,
                 float *y) {
    const float one = 1.f, zero = 0.f;
    FR_CKB(cublasGemmEx(cw->cub, CUBLAS_OP_T, CUBLAS_OP_N, M, n, K, &one, W, CUDA_R_16BF, K, x,
                        CUDA_R_16BF, K, &zero, y, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
}

/* ---------------------------------------------------------------- encoder */

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

static int ensure_enc(fr_cuda_whisper *cw, int B, fr_err *err) {
    ebufs *e = &cw->e;
    if (B <= e->cap) return 0;
    ebufs_free(cw);
    const fr_whisper_hparams *hp = &cw->hp;
    const size_t T = (size_t)hp->n_audio_ctx, d = (size_t)hp->n_audio_state, M = (size_t)hp->n_mels;
    const size_t ff = (size_t)hp->n_audio_ff, L = (size_t)hp->n_text_layer;
    const size_t n = (size_t)B * T, n2 = 2 * n;
    const size_t fa = zmax(zmax(n2 * d, n * 3 * d), zmax(n * ff, T * 2 * L * d));
    const size_t ha = zmax(zmax(n2 * d, n * 3 * d), n * ff);
    struct { void **p; size_t bytes; } want[] = {
        {(void **)&e->mel, (size_t)B * M * 2 * T * 4},
        {(void **)&e->col, zmax(n2 * 3 * M, n * 3 * d) * 2},
        {(void **)&e->fa, fa * 4}, {(void **)&e->ha, ha * 2},
        {(void **)&e->x, n * d * 4}, {(void **)&e->xn, n * d * 2}, {(void **)&e->att, n * d * 2},
        {(void **)&e->t, n * d * 4}, {(void **)&e->out, n * d * 4},
        {(void **)&e->cu, ((size_t)B + 1) * 4}, {(void **)&e->len, n * 4},
        {(void **)&e->rowbase, n * sizeof(uint16_t *)},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!(*want[i].p = pmalloc(cw, want[i].bytes, err))) {
            ebufs_free(cw);
            return -1;
        }
    /* the constant tables of the attention: window starts, key counts, row bases */
    int32_t *cu = (int32_t *)malloc(((size_t)B + 1) * 4), *len = (int32_t *)malloc(n * 4);
    uint16_t **rb = (uint16_t **)malloc(n * sizeof(uint16_t *));
    FR_ASSERT(cu && len && rb);
    for (int b = 0; b <= B; b++) cu[b] = (int32_t)(b * T);
    for (size_t r = 0; r < n; r++) len[r] = (int32_t)T, rb[r] = e->ha + (r / T) * T * 3 * d;
    FR_CK(cudaMemcpyAsync(e->cu, cu, ((size_t)B + 1) * 4, cudaMemcpyHostToDevice, cw->st));
    FR_CK(cudaMemcpyAsync(e->len, len, n * 4, cudaMemcpyHostToDevice, cw->st));
    FR_CK(cudaMemcpyAsync(e->rowbase, rb, n * sizeof(uint16_t *), cudaMemcpyHostToDevice, cw->st));
    FR_CK(cudaStreamSynchronize(cw->st)); /* the host tables are freed now */
    free(cu), free(len), free(rb);
    e->cap = B;
    return 0;
}

/* The cross cache of one encoder output (bf16 (T, d) on the device). */
static fr_cuda_whisper_cross *cross_from(fr_cuda_whisper *cw, const uint16_t *encn, fr_err *err) {
    const fr_whisper_hparams *hp = &cw->hp;
    const int T = hp->n_audio_ctx, d = hp->n_text_state, W = 2 * hp->n_text_layer * d;
    fr_cuda_whisper_cross *x = (fr_cuda_whisper_cross *)calloc(1, sizeof *x);
    FR_ASSERT(x);
    if (!(x->d = (uint16_t *)pmalloc(cw, (size_t)T * W * 2, err))) {
        free(x);
        return NULL;
    }
    gemm(cw, encn, T, cw->xkv_w, W, d, cw->e.fa);
    frk_wh_bias_act(cw->e.fa, cw->xkv_b, T, W, 0, NULL, 0, NULL, x->d, cw->st);
    return x;
}

/* ---------------------------------------------------------------- combining callers
 *
 * Calls from several threads are combined (flat combining, no scheduler thread): a caller queues
 * its request and waits; whoever finds no leader becomes it, takes what is queued (windows up to
 * COMBINE_WINDOWS for the encoder, rows up to MR for a step, whole requests in arrival order),
 * runs them as one batch under the handle's mutex, marks them done and wakes the others. So the
 * decoder steps of concurrent requests (each its own caches, lengths and windows) run as one
 * step, and their windows as one encoder batch; a lone caller runs at once. */

#define COMBINE_WINDOWS 8 /* windows of concurrent callers put into one encoder batch */

/* One caller's windows. */
typedef struct ereq {
    const float *mel;           /* (B, n_mels, 2T) host */
    int B;
    float *enc;                 /* (B, T, d) host, or NULL */
    fr_cuda_whisper_cross **xo; /* B caches out, or NULL */
    int rc;
    fr_err err;
    bool done;
    struct ereq *next;
} ereq;

/* One caller's rows of a decoder step. */
typedef struct sreq {
    int n;                     /* rows */
    int32_t tok[MR], pos[MR];
    uint16_t *kvp[MR], *xkp[MR];
    float *lg;                 /* host (lg_rows, V) for rows lg_first.., or NULL */
    int lg_first, lg_rows;
    int *next;                 /* host (n) argmax per row, or NULL */
    bool done;
    struct sreq *link;
} sreq;

/* The encoder on the windows of nr requests (Bt windows in all). Caller holds the mutex. */
static void encode_batch(fr_cuda_whisper *cw, ereq *const *rs, int nr, int Bt) {
    const fr_whisper_hparams *hp = &cw->hp;
    const int T = hp->n_audio_ctx, T2 = 2 * T, d = hp->n_audio_state, M = hp->n_mels;
    const int ff = hp->n_audio_ff, H = hp->n_audio_head, D = d / H;
    const int n = Bt * T, n2 = Bt * T2;
    fr_err err = {};
    if (ensure_enc(cw, Bt, &err)) {
        for (int i = 0; i < nr; i++) rs[i]->rc = -1, rs[i]->err = err;
        return;
    }
    ebufs *e = &cw->e;
    cudaStream_t st = cw->st;
    bool want_f32 = false;
    for (int i = 0, at = 0; i < nr; at += rs[i]->B, i++) {
        FR_CK(cudaMemcpyAsync(e->mel + (size_t)at * M * T2, rs[i]->mel,
                              (size_t)rs[i]->B * M * T2 * 4, cudaMemcpyHostToDevice, st));
        want_f32 = want_f32 || rs[i]->enc;
    }
    frk_wh_im2col1(e->mel, Bt, M, T2, e->col, st);
    gemm(cw, e->col, n2, cw->conv1_w, d, 3 * M, e->fa);
    frk_wh_bias_act(e->fa, cw->conv1_b, n2, d, 1, NULL, 0, NULL, e->ha, st);
    frk_wh_im2col2(e->ha, Bt, T2, d, e->col, st);
    gemm(cw, e->col, n, cw->conv2_w, d, 3 * d, e->fa);
    frk_wh_bias_act(e->fa, cw->conv2_b, n, d, 1, cw->enc_pos, T, e->x, NULL, st);
    const float scale = 1.f / sqrtf((float)D);
    for (int l = 0; l < hp->n_audio_layer; l++) {
        const elayer *E = &cw->enc[l];
        frk_wh_layernorm(e->x, E->ln1.w, E->ln1.b, n, d, LN_EPS, NULL, e->xn, st);
        gemm(cw, e->xn, n, E->qkv.w, 3 * d, d, e->fa);
        frk_wh_bias_act(e->fa, E->qkv.b, n, 3 * d, 0, NULL, 0, NULL, e->ha, st);
        if (D % 16 == 0 && D <= FRK_VIT_MAX_HEAD_DIM)
            frk_vit_attention(e->ha, e->cu, Bt, T, H, D, e->att, st);
        else
            frk_wh_attention(e->ha, 3 * d, e->rowbase, (size_t)d, 2 * (size_t)d, 3 * d, e->len, n,
                             H, D, scale, e->att, d, st);
        gemm(cw, e->att, n, E->o.w, d, d, e->t);
        frk_vit_residual(e->x, e->t, E->o.b, n, d, st);
        frk_wh_layernorm(e->x, E->ln2.w, E->ln2.b, n, d, LN_EPS, NULL, e->xn, st);
        gemm(cw, e->xn, n, E->fc1.w, ff, d, e->fa);
        frk_wh_bias_act(e->fa, E->fc1.b, n, ff, 1, NULL, 0, NULL, e->ha, st);
        gemm(cw, e->ha, n, E->fc2.w, d, ff, e->t);
        frk_vit_residual(e->x, e->t, E->fc2.b, n, d, st);
    }
    frk_wh_layernorm(e->x, cw->enc_ln.w, cw->enc_ln.b, n, d, LN_EPS, want_f32 ? e->out : NULL,
                     e->xn, st);
    for (int i = 0, at = 0; i < nr; at += rs[i]->B, i++) {
        ereq *r = rs[i];
        r->rc = 0;
        if (r->enc)
            FR_CK(cudaMemcpyAsync(r->enc, e->out + (size_t)at * T * d, (size_t)r->B * T * d * 4,
                                  cudaMemcpyDeviceToHost, st));
        if (!r->xo) continue;
        for (int b = 0; b < r->B; b++)
            if (!(r->xo[b] = cross_from(cw, e->xn + (size_t)(at + b) * T * d, &r->err))) {
                for (int k = 0; k < b; k++) {
                    pfree(cw, r->xo[k]->d);
                    free(r->xo[k]);
                    r->xo[k] = NULL;
                }
                r->rc = -1;
                break;
            }
    }
    FR_CK(cudaStreamSynchronize(st));
}

int fr_cuda_whisper_encode(fr_cuda_whisper *cw, const float *mel, int B, float *enc,
                           fr_cuda_whisper_cross **xo, fr_err *err) {
    if (B < 1 || B > FR_CUDA_WHISPER_MAX_BATCH) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "cuda whisper: a batch of %d windows (1..%d)", B,
                    FR_CUDA_WHISPER_MAX_BATCH);
        return -1;
    }
    if (xo)
        for (int b = 0; b < B; b++) xo[b] = NULL;
    ereq me;
    memset(&me, 0, sizeof me);
    me.mel = mel, me.B = B, me.enc = enc, me.xo = xo;
    pthread_mutex_lock(&cw->qmu);
    cw->stats.enc_calls++;
    if (cw->eq_tail) cw->eq_tail->next = &me;
    else cw->eq_head = &me;
    cw->eq_tail = &me;
    while (!me.done) {
        if (cw->e_leading) {
            pthread_cond_wait(&cw->qcv, &cw->qmu);
            continue;
        }
        cw->e_leading = true;
        ereq *rs[COMBINE_WINDOWS + FR_CUDA_WHISPER_MAX_BATCH];
        int nr = 0, Bt = 0;
        while (cw->eq_head && (nr == 0 || Bt + cw->eq_head->B <= COMBINE_WINDOWS)) {
            ereq *r = cw->eq_head;
            cw->eq_head = r->next;
            if (!cw->eq_head) cw->eq_tail = NULL;
            rs[nr++] = r, Bt += r->B;
        }
        pthread_mutex_unlock(&cw->qmu);
        pthread_mutex_lock(&cw->mu);
        FR_CK(cudaSetDevice(cw->dev));
        encode_batch(cw, rs, nr, Bt);
        pthread_mutex_unlock(&cw->mu);
        pthread_mutex_lock(&cw->qmu);
        for (int i = 0; i < nr; i++) rs[i]->done = true;
        cw->stats.encodes++;
        cw->stats.enc_windows += Bt;
        cw->e_leading = false;
        pthread_cond_broadcast(&cw->qcv);
    }
    pthread_mutex_unlock(&cw->qmu);
    if (me.rc) *err = me.err;
    return me.rc;
}

fr_cuda_whisper_cross *fr_cuda_whisper_cross_new(fr_cuda_whisper *cw, const float *enc,
                                                 fr_err *err) {
    const fr_whisper_hparams *hp = &cw->hp;
    const int T = hp->n_audio_ctx, d = hp->n_audio_state;
    fr_cuda_whisper_cross *x = NULL;
    pthread_mutex_lock(&cw->mu);
    FR_CK(cudaSetDevice(cw->dev));
    if (ensure_enc(cw, 1, err) == 0) {
        FR_CK(cudaMemcpyAsync(cw->e.out, enc, (size_t)T * d * 4, cudaMemcpyHostToDevice, cw->st));
        frk_wh_bias_act(cw->e.out, NULL, T, d, 0, NULL, 0, NULL, cw->e.xn, cw->st);
        x = cross_from(cw, cw->e.xn, err);
        FR_CK(cudaStreamSynchronize(cw->st));
    }
    pthread_mutex_unlock(&cw->mu);
    return x;
}

void fr_cuda_whisper_cross_free(fr_cuda_whisper *cw, fr_cuda_whisper_cross *x) {
    if (!x) return;
    pthread_mutex_lock(&cw->mu);
    FR_CK(cudaSetDevice(cw->dev));
    pfree(cw, x->d);
    pthread_mutex_unlock(&cw->mu);
    free(x);
}

/* ---------------------------------------------------------------- caches */

static size_t kv_elems(const fr_whisper_hparams *hp) {
    return (size_t)2 * hp->n_text_layer * hp->n_text_ctx * hp->n_text_state;
}

fr_cuda_whisper_kv *fr_cuda_whisper_kv_new(fr_cuda_whisper *cw, fr_err *err) {
    fr_cuda_whisper_kv *kv = (fr_cuda_whisper_kv *)calloc(1, sizeof *kv);
    FR_ASSERT(kv);
    kv->cap = cw->hp.n_text_ctx;
    pthread_mutex_lock(&cw->mu);
    FR_CK(cudaSetDevice(cw->dev));
    kv->d = pmalloc(cw, kv_elems(&cw->hp) * 2, err);
    pthread_mutex_unlock(&cw->mu);
    if (!kv->d) {
        free(kv);
        return NULL;
    }
    return kv;
}

void fr_cuda_whisper_kv_free(fr_cuda_whisper *cw, fr_cuda_whisper_kv *kv) {
    if (!kv) return;
    pthread_mutex_lock(&cw->mu);
    FR_CK(cudaSetDevice(cw->dev));
    pfree(cw, kv->d);
    pthread_mutex_unlock(&cw->mu);
    free(kv);
}

void fr_cuda_whisper_kv_copy(fr_cuda_whisper *cw, fr_cuda_whisper_kv *dst,
                             const fr_cuda_whisper_kv *src) {
    if (dst == src) return;
    const fr_whisper_hparams *hp = &cw->hp;
    const size_t per = (size_t)hp->n_text_ctx * hp->n_text_state;
    const size_t used = (size_t)src->n * hp->n_text_state;
    pthread_mutex_lock(&cw->mu);
    FR_CK(cudaSetDevice(cw->dev));
    if (used)
        FR_CK(cudaMemcpy2DAsync(dst->d, per * 2, src->d, per * 2, used * 2,
                                (size_t)2 * hp->n_text_layer, cudaMemcpyDeviceToDevice, cw->st));
    dst->n = src->n;
    pthread_mutex_unlock(&cw->mu);
}

/* ---------------------------------------------------------------- decoder step */

static void step_kernels(fr_cuda_whisper *cw, int R) {
    const fr_whisper_hparams *hp = &cw->hp;
    const int d = hp->n_text_state, H = hp->n_text_head, D = d / H, ff = hp->n_text_ff;
    const int L = hp->n_text_layer, C = hp->n_text_ctx;
    const float scale = 1.f / sqrtf((float)D);
    sbufs *s = &cw->s;
    step_in *in = s->in;
    cudaStream_t st = cw->st;
    frk_wh_embed(in->tok, in->pos, cw->emb, cw->dec_pos, R, d, s->x, st);
    for (int l = 0; l < L; l++) {
        const dlayer *Y = &cw->dec[l];
        const size_t koff = (size_t)2 * l * C * d, voff = koff + (size_t)C * d;
        frk_wh_layernorm(s->x, Y->ln1.w, Y->ln1.b, R, d, LN_EPS, NULL, s->xn, st);
        gemm(cw, s->xn, R, Y->qkv_w, 3 * d, d, s->qkv);
        frk_wh_self_kv(s->qkv, Y->bq, Y->bv, in->pos, in->kvp, koff, voff, R, d, s->qh, st);
        frk_wh_attention(s->qh, d, in->kvp, koff, voff, d, in->len, R, H, D, scale, s->att, d, st);
        gemm(cw, s->att, R, Y->o.w, d, d, s->t);
        frk_vit_residual(s->x, s->t, Y->o.b, R, d, st);
        frk_wh_layernorm(s->x, Y->ln2.w, Y->ln2.b, R, d, LN_EPS, NULL, s->xn, st);
        gemm(cw, s->xn, R, Y->cq.w, d, d, s->t);
        frk_wh_bias_act(s->t, Y->cq.b, R, d, 0, NULL, 0, NULL, s->qh, st);
        const size_t xoff = (size_t)2 * l * d;
        frk_wh_attention(s->qh, d, in->xkp, xoff, xoff + d, 2 * L * d, in->lenx, R, H, D, scale,
                         s->att, d, st);
        gemm(cw, s->att, R, Y->co.w, d, d, s->t);
        frk_vit_residual(s->x, s->t, Y->co.b, R, d, st);
        frk_wh_layernorm(s->x, Y->ln3.w, Y->ln3.b, R, d, LN_EPS, NULL, s->xn, st);
        gemm(cw, s->xn, R, Y->fc1.w, ff, d, s->f);
        frk_wh_bias_act(s->f, Y->fc1.b, R, ff, 1, NULL, 0, NULL, s->fh, st);
        gemm(cw, s->fh, R, Y->fc2.w, d, ff, s->t);
        frk_vit_residual(s->x, s->t, Y->fc2.b, R, d, st);
    }
    frk_wh_layernorm(s->x, cw->dec_ln.w, cw->dec_ln.b, R, d, LN_EPS, NULL, s->xn, st);
    gemm(cw, s->xn, R, cw->proj, cw->Vp, d, s->logits);
    frk_wh_argmax(s->logits, R, cw->V, cw->Vp, s->next, st);
}

/* Runs the requests' rows (R in all, padded to the bucket) as one step and hands each request
 * its logits rows and argmax. Caller holds the mutex. */
static void step_batch(fr_cuda_whisper *cw, sreq *const *rs, int nr, int R) {
    FR_ASSERT(R >= 1 && R <= MR);
    int b = 0;
    while ((1 << b) < R) b++;
    const int Rb = 1 << b;
    step_in *h = cw->s.in_h;
    bool want_lg = false;
    for (int i = 0, at = 0; i < nr; at += rs[i]->n, i++) {
        const sreq *q = rs[i];
        for (int r = 0; r < q->n; r++) {
            h->tok[at + r] = q->tok[r], h->pos[at + r] = q->pos[r];
            h->len[at + r] = q->pos[r] + 1, h->lenx[at + r] = cw->hp.n_audio_ctx;
            h->kvp[at + r] = q->kvp[r], h->xkp[at + r] = q->xkp[r];
        }
        want_lg = want_lg || (q->lg && q->lg_rows > 0);
    }
    for (int r = R; r < Rb; r++) { /* dummy rows: token 0 at position 0 of a private cache */
        h->tok[r] = 0, h->pos[r] = 0, h->len[r] = 1, h->lenx[r] = cw->hp.n_audio_ctx;
        h->kvp[r] = cw->dummy_kv, h->xkp[r] = h->xkp[0];
    }
    cudaStream_t st = cw->st;
    FR_CK(cudaMemcpyAsync(cw->s.in, h, sizeof(step_in), cudaMemcpyHostToDevice, st));
    if (cw->graphs) {
        if (!cw->g[b]) {
            cudaGraph_t graph;
            FR_CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            step_kernels(cw, Rb);
            FR_CK(cudaStreamEndCapture(st, &graph));
            FR_CK(cudaGraphInstantiate(&cw->g[b], graph, 0));
            FR_CK(cudaGraphDestroy(graph));
        }
        FR_CK(cudaGraphLaunch(cw->g[b], st));
    } else {
        step_kernels(cw, Rb);
    }
    FR_CK(cudaMemcpyAsync(cw->s.next_h, cw->s.next, (size_t)R * 4, cudaMemcpyDeviceToHost, st));
    if (want_lg)
        FR_CK(cudaMemcpy2DAsync(cw->s.lg_h, (size_t)cw->V * 4, cw->s.logits, (size_t)cw->Vp * 4,
                                (size_t)cw->V * 4, (size_t)R, cudaMemcpyDeviceToHost, st));
    FR_CK(cudaStreamSynchronize(st));
    for (int i = 0, at = 0; i < nr; at += rs[i]->n, i++) {
        const sreq *q = rs[i];
        if (q->next) memcpy(q->next, cw->s.next_h + at, (size_t)q->n * 4);
        if (q->lg && q->lg_rows > 0) {
            FR_ASSERT(q->lg_first >= 0 && q->lg_first + q->lg_rows <= q->n);
            memcpy(q->lg, cw->s.lg_h + (size_t)(at + q->lg_first) * cw->V,
                   (size_t)q->lg_rows * cw->V * 4);
        }
    }
}

/* Queues q, waits until a leader (maybe this caller) has run it. */
static void step_submit(fr_cuda_whisper *cw, sreq *q) {
    pthread_mutex_lock(&cw->qmu);
    cw->stats.step_calls++;
    q->done = false, q->link = NULL;
    if (cw->sq_tail) cw->sq_tail->link = q;
    else cw->sq_head = q;
    cw->sq_tail = q;
    while (!q->done) {
        if (cw->s_leading) {
            pthread_cond_wait(&cw->qcv, &cw->qmu);
            continue;
        }
        cw->s_leading = true;
        sreq *rs[MR];
        int nr = 0, R = 0;
        while (cw->sq_head && R + cw->sq_head->n <= MR) {
            sreq *r = cw->sq_head;
            cw->sq_head = r->link;
            if (!cw->sq_head) cw->sq_tail = NULL;
            rs[nr++] = r, R += r->n;
        }
        pthread_mutex_unlock(&cw->qmu);
        pthread_mutex_lock(&cw->mu);
        FR_CK(cudaSetDevice(cw->dev));
        step_batch(cw, rs, nr, R);
        pthread_mutex_unlock(&cw->mu);
        pthread_mutex_lock(&cw->qmu);
        for (int i = 0; i < nr; i++) rs[i]->done = true;
        cw->stats.steps++;
        cw->stats.step_rows += R;
        cw->s_leading = false;
        pthread_cond_broadcast(&cw->qcv);
    }
    pthread_mutex_unlock(&cw->qmu);
}

int fr_cuda_whisper_decode(fr_cuda_whisper *cw, const fr_cuda_whisper_cross *x,
                           fr_cuda_whisper_kv *kv, const int *tokens, int n, float *logits,
                           bool all, fr_err *err) {
    const fr_whisper_hparams *hp = &cw->hp;
    if (n < 1 || kv->n + n > kv->cap) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: %d tokens after %d pass the %d positions",
                    n, kv->n, kv->cap);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: token %d out of range", tokens[i]);
            return -1;
        }
    sreq *q = (sreq *)malloc(sizeof *q);
    FR_ASSERT(q);
    for (int c0 = 0; c0 < n; c0 += MR) { /* the rows of one chunk see each other's keys */
        const int R = FR_MIN(MR, n - c0);
        q->n = R;
        for (int r = 0; r < R; r++) {
            q->tok[r] = tokens[c0 + r], q->pos[r] = kv->n + c0 + r;
            q->kvp[r] = (uint16_t *)kv->d, q->xkp[r] = x->d;
        }
        const bool last = c0 + R == n;
        q->lg = all ? logits + (size_t)c0 * hp->n_vocab : last ? logits : NULL;
        q->lg_first = all ? 0 : R - 1;
        q->lg_rows = all ? R : last ? 1 : 0;
        q->next = NULL;
        step_submit(cw, q);
    }
    free(q);
    kv->n += n;
    return 0;
}

int fr_cuda_whisper_step(fr_cuda_whisper *cw, int n_seq, fr_cuda_whisper_kv *const *kv,
                         const fr_cuda_whisper_cross *const *x, const int *tokens, float *logits,
                         int *next, fr_err *err) {
    const fr_whisper_hparams *hp = &cw->hp;
    if (n_seq < 1 || n_seq > MR) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "cuda whisper: a step of %d sequences (1..%d)",
                    n_seq, MR);
        return -1;
    }
    for (int i = 0; i < n_seq; i++) {
        if (!kv[i] || !x[i] || kv[i]->n >= kv[i]->cap || tokens[i] < 0 ||
            tokens[i] >= hp->n_vocab) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "cuda whisper: sequence %d: %s", i,
                        !kv[i] || !x[i] ? "no cache" : kv[i]->n >= kv[i]->cap ? "cache full"
                                                                              : "token out of range");
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (kv[j] == kv[i]) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "cuda whisper: sequences %d and %d share a "
                            "cache", j, i);
                return -1;
            }
    }
    sreq *q = (sreq *)malloc(sizeof *q);
    FR_ASSERT(q);
    q->n = n_seq;
    for (int r = 0; r < n_seq; r++) {
        q->tok[r] = tokens[r], q->pos[r] = kv[r]->n;
        q->kvp[r] = (uint16_t *)kv[r]->d, q->xkp[r] = x[r]->d;
    }
    q->lg = logits, q->lg_first = 0, q->lg_rows = logits ? n_seq : 0, q->next = next;
    step_submit(cw, q);
    free(q);
    for (int r = 0; r < n_seq; r++) kv[r]->n++;
    return 0;
}

void fr_cuda_whisper_get_stats(fr_cuda_whisper *cw, fr_cuda_whisper_stats *out) {
    pthread_mutex_lock(&cw->qmu);
    *out = cw->stats;
    pthread_mutex_unlock(&cw->qmu);
}
