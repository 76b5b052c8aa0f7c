/* vision.cu — the Qwen2-VL / Qwen2.5-VL vision tower on CUDA (cuda_vision.h).
 *
 * The computation is the CPU tower's (backend/cpu/vision.c), in the same window order:
 *   plan (host, from the grids, with the functions the CPU tower uses: backend/vision_plan.h):
 *        rot_pos, window index, cu_seqlens of windows and of frames, the rotary cos / sin per
 *        window-order patch;
 *   pix  = bf16(pixels) rows gathered into window order                 (n, patch_dim) bf16
 *   x    = pix . patch_w^T                          cuBLAS               (n, hidden) f32
 *   per block: xn = norm1(x) bf16; qkv = xn . qkv_w^T f32; bias + 2D rotary into bf16
 *        (k_vit_rope); att = varlen attention over cu_full or cu_win on the tensor cores
 *        (k_vit_attn) bf16; t = att . proj_w^T;
 *        x += t + proj_b; xn = norm2(x); the MLP products f32, its activation with the biases
 *        into bf16 (k_vit_act); t = act . down_w^T; x += t + down_b;
 *   merger: xn = ln_q(x) bf16 viewed (n_tok, hidden*mu); t = xn . fc1^T; act = gelu(t + b1);
 *        y = act . fc2^T; out[win[i]] = y[i] + b2 (k_vit_scatter_rows), copied to the host.
 * Every linear layer is cublasGemmEx, bf16 inputs, fp32 output and accumulation; the MLP's
 * n_ff is zero-padded to a multiple of 64 at upload (up_lin_pad).
 * Activation buffers are device memory grown to the largest call and kept (no allocation when
 * a call fits); CUDA graphs per resolution bucket and batching across requests are not done.
 */
#include "backend/cuda/cuda_util.cuh"
#include "backend/cuda/cuda_vision.h"
#include "backend/cuda/vit_kernels.h"

#include <math.h>

extern "C" {
#include "backend/vision_plan.h"
}

typedef struct dlin {
    uint16_t *w; /* bf16 [out][in] */
    float *b;    /* f32 [out], or NULL */
    int M, K;    /* out, in */
} dlin;

typedef struct dnorm {
    float *w, *b; /* f32 [hidden]; b NULL for RMSNorm */
} dnorm;

typedef struct dblock {
    dnorm n1, n2;
    dlin qkv, proj, gate, up, down; /* gate only for Qwen2.5-VL */
} dblock;

/* Device activations, sized for cap patches (grown by ensure_bufs). */
typedef struct dbufs {
    int64_t cap;       /* patches the buffers hold */
    float *pix_f;      /* (n, patch_dim) f32 pixels as uploaded, processor order */
    uint16_t *pix;     /* (n, patch_dim) bf16 window order */
    float *x;          /* (n, hidden) residual stream */
    uint16_t *xn;      /* (n, hidden) normed, bf16 */
    float *qkv;        /* (n, 3 hidden) */
    uint16_t *qkvh;    /* (n, 3 hidden) bf16: bias + rotary applied, the attention's input */
    uint16_t *att;     /* (n, hidden) bf16 */
    float *t;          /* (n, max(hidden, n_ff)): sublayer outputs, merger fc1 output */
    float *fa, *fb;    /* (n, n_ff) MLP products */
    uint16_t *act;     /* (n, max(hidden, n_ff)) bf16 activations */
    float *mo, *out;   /* (n / mu, out_hidden) merger output: window order, then original */
    float *cs, *sn;    /* (n, head_dim / 2) rotary tables, window order */
    int32_t *win;      /* (n / mu): the source unit of each window place (gather) */
    int32_t *wout;     /* (n / mu): the output row of each window place (scatter) */
    int32_t *cu_win;   /* (n / mu + frames + 1): at most n / mu + n + 1 */
    int32_t *cu_full;  /* (n + 1) bounded by one frame per patch */
} dbufs;

