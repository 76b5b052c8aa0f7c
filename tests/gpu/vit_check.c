/* vit_check.c — the vision tower's CUDA kernels (vit_kernels.h) against plain C references, for
 * gpu-check (check_vit). Fresh random inputs; outputs poisoned (NaN) before each launch.
 * Tolerances: f32 outputs (rotary, residual) rel L2 < 1e-5; bf16 outputs (norms, activations,
 * attention, the merger) rel L2 < 1e-2 against references that round to bf16 where the GPU
 * does (inputs of the products), unrounded otherwise; row moves (gather, scatter) exact.
 * Attention: variable-length segments including length 1, lengths that are not multiples of
 * the query tile (8) or key tile (32), and one segment longer than many tiles; head_dim 16, 80
 * and 128 (the 7B shape's is 80).
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/vit_kernels.h"
#include "base/base.h"
#include "gpu/ref.h"
#include "gpu/vit_check.h"

static int *np, *nf;
static cudaStream_t vst;

static void vreport(const char *name, double err, double tol) {
    const bool ok = err <= tol; /* NaN fails */
    printf("%-4s %-62s rel_l2 %.2e  (tol %.0e)\n", ok ? "ok" : "FAIL", name, err, tol);
    fflush(stdout);
    if (ok) (*np)++; else (*nf)++;
}