struct fr_cuda_vision {
    const fr_model *m;
    fr_vision_hparams hp;
    int dev;
    cudaStream_t st;
    cublasHandle_t cub;
    uint16_t *patch_w; /* bf16 (hidden, patch_dim) */
    dblock *blocks;    /* depth */
    dnorm mln;         /* merger ln_q */
    dlin fc1, fc2;
    int Fp;            /* n_ff padded to a multiple of 64 (up_lin_pad) */
    dbufs b;
    void **allocs;     /* every weight allocation, for free */
    int n_allocs, cap_allocs;
};

/* ---------------------------------------------------------------- upload */

static void *dmalloc(fr_cuda_vision *cv, size_t bytes, fr_err *err) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error of a failed allocation */
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda vision: out of device memory (%.1f MiB)",
                    (double)bytes / 1048576.0);
        return NULL;
    }
    if (cv) {
        if (cv->n_allocs == cv->cap_allocs) {
            int nc = cv->cap_allocs ? 2 * cv->cap_allocs : 64;
            void **na = (void **)realloc(cv->allocs, (size_t)nc * sizeof(void *));
            FR_ASSERT(na);
            cv->allocs = na, cv->cap_allocs = nc;
        }
        cv->allocs[cv->n_allocs++] = p;
    }
    return p;
}

static bool f32_tensor(const fr_tensor *t, int64_t n, fr_err *err) {
    if (!fr_tensor_present(t) || t->dtype != FR_DTYPE_F32 || fr_tensor_nelem(t) != n) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "cuda vision: tensor %s is not F32 of %lld values",
                    t->name ? t->name : "(unnamed)", (long long)n);
        return false;
    }
    return true;
}

/* f32 host values -> device f32 (a NULL result for an absent optional tensor is fine). */
static int up_f32(fr_cuda_vision *cv, const fr_tensor *t, int64_t n, bool optional, float **out,
                  fr_err *err) {
    *out = NULL;
    if (optional && !fr_tensor_present(t)) return 0;
    if (!f32_tensor(t, n, err)) return -1;
    if (!(*out = (float *)dmalloc(cv, (size_t)n * 4, err))) return -1;
    FR_CK(cudaMemcpy(*out, t->data, (size_t)n * 4, cudaMemcpyHostToDevice));
    return 0;
}

/* f32 host weights -> device bf16 (round to nearest even). */
static int up_bf16(fr_cuda_vision *cv, const fr_tensor *t, int64_t n, uint16_t **out, fr_err *err) {
    if (!f32_tensor(t, n, err)) return -1;
    uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
    if (!h) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda vision: out of host memory");
        return -1;
    }
    const float *f = (const float *)t->data;
    for (int64_t i = 0; i < n; i++) h[i] = fr_f32_to_bf16(f[i]);
    *out = (uint16_t *)dmalloc(cv, (size_t)n * 2, err);
    if (*out) FR_CK(cudaMemcpy(*out, h, (size_t)n * 2, cudaMemcpyHostToDevice));
    free(h);
    return *out ? 0 : -1;
}

static int up_lin(fr_cuda_vision *cv, const fr_tensor *w, const fr_tensor *b, int M, int K,
                  dlin *d, fr_err *err) {
    d->M = M, d->K = K;
    if (up_bf16(cv, w, (int64_t)M * K, &d->w, err)) return -1;
    return up_f32(cv, b, M, true, &d->b, err);
}

/* The same into a zero-padded [Mp][Kp] weight and [Mp] bias (Mp >= M, Kp >= K): the MLP's
 * n_ff (3420 in Qwen2.5-VL) padded to a multiple of 64 gives cuBLAS aligned operands (an
 * unaligned 3420 falls back to slower sm80 kernels); the padded rows give silu(0) * 0 = 0 and
 * the padded columns of down multiply those zeros, so the result is unchanged. */
static int up_lin_pad(fr_cuda_vision *cv, const fr_tensor *w, const fr_tensor *b, int M, int K,
                      int Mp, int Kp, dlin *d, fr_err *err) {
    if (Mp == M && Kp == K) return up_lin(cv, w, b, M, K, d, err);
    d->M = Mp, d->K = Kp, d->b = NULL;
    if (!f32_tensor(w, (int64_t)M * K, err)) return -1;
    uint16_t *h = (uint16_t *)calloc((size_t)Mp * Kp, 2);
    float *hb = (float *)calloc((size_t)Mp, 4);
    if (!h || !hb) {
        free(h), free(hb);
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda vision: out of host memory");
        return -1;
    }
    const float *f = (const float *)w->data;
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < K; c++) h[r * Kp + c] = fr_f32_to_bf16(f[r * K + c]);
    int rc = -1;
    if ((d->w = (uint16_t *)dmalloc(cv, (size_t)Mp * Kp * 2, err))) {
        FR_CK(cudaMemcpy(d->w, h, (size_t)Mp * Kp * 2, cudaMemcpyHostToDevice));
        rc = 0;
    }
    if (rc == 0 && fr_tensor_present(b)) {
        if (!f32_tensor(b, M, err) || !(d->b = (float *)dmalloc(cv, (size_t)Mp * 4, err))) {
            rc = -1;
        } else {
            memcpy(hb, b->data, (size_t)M * 4);
            FR_CK(cudaMemcpy(d->b, hb, (size_t)Mp * 4, cudaMemcpyHostToDevice));
        }
    }
    free(h), free(hb);
    return rc;
}

static int up_norm(fr_cuda_vision *cv, const fr_tensor *w, const fr_tensor *b, int E, dnorm *d,
                   fr_err *err) {
    if (up_f32(cv, w, E, false, &d->w, err)) return -1;
    return up_f32(cv, b, E, true, &d->b, err);
}

static void bufs_free(dbufs *b) {
    void *p[] = {b->pix_f, b->pix, b->x, b->xn, b->qkv, b->qkvh, b->att, b->t, b->fa, b->fb, b->act,
                 b->mo, b->out, b->cs, b->sn, b->win, b->wout, b->cu_win, b->cu_full};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) FR_CK(cudaFree(p[i]));
    memset(b, 0, sizeof *b);
}

void fr_cuda_vision_free(fr_cuda_vision *cv) {
    if (!cv) return;
    FR_CK(cudaSetDevice(cv->dev));
    bufs_free(&cv->b);
    for (int i = 0; i < cv->n_allocs; i++) FR_CK(cudaFree(cv->allocs[i]));
    free(cv->allocs);
    free(cv->blocks);
    if (cv->cub) FR_CKB(cublasDestroy(cv->cub));
    if (cv->st) FR_CK(cudaStreamDestroy(cv->st));
    free(cv);
}