static uint64_t vrng = 0x9e3779b97f4a7c15ull;
static float vrand(void) {
    vrng ^= vrng << 13, vrng ^= vrng >> 7, vrng ^= vrng << 17;
    return (float)((vrng >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}
static float *rvec(size_t n, float amp) {
    float *v = malloc(n * sizeof(float));
    FR_ASSERT(v);
    for (size_t i = 0; i < n; i++) v[i] = amp * vrand();
    return v;
}
static void *up(const void *h, size_t bytes) {
    void *d;
    FR_CK(cudaMalloc(&d, bytes ? bytes : 16));
    if (bytes) FR_CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static void *poisoned(size_t bytes) {
    void *d;
    FR_CK(cudaMalloc(&d, bytes ? bytes : 16));
    FR_CK(cudaMemset(d, 0xFF, bytes ? bytes : 16));
    return d;
}
static void down(void *h, const void *d, size_t bytes) {
    FR_CK(cudaStreamSynchronize(vst));
    FR_CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
static float *down_bf16(const void *d, size_t n) {
    uint16_t *h = malloc(n * 2);
    float *f = malloc(n * sizeof(float));
    FR_ASSERT(h && f);
    down(h, d, n * 2);
    for (size_t i = 0; i < n; i++) f[i] = fr_bf16_to_f32(h[i]);
    free(h);
    return f;
}

/* ---------------------------------------------------------------- references (double) */

static void ref_norm(const float *x, const float *w, const float *b, int n, int E, float eps,
                     float *out) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * E;
        double mean = 0, ss = 0;
        if (b) {
            for (int i = 0; i < E; i++) mean += xr[i];
            mean /= E;
        }
        for (int i = 0; i < E; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        const double rs = 1.0 / sqrt(ss / E + eps);
        for (int i = 0; i < E; i++)
            out[(size_t)r * E + i] = (float)((xr[i] - mean) * rs * w[i] + (b ? b[i] : 0.0));
    }
}

/* out (n, H) = attention of qkv (n, 3H) inside cu[0..n_seg], as the CPU tower's reference. */
static void ref_attn_varlen(const float *qkv, const int32_t *cu, int n_seg, int nh, int D,
                            float *out) {
    const int H = nh * D;
    const size_t st = 3 * (size_t)H;
    for (int s = 0; s < n_seg; s++) {
        const int a = cu[s], e = cu[s + 1];
        double *p = malloc((size_t)(e - a) * sizeof(double));
        FR_ASSERT(p);
        for (int i = a; i < e; i++)
            for (int h = 0; h < nh; h++) {
                double mx = -INFINITY, sum = 0;
                for (int j = a; j < e; j++) {
                    double d = 0;
                    for (int c = 0; c < D; c++)
                        d += (double)qkv[i * st + h * D + c] * qkv[j * st + H + h * D + c];
                    p[j - a] = d / sqrt((double)D);
                    if (p[j - a] > mx) mx = p[j - a];
                }
                for (int j = a; j < e; j++) sum += (p[j - a] = exp(p[j - a] - mx));
                for (int c = 0; c < D; c++) {
                    double acc = 0;
                    for (int j = a; j < e; j++) acc += p[j - a] * qkv[j * st + 2 * H + h * D + c];
                    out[(size_t)i * H + h * D + c] = (float)(acc / sum);
                }
            }
        free(p);
    }
}

static double ref_act1(double x, double u, int kind) {
    if (kind == FRK_VIT_SWIGLU) return x / (1.0 + exp(-x)) * u;
    if (kind == FRK_VIT_QUICK_GELU) return x / (1.0 + exp(-1.702 * x));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

/* ---------------------------------------------------------------- checks */

static void check_norm(int n, int E, bool layer) {
    float *x = rvec((size_t)n * E, 2.f), *w = rvec(E, 1.f), *b = layer ? rvec(E, 0.5f) : NULL;
    for (int i = 0; i < n * E; i++) x[i] += 0.7f; /* a mean away from zero (LayerNorm) */
    float *want = malloc((size_t)n * E * sizeof(float));
    ref_norm(x, w, b, n, E, 1e-6f, want);
    float *dx = up(x, (size_t)n * E * 4), *dw = up(w, (size_t)E * 4);
    float *db = b ? up(b, (size_t)E * 4) : NULL;
    uint16_t *dout = poisoned((size_t)n * E * 2);
    frk_vit_norm(dx, dw, db, n, E, 1e-6f, dout, vst);
    float *got = down_bf16(dout, (size_t)n * E);
    char name[96];
    snprintf(name, sizeof name, "vit %s n=%d E=%d", layer ? "layernorm" : "rmsnorm", n, E);
    vreport(name, ref_rel_l2(got, want, (size_t)n * E), 1e-2);
    FR_CK(cudaFree(dx)); FR_CK(cudaFree(dw)); FR_CK(cudaFree(dout));
    if (db) FR_CK(cudaFree(db));
    free(x), free(w), free(b), free(want), free(got);
}

static void check_rope(int n, int nh, int D, bool bias) {
    const int H = nh * D, half = D / 2;
    float *qkv = rvec((size_t)n * 3 * H, 1.f), *bs = bias ? rvec((size_t)3 * H, 0.3f) : NULL;
    float *cs = malloc((size_t)n * half * 4), *sn = malloc((size_t)n * half * 4);
    for (int i = 0; i < n * half; i++) {
        const double a = 7.0 * vrand();
        cs[i] = (float)cos(a), sn[i] = (float)sin(a);
    }
    float *want = malloc((size_t)n * 3 * H * 4);
    for (int t = 0; t < n; t++) {
        float *r = want + (size_t)t * 3 * H;
        for (int j = 0; j < 3 * H; j++) r[j] = qkv[(size_t)t * 3 * H + j] + (bs ? bs[j] : 0.f);
        for (int which = 0; which < 2; which++)
            for (int h = 0; h < nh; h++)
                for (int k = 0; k < half; k++) {
                    float *v = r + which * H + h * D;
                    const double x0 = v[k], x1 = v[k + half], c = cs[t * half + k], s = sn[t * half + k];
                    v[k] = (float)(x0 * c - x1 * s);
                    v[k + half] = (float)(x1 * c + x0 * s);
                }
    }
    float *dq = up(qkv, (size_t)n * 3 * H * 4), *db = bs ? up(bs, (size_t)3 * H * 4) : NULL;
    float *dc = up(cs, (size_t)n * half * 4), *ds = up(sn, (size_t)n * half * 4);
    uint16_t *dout = poisoned((size_t)n * 3 * H * 2);
    frk_vit_rope(dq, db, dc, ds, n, nh, D, dout, vst);
    float *got = down_bf16(dout, (size_t)n * 3 * H);
    char name[96];
    snprintf(name, sizeof name, "vit rope2d n=%d heads=%d D=%d%s (bf16 out)", n, nh, D,
             bias ? " bias" : "");
    vreport(name, ref_rel_l2(got, want, (size_t)n * 3 * H), 4e-3); /* bf16 rounding: ~1.2e-3 */
    FR_CK(cudaFree(dq)); FR_CK(cudaFree(dc)); FR_CK(cudaFree(ds)); FR_CK(cudaFree(dout));
    if (db) FR_CK(cudaFree(db));
    free(qkv), free(bs), free(cs), free(sn), free(want), free(got);
}

static void check_attn(const int *lens, int n_seg, int nh, int D) {
    int32_t *cu = malloc((size_t)(n_seg + 1) * 4);
    int max_len = 0;
    cu[0] = 0;
    for (int s = 0; s < n_seg; s++) {
        cu[s + 1] = cu[s] + lens[s];
        if (lens[s] > max_len) max_len = lens[s];
    }
    const int n = cu[n_seg], H = nh * D;
    float *qkv = rvec((size_t)n * 3 * H, 1.5f), *want = malloc((size_t)n * H * 4);
    uint16_t *qh = malloc((size_t)n * 3 * H * 2);
    FR_ASSERT(want && qh);
    for (size_t i = 0; i < (size_t)n * 3 * H; i++) { /* the kernel's bf16 input, and the ref's */
        qh[i] = fr_f32_to_bf16(qkv[i]);
        qkv[i] = fr_bf16_to_f32(qh[i]);
    }
    ref_attn_varlen(qkv, cu, n_seg, nh, D, want);
    uint16_t *dq = up(qh, (size_t)n * 3 * H * 2);
    free(qh);
    int32_t *dcu = up(cu, (size_t)(n_seg + 1) * 4);
    uint16_t *dout = poisoned((size_t)n * H * 2);
    frk_vit_attention(dq, dcu, n_seg, max_len, nh, D, dout, vst);
    float *got = down_bf16(dout, (size_t)n * H);
    char name[96], *p = name;
    p += snprintf(p, 40, "vit attn varlen H=%d D=%d lens", nh, D);
    for (int s = 0; s < n_seg && p < name + 80; s++) p += snprintf(p, 8, "%s%d", s ? "," : " ", lens[s]);
    vreport(name, ref_rel_l2(got, want, (size_t)n * H), 1e-2);
    FR_CK(cudaFree(dq)); FR_CK(cudaFree(dcu)); FR_CK(cudaFree(dout));
    free(cu), free(qkv), free(want), free(got);
}

static void check_act(int n, int F, int kind) {
    float *a = rvec((size_t)n * F, 3.f), *u = rvec((size_t)n * F, 2.f);
    float *ba = rvec(F, 0.5f), *bu = rvec(F, 0.5f), *want = malloc((size_t)n * F * 4);
    for (int i = 0; i < n * F; i++)
        want[i] = (float)ref_act1((double)a[i] + ba[i % F], (double)u[i] + bu[i % F], kind);
    float *da = up(a, (size_t)n * F * 4), *du = up(u, (size_t)n * F * 4);
    float *dba = up(ba, (size_t)F * 4), *dbu = up(bu, (size_t)F * 4);
    uint16_t *dout = poisoned((size_t)n * F * 2);
    frk_vit_act(da, dba, kind == FRK_VIT_SWIGLU ? du : NULL, kind == FRK_VIT_SWIGLU ? dbu : NULL,
                n, F, kind, dout, vst);
    float *got = down_bf16(dout, (size_t)n * F);
    static const char *const kn[] = {"swiglu", "quick_gelu", "gelu(erf)"};
    char name[96];
    snprintf(name, sizeof name, "vit act %s n=%d F=%d bias", kn[kind], n, F);
    vreport(name, ref_rel_l2(got, want, (size_t)n * F), 1e-2);
    FR_CK(cudaFree(da)); FR_CK(cudaFree(du)); FR_CK(cudaFree(dba)); FR_CK(cudaFree(dbu));
    FR_CK(cudaFree(dout));
    free(a), free(u), free(ba), free(bu), free(want), free(got);
}

static void check_residual(int n, int E) {
    float *x = rvec((size_t)n * E, 1.f), *t = rvec((size_t)n * E, 1.f), *b = rvec(E, 1.f);
    float *want = malloc((size_t)n * E * 4), *got = malloc((size_t)n * E * 4);
    for (int i = 0; i < n * E; i++) want[i] = x[i] + (t[i] + b[i % E]);
    float *dx = up(x, (size_t)n * E * 4), *dt = up(t, (size_t)n * E * 4), *db = up(b, (size_t)E * 4);
    frk_vit_residual(dx, dt, db, n, E, vst);
    down(got, dx, (size_t)n * E * 4);
    vreport("vit residual + bias", ref_rel_l2(got, want, (size_t)n * E), 1e-6);
    FR_CK(cudaFree(dx)); FR_CK(cudaFree(dt)); FR_CK(cudaFree(db));
    free(x), free(t), free(b), free(want), free(got);
}

/* A permutation of n units (Fisher-Yates on the host generator). */
static int32_t *perm(int n) {
    int32_t *p = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        vrng ^= vrng << 13, vrng ^= vrng >> 7, vrng ^= vrng << 17;
        int j = (int)(vrng % (uint64_t)(i + 1)), t = p[i];
        p[i] = p[j], p[j] = t;
    }
    return p;
}

static void check_gather_scatter(int units, int mu, int cols) {
    const int n = units * mu;
    int32_t *win = perm(units);
    float *src = rvec((size_t)n * cols, 4.f), *want = malloc((size_t)n * cols * 4);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < cols; c++)
            want[(size_t)i * cols + c] =
                ref_bf16(src[((size_t)win[i / mu] * mu + i % mu) * cols + c]);
    float *ds = up(src, (size_t)n * cols * 4);
    int32_t *dw = up(win, (size_t)units * 4);
    uint16_t *dg = poisoned((size_t)n * cols * 2);
    frk_vit_gather_rows(ds, dw, units, mu, cols, dg, vst);
    float *got = down_bf16(dg, (size_t)n * cols);
    bool same = !memcmp(got, want, (size_t)n * cols * 4);
    printf("%-4s %-62s %s\n", same ? "ok" : "FAIL", "vit window gather (bf16 rows, exact)",
           same ? "equal" : "differs");
    if (same) (*np)++; else (*nf)++;
    /* the inverse on unit rows (the merger's output), bias fused */
    float *y = rvec((size_t)units * cols, 2.f), *b = rvec(cols, 1.f);
    float *w2 = malloc((size_t)units * cols * 4), *g2 = malloc((size_t)units * cols * 4);
    for (int i = 0; i < units; i++)
        for (int c = 0; c < cols; c++)
            w2[(size_t)win[i] * cols + c] = y[(size_t)i * cols + c] + b[c];
    float *dy = up(y, (size_t)units * cols * 4), *db = up(b, (size_t)cols * 4);
    float *dout = poisoned((size_t)units * cols * 4);
    frk_vit_scatter_rows(dy, db, dw, units, cols, dout, vst);
    down(g2, dout, (size_t)units * cols * 4);
    same = !memcmp(g2, w2, (size_t)units * cols * 4);
    printf("%-4s %-62s %s\n", same ? "ok" : "FAIL", "vit window scatter + bias (inverse, exact)",
           same ? "equal" : "differs");
    if (same) (*np)++; else (*nf)++;
    FR_CK(cudaFree(ds)); FR_CK(cudaFree(dw)); FR_CK(cudaFree(dg)); FR_CK(cudaFree(dy));
    FR_CK(cudaFree(db)); FR_CK(cudaFree(dout));
    free(win), free(src), free(want), free(got), free(y), free(b), free(w2), free(g2);
}

/* The 2x2 merger as the tower runs it: norm -> (units, H*mu) rows -> fc1 (cuBLAS bf16) -> GELU ->
 * fc2 -> scatter back to the original order, against a reference rounding to bf16 where the GPU
 * does (the products' inputs: normed rows, fc weights, the activation). */
static void check_merger(int units, int H, int O, bool layer) {
    const int mu = 4, n = units * mu, HM = H * mu;
    float *x = rvec((size_t)n * H, 2.f), *w = rvec(H, 1.f), *b = layer ? rvec(H, 0.3f) : NULL;
    float *W1 = rvec((size_t)HM * HM, 1.f / sqrtf((float)HM)), *b1 = rvec(HM, 0.1f);
    float *W2 = rvec((size_t)O * HM, 1.f / sqrtf((float)HM)), *b2 = rvec(O, 0.1f);
    int32_t *win = perm(units);
    uint16_t *W1h = malloc((size_t)HM * HM * 2), *W2h = malloc((size_t)O * HM * 2);
    for (size_t i = 0; i < (size_t)HM * HM; i++) W1h[i] = fr_f32_to_bf16(W1[i]), W1[i] = fr_bf16_to_f32(W1h[i]);
    for (size_t i = 0; i < (size_t)O * HM; i++) W2h[i] = fr_f32_to_bf16(W2[i]), W2[i] = fr_bf16_to_f32(W2h[i]);
    /* reference */
    float *xn = malloc((size_t)n * H * 4), *h1 = malloc((size_t)units * HM * 4);
    float *want = malloc((size_t)units * O * 4);
    ref_norm(x, w, b, n, H, 1e-6f, xn);
    for (int i = 0; i < n * H; i++) xn[i] = ref_bf16(xn[i]);
    for (int u = 0; u < units; u++)
        for (int j = 0; j < HM; j++) {
            double s = b1[j];
            for (int k = 0; k < HM; k++) s += (double)W1[(size_t)j * HM + k] * xn[(size_t)u * HM + k];
            h1[(size_t)u * HM + j] = ref_bf16((float)ref_act1(s, 0, FRK_VIT_GELU));
        }
    for (int u = 0; u < units; u++)
        for (int j = 0; j < O; j++) {
            double s = b2[j];
            for (int k = 0; k < HM; k++) s += (double)W2[(size_t)j * HM + k] * h1[(size_t)u * HM + k];
            want[(size_t)win[u] * O + j] = (float)s;
        }
    /* GPU */
    cublasHandle_t cub;
    FR_CKB(cublasCreate(&cub));
    FR_CKB(cublasSetStream(cub, vst));
    float *dx = up(x, (size_t)n * H * 4), *dw = up(w, (size_t)H * 4), *db = b ? up(b, (size_t)H * 4) : NULL;
    uint16_t *dW1 = up(W1h, (size_t)HM * HM * 2), *dW2 = up(W2h, (size_t)O * HM * 2);
    float *db1 = up(b1, (size_t)HM * 4), *db2 = up(b2, (size_t)O * 4);
    int32_t *dwin = up(win, (size_t)units * 4);
    uint16_t *dxn = poisoned((size_t)n * H * 2), *dact = poisoned((size_t)units * HM * 2);
    float *dt = poisoned((size_t)units * HM * 4), *dmo = poisoned((size_t)units * O * 4);
    float *dout = poisoned((size_t)units * O * 4);
    const float one = 1.f, zero = 0.f;
    frk_vit_norm(dx, dw, db, n, H, 1e-6f, dxn, vst);
    FR_CKB(cublasGemmEx(cub, CUBLAS_OP_T, CUBLAS_OP_N, HM, units, HM, &one, dW1, CUDA_R_16BF, HM,
                        dxn, CUDA_R_16BF, HM, &zero, dt, CUDA_R_32F, HM, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    frk_vit_act(dt, db1, NULL, NULL, units, HM, FRK_VIT_GELU, dact, vst);
    FR_CKB(cublasGemmEx(cub, CUBLAS_OP_T, CUBLAS_OP_N, O, units, HM, &one, dW2, CUDA_R_16BF, HM,
                        dact, CUDA_R_16BF, HM, &zero, dmo, CUDA_R_32F, O, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    frk_vit_scatter_rows(dmo, db2, dwin, units, O, dout, vst);
    float *got = malloc((size_t)units * O * 4);
    down(got, dout, (size_t)units * O * 4);
    char name[96];
    snprintf(name, sizeof name, "vit merger 2x2 %s units=%d H=%d O=%d", layer ? "LN" : "RMS",
             units, H, O);
    vreport(name, ref_rel_l2(got, want, (size_t)units * O), 1e-2);
    void *dp[] = {dx, dw, db, dW1, dW2, db1, db2, dwin, dxn, dact, dt, dmo, dout};
    for (size_t i = 0; i < sizeof dp / sizeof dp[0]; i++)
        if (dp[i]) FR_CK(cudaFree(dp[i]));
    FR_CKB(cublasDestroy(cub));
    free(x), free(w), free(b), free(W1), free(b1), free(W2), free(b2), free(win), free(W1h);
    free(W2h), free(xn), free(h1), free(want), free(got);
}

void check_vit(cudaStream_t st, bool quick, int *n_pass, int *n_fail) {
    vst = st, np = n_pass, nf = n_fail;
    check_norm(5, 80, false);
    check_norm(5, 80, true);
    check_rope(9, 3, 16, true);
    check_rope(5, 16, 80, false);
    const int l1[] = {1, 7, 8, 9, 33, 70, 1, 5};
    check_attn(l1, 8, 2, 16);
    check_attn(l1, 8, 2, 80);
    const int l2[] = {64, 64, 1, 40}; /* Qwen2.5-VL windows of 8 x 8 patches, a cut window */
    check_attn(l2, 4, 3, 128);
    const int l4[] = {65, 128, 129, 2}; /* key tiles: one past a tile, exactly two, one past */
    check_attn(l4, 4, 4, 48);
    check_act(3, 100, FRK_VIT_SWIGLU);
    check_act(3, 100, FRK_VIT_QUICK_GELU);
    check_act(3, 100, FRK_VIT_GELU);
    check_residual(7, 48);
    check_gather_scatter(13, 4, 24);
    check_merger(6, 32, 48, false);
    check_merger(5, 16, 24, true);
    if (quick) return;
    check_norm(64, 1280, false);
    check_norm(64, 1280, true);
    check_rope(64, 16, 80, true);
    const int l3[] = {1024, 3, 257}; /* a full-attention frame of 448x448, odd lengths */
    check_attn(l3, 3, 16, 80);
    check_act(64, 3420, FRK_VIT_SWIGLU);
    check_merger(64, 160, 256, false);
}