fr_cuda_vision *fr_cuda_vision_new(const fr_model *m, int device, fr_err *err) {
    if (!m->vision) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: the model has no vision tower", m->name);
        return NULL;
    }
    const fr_vision *v = m->vision;
    const fr_vision_hparams *hp = &v->hp;
    if (hp->head_dim < 16 || hp->head_dim % 16 || hp->head_dim > FRK_VIT_MAX_HEAD_DIM ||
        hp->head_dim * hp->n_head != hp->hidden) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "cuda vision: head_dim %d (hidden %d, %d heads) not "
                    "supported (a multiple of 16, at most %d)", hp->head_dim, hp->hidden,
                    hp->n_head, FRK_VIT_MAX_HEAD_DIM);
        return NULL;
    }
    fr_cuda_vision *cv = (fr_cuda_vision *)calloc(1, sizeof *cv);
    FR_ASSERT(cv);
    cv->m = m, cv->hp = *hp, cv->dev = device;
    FR_CK(cudaSetDevice(device));
    FR_CK(cudaStreamCreateWithFlags(&cv->st, cudaStreamNonBlocking));
    FR_CKB(cublasCreate(&cv->cub));
    FR_CKB(cublasSetStream(cv->cub, cv->st));
    cv->blocks = (dblock *)calloc((size_t)hp->depth, sizeof(dblock));
    FR_ASSERT(cv->blocks);
    const int H = hp->hidden, F = hp->n_ff, HM = H * hp->merge * hp->merge;
    const int Fp = (F + 63) / 64 * 64;
    cv->Fp = Fp;
    const bool q25 = hp->kind == FR_VISION_QWEN25VL;
    if (up_bf16(cv, &v->patch_w, (int64_t)H * fr_vision_patch_dim(hp), &cv->patch_w, err))
        goto fail;
    for (int l = 0; l < hp->depth; l++) {
        const fr_vision_block *k = &v->blocks[l];
        dblock *d = &cv->blocks[l];
        if (up_norm(cv, &k->norm1_w, &k->norm1_b, H, &d->n1, err) ||
            up_norm(cv, &k->norm2_w, &k->norm2_b, H, &d->n2, err) ||
            up_lin(cv, &k->qkv_w, &k->qkv_b, 3 * H, H, &d->qkv, err) ||
            up_lin(cv, &k->proj_w, &k->proj_b, H, H, &d->proj, err) ||
            (q25 && up_lin_pad(cv, &k->gate_w, &k->gate_b, F, H, Fp, H, &d->gate, err)) ||
            up_lin_pad(cv, &k->up_w, &k->up_b, F, H, Fp, H, &d->up, err) ||
            up_lin_pad(cv, &k->down_w, &k->down_b, H, F, H, Fp, &d->down, err))
            goto fail;
    }
    if (up_norm(cv, &v->merger_ln_w, &v->merger_ln_b, H, &cv->mln, err) ||
        up_lin(cv, &v->merger_fc1_w, &v->merger_fc1_b, HM, HM, &cv->fc1, err) ||
        up_lin(cv, &v->merger_fc2_w, &v->merger_fc2_b, hp->out_hidden, HM, &cv->fc2, err))
        goto fail;
    return cv;
fail:
    fr_cuda_vision_free(cv);
    return NULL;
}

/* ---------------------------------------------------------------- forward */

static int ensure_bufs(fr_cuda_vision *cv, int64_t n, fr_err *err) {
    dbufs *b = &cv->b;
    if (n <= b->cap) return 0;
    bufs_free(b);
    const fr_vision_hparams *hp = &cv->hp;
    const size_t N = (size_t)n, H = (size_t)hp->hidden, F = (size_t)cv->Fp;
    const size_t W = H > F ? H : F, P = (size_t)fr_vision_patch_dim(hp);
    const size_t mu = (size_t)hp->merge * hp->merge, O = (size_t)hp->out_hidden;
    const size_t half = (size_t)hp->head_dim / 2;
    struct { void **p; size_t bytes; } want[] = {
        {(void **)&b->pix_f, N * P * 4}, {(void **)&b->pix, N * P * 2},
        {(void **)&b->x, N * H * 4},     {(void **)&b->xn, N * H * 2},
        {(void **)&b->qkv, N * 3 * H * 4}, {(void **)&b->qkvh, N * 3 * H * 2},
        {(void **)&b->att, N * H * 2},
        {(void **)&b->t, N * W * 4},     {(void **)&b->fa, N * F * 4},
        {(void **)&b->fb, N * F * 4},    {(void **)&b->act, N * W * 2},
        {(void **)&b->mo, N / mu * O * 4}, {(void **)&b->out, N / mu * O * 4},
        {(void **)&b->cs, N * half * 4}, {(void **)&b->sn, N * half * 4},
        {(void **)&b->win, N / mu * 4},  {(void **)&b->wout, N / mu * 4},
        {(void **)&b->cu_win, (N / mu + N + 1) * 4},
        {(void **)&b->cu_full, (N + 1) * 4},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!(*want[i].p = dmalloc(NULL, want[i].bytes, err))) {
            bufs_free(b);
            return -1;
        }
    b->cap = n;
    return 0;
}

/* y (n, M) f32 = x (n, K) bf16 . W^T (W bf16 [M][K]). */
static void gemm(fr_cuda_vision *cv, const uint16_t *x, int64_t n, const uint16_t *W, int M, int K,
                 float *y) {
    const float one = 1.f, zero = 0.f;
    FR_CKB(cublasGemmEx(cv->cub, CUBLAS_OP_T, CUBLAS_OP_N, M, (int)n, K, &one, W, CUDA_R_16BF, K,
                        x, CUDA_R_16BF, K, &zero, y, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
}

/* The host plan (backend/vision_plan.h), uploaded into the buffers. Sets the counts. */
typedef struct hplan {
    int64_t n, n_tok;
    int n_win, n_full, max_win, max_full;
} hplan;

/* keep (p->n_tok units, or NULL): the background units dropped before the tower
 * (fr_vision_plan_keep); p->n and p->n_tok become the kept counts. */
static int make_plan(fr_cuda_vision *cv, const int32_t *g, int n_images, const uint8_t *keep,
                     hplan *p, fr_err *err) {
    const fr_vision_hparams *hp = &cv->hp;
    const int half = hp->head_dim / 2;
    int64_t frames = 0;
    for (int i = 0; i < n_images; i++) frames += g[3 * i];
    int32_t *pos = (int32_t *)malloc((size_t)p->n * 2 * 4);
    int32_t *win = (int32_t *)malloc((size_t)p->n_tok * 4);
    int32_t *wout = (int32_t *)malloc((size_t)p->n_tok * 4);
    int32_t *cuw = (int32_t *)malloc((size_t)(p->n_tok + frames + 1) * 4);
    int32_t *cuf = (int32_t *)malloc((size_t)(frames + 1) * 4);
    float *cs = (float *)malloc((size_t)p->n * half * 4), *sn = (float *)malloc((size_t)p->n * half * 4);
    int rc = -1;
    if (!pos || !win || !wout || !cuw || !cuf || !cs || !sn) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda vision: out of host memory");
        goto done;
    }
    /* the grids were checked by fr_vision_n_tokens; the loader accepts no window under a unit */
    FR_ASSERT(fr_vision_rot_pos(hp, g, n_images, pos) == 0);
    FR_ASSERT(fr_vision_window_index(hp, g, n_images, win, cuw, &p->n_win) == 0);
    {
        int64_t at = 0;
        cuf[0] = 0;
        p->n_full = 0;
        for (int i = 0; i < n_images; i++)
            for (int f = 0; f < g[3 * i]; f++) {
                at += (int64_t)g[3 * i + 1] * g[3 * i + 2];
                cuf[++p->n_full] = (int32_t)at;
            }
        /* output rows: the unit itself, or its rank among the kept units */
        const int64_t n_all = p->n_tok;
        for (int64_t i = 0; i < n_all; i++) wout[i] = win[i];
        if (keep) {
            int64_t k;
            fr_vision_plan_keep(hp, keep, n_all, win, cuw, &p->n_win, cuf, &p->n_full, &k);
            if (k < 1) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: every image token was dropped");
                goto done;
            }
            int32_t *rank = (int32_t *)malloc((size_t)n_all * 4);
            if (!rank) {
                fr_err_setc(err, FR_ERR_TOO_LARGE, "cuda vision: out of host memory");
                goto done;
            }
            for (int64_t u = 0, r = 0; u < n_all; u++) rank[u] = keep[u] ? (int32_t)r++ : -1;
            for (int64_t i = 0; i < k; i++) wout[i] = rank[win[i]];
            free(rank);
            p->n_tok = k;
            p->n = k * hp->merge * hp->merge;
        }
        p->max_win = p->max_full = 0;
        for (int s = 0; s < p->n_win; s++)
            if (cuw[s + 1] - cuw[s] > p->max_win) p->max_win = cuw[s + 1] - cuw[s];
        for (int s = 0; s < p->n_full; s++)
            if (cuf[s + 1] - cuf[s] > p->max_full) p->max_full = cuf[s + 1] - cuf[s];
        fr_vision_rope_table(hp, pos, win, p->n, cs, sn);
    }
    FR_CK(cudaMemcpyAsync(cv->b.win, win, (size_t)p->n_tok * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaMemcpyAsync(cv->b.wout, wout, (size_t)p->n_tok * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaMemcpyAsync(cv->b.cu_win, cuw, (size_t)(p->n_win + 1) * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaMemcpyAsync(cv->b.cu_full, cuf, (size_t)(p->n_full + 1) * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaMemcpyAsync(cv->b.cs, cs, (size_t)p->n * half * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaMemcpyAsync(cv->b.sn, sn, (size_t)p->n * half * 4, cudaMemcpyHostToDevice, cv->st));
    FR_CK(cudaStreamSynchronize(cv->st)); /* the host arrays are freed below */
    rc = 0;
done:
    free(pos), free(win), free(wout), free(cuw), free(cuf), free(cs), free(sn);
    return rc;
}

int fr_cuda_vision_forward(fr_cuda_vision *cv, const float *pixels, int64_t n_patches,
                           const int32_t *grid, int n_images, float *out, fr_err *err) {
    return fr_cuda_vision_forward_kept(cv, pixels, n_patches, grid, n_images, NULL, out, err);
}

/* The 8-bit source of fr_cuda_vision_forward_rgb: the image, its width, the processor's table. */
typedef struct rgb_src {
    const uint8_t *rgb;
    int width;
    const float *lut;
} rgb_src;

static int forward(fr_cuda_vision *cv, const float *pixels, const rgb_src *rs, int64_t n_patches,
                   const int32_t *grid, int n_images, const uint8_t *keep, float *out, fr_err *err);

int fr_cuda_vision_forward_kept(fr_cuda_vision *cv, const float *pixels, int64_t n_patches,
                                const int32_t *grid, int n_images, const uint8_t *keep,
                                float *out, fr_err *err) {
    return forward(cv, pixels, NULL, n_patches, grid, n_images, keep, out, err);
}

int fr_cuda_vision_forward_rgb(fr_cuda_vision *cv, const uint8_t *rgb, int height, int width,
                               const float *lut, float *out, fr_err *err) {
    const int P = cv->hp.patch, f = P * cv->hp.merge;
    if (height < f || width < f || height % f || width % f) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: an image of %dx%d is not at a multiple of "
                    "%d a side (resize it first)", width, height, f);
        return -1;
    }
    const int32_t grid[3] = {1, height / P, width / P};
    const rgb_src rs = {rgb, width, lut};
    return forward(cv, NULL, &rs, (int64_t)grid[1] * grid[2], grid, 1, NULL, out, err);
}

/* The tower from f32 pixel values, or (rs) from an 8-bit image patchified on the device. */
static int forward(fr_cuda_vision *cv, const float *pixels, const rgb_src *rs, int64_t n_patches,
                   const int32_t *grid, int n_images, const uint8_t *keep, float *out, fr_err *err) {
    const fr_vision_hparams *hp = &cv->hp;
    const int64_t nt = fr_vision_n_tokens(hp, grid, n_images);
    if (nt < 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: invalid image grid (each t, h, w >= 1, h "
                    "and w multiples of %d, at most %d patches)", hp->merge, FR_VISION_MAX_PATCHES);
        return -1;
    }
    const int mu = hp->merge * hp->merge;
    hplan p = {nt * mu, nt, 0, 0, 0, 0};
    if (p.n != n_patches) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision: the grids hold %lld patches, the pixel "
                    "values %lld", (long long)p.n, (long long)n_patches);
        return -1;
    }
    FR_CK(cudaSetDevice(cv->dev));
    /* sized for every patch (the upload holds them all); the tower runs on the kept ones */
    if (ensure_bufs(cv, n_patches, err) || make_plan(cv, grid, n_images, keep, &p, err)) return -1;
    dbufs *b = &cv->b;
    const int H = hp->hidden, F = cv->Fp, PD = (int)fr_vision_patch_dim(hp), HM = H * mu;
    const int64_t n = p.n, nk = p.n_tok; /* kept patches and units */
    const bool q25 = hp->kind == FR_VISION_QWEN25VL;
    cudaStream_t st = cv->st;
    if (rs) { /* the image and the table in the f32 pixel buffer (patch_dim * 4 bytes a patch) */
        const size_t img_bytes = (size_t)grid[1] * grid[2] * hp->patch * hp->patch * 3;
        uint8_t *d_rgb = (uint8_t *)b->pix_f;
        float *d_lut = (float *)(d_rgb + ((img_bytes + 255) & ~(size_t)255));
        FR_CK(cudaMemcpyAsync(d_rgb, rs->rgb, img_bytes, cudaMemcpyHostToDevice, st));
        FR_CK(cudaMemcpyAsync(d_lut, rs->lut, 3 * 256 * sizeof(float), cudaMemcpyHostToDevice, st));
        frk_vit_patchify_u8(d_rgb, rs->width, d_lut, b->win, (int)nk, mu, grid[2], hp->merge,
                            hp->patch, hp->temporal, b->pix, st);
    } else {
        FR_CK(cudaMemcpyAsync(b->pix_f, pixels, (size_t)n_patches * PD * 4, cudaMemcpyHostToDevice,
                              st));
        frk_vit_gather_rows(b->pix_f, b->win, (int)nk, mu, PD, b->pix, st);
    }
    gemm(cv, b->pix, n, cv->patch_w, H, PD, b->x);
    for (int l = 0; l < hp->depth; l++) {
        const dblock *k = &cv->blocks[l];
        const bool full = hp->fullatt[l];
        frk_vit_norm(b->x, k->n1.w, k->n1.b, (int)n, H, hp->eps, b->xn, st);
        gemm(cv, b->xn, n, k->qkv.w, 3 * H, H, b->qkv);
        frk_vit_rope(b->qkv, k->qkv.b, b->cs, b->sn, (int)n, hp->n_head, hp->head_dim, b->qkvh,
                     st);
        frk_vit_attention(b->qkvh, full ? b->cu_full : b->cu_win, full ? p.n_full : p.n_win,
                          full ? p.max_full : p.max_win, hp->n_head, hp->head_dim, b->att, st);
        gemm(cv, b->att, n, k->proj.w, H, H, b->t);
        frk_vit_residual(b->x, b->t, k->proj.b, (int)n, H, st);
        frk_vit_norm(b->x, k->n2.w, k->n2.b, (int)n, H, hp->eps, b->xn, st);
        if (q25) {
            gemm(cv, b->xn, n, k->gate.w, F, H, b->fa);
            gemm(cv, b->xn, n, k->up.w, F, H, b->fb);
            frk_vit_act(b->fa, k->gate.b, b->fb, k->up.b, (int)n, F, FRK_VIT_SWIGLU, b->act, st);
        } else {
            gemm(cv, b->xn, n, k->up.w, F, H, b->fa);
            frk_vit_act(b->fa, k->up.b, NULL, NULL, (int)n, F, FRK_VIT_QUICK_GELU, b->act, st);
        }
        gemm(cv, b->act, n, k->down.w, H, F, b->t);
        frk_vit_residual(b->x, b->t, k->down.b, (int)n, H, st);
    }
    /* merger: mu consecutive normed patches (window order keeps units whole) form one row */
    frk_vit_norm(b->x, cv->mln.w, cv->mln.b, (int)n, H, hp->eps, b->xn, st);
    gemm(cv, b->xn, nk, cv->fc1.w, HM, HM, b->t);
    frk_vit_act(b->t, cv->fc1.b, NULL, NULL, (int)nk, HM, FRK_VIT_GELU, b->act, st);
    gemm(cv, b->act, nk, cv->fc2.w, hp->out_hidden, HM, b->mo);
    frk_vit_scatter_rows(b->mo, cv->fc2.b, b->wout, (int)nk, hp->out_hidden, b->out, st);
    FR_CK(cudaMemcpyAsync(out, b->out, (size_t)nk * hp->out_hidden * 4, cudaMemcpyDeviceToHost, st));
    FR_CK(cudaStreamSynchronize(st));
    return 0;
}
