/* kernels.c — fast CPU kernels: matmul for F32 / GGUF Q8_0 / GGUF Q4_0 / own q8 / own q4 weights,
 * RMSNorm, RoPE from tables, paged causal attention, SwiGLU. AVX2 + FMA + F16C, and AVX-512 VNNI
 * variants of the own-format kernels chosen at run time.
 *
 * Matmul structure: the output rows (rows of W) are cut into chunks that threads take from an
 * atomic counter; several matrices sharing one input (Q/K/V, gate/up) go in one dispatch. Inside a
 * chunk, tokens are processed in small tiles so one weight load feeds several tokens (prefill)
 * while the weight chunk stays in L2; at T = 1 (decode) the kernel streams W row after row with a
 * software prefetch ahead of the hardware prefetchers (which stop at 4 KiB page boundaries).
 *
 * The arithmetic of every output element is fixed (see cpu.h "Determinism"): tiles only decide
 * which registers hold which accumulators, never the order of the additions. F32 tiles are 4 rows
 * x up to 3 tokens (12 accumulators); GGUF quantised rows are dequantised exactly, 4 at a time,
 * into per-thread scratch and go through the same F32 tiles. Own q8/q4 rows use int8 activations
 * (quantised once per call) and exact int32 group dot products (maddubs/madd, or vpdpbusd), 1 row
 * x up to 4 tokens per tile; each group adds float(isum) * (dw * dx) into one of two accumulators
 * (even / odd groups), summed at the end in a fixed order.
 */
#include "backend/cpu/cpu.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FR_INLINE static inline __attribute__((always_inline))
#ifndef FR_PF_BYTES
#define FR_PF_BYTES 6144 /* own formats: software prefetch this far ahead in the weight stream */
#endif
#define FR_MAX_GROUPS 1024 /* K <= 32768 for the own formats (stack buffers of group scales) */

/* fixed horizontal sum: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) */
FR_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* ------------------------------------------------------------------ scratch */
fr_cpu_scratch *fr_cpu_scratch_new(int max_T, int max_K, int n_threads) {
    if (max_T < 1 || max_K < 32 || max_K > FR_QK * FR_MAX_GROUPS || n_threads < 1) return NULL;
    fr_cpu_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->max_T = max_T;
    s->max_K = max_K;
    s->n_threads = n_threads;
    size_t ng = (size_t)max_K / FR_QK + 1;
    s->xq = aligned_alloc(64, ((size_t)max_T * max_K + 63) / 64 * 64);
    s->xd = malloc((size_t)max_T * ng * sizeof(float));
    s->xs = malloc((size_t)max_T * ng * sizeof(float));
    s->deq = aligned_alloc(64, (size_t)n_threads * FR_CPU_ROWS * max_K * sizeof(float));
    if (!s->xq || !s->xd || !s->xs || !s->deq) {
        fr_cpu_scratch_free(s);
        return NULL;
    }
    return s;
}

void fr_cpu_scratch_free(fr_cpu_scratch *s) {
    if (!s) return;
    free(s->xq);
    free(s->xd);
    free(s->xs);
    free(s->deq);
    free(s);
}

/* ------------------------------------------------------------------ F32 tiles */
float fr_cpu_dot(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < n; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    return hsum8(acc);
}

/* y[t*ys + r] for R rows (w, row stride ws floats) x TT tokens (x, stride K); R, TT constants. */
FR_INLINE void tile_f32(const float *w, size_t ws, int R, const float *x, int TT, int K,
                        float *y, size_t ys) {
    __m256 acc[4][3];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++) acc[r][t] = _mm256_setzero_ps();
    for (int k = 0; k < K; k += 8) {
        __m256 xv[3];
        for (int t = 0; t < TT; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * K + k);
        for (int r = 0; r < R; r++) {
            __m256 wv = _mm256_loadu_ps(w + (size_t)r * ws + k);
            for (int t = 0; t < TT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++) y[(size_t)t * ys + r] = hsum8(acc[r][t]);
}

/* Decode tile: 4 rows x 1 token that prefetches the next 4-row block into L2 at the same offsets
 * as it goes (the hardware prefetchers stop at 4 KiB pages, and mapped f32 weights are not on huge
 * pages). Prefetches past the matrix end are harmless. Same arithmetic as
 * tile_f32(.., 4, x, 1, ..). */
static void tile_f32_4x1_pf(const float *w, size_t ws, const float *x, int K, float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float *w0 = w, *w1 = w + ws, *w2 = w + 2 * ws, *w3 = w + 3 * ws;
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        _mm_prefetch((const char *)(w0 + 4 * ws + k), _MM_HINT_T1);
        _mm_prefetch((const char *)(w1 + 4 * ws + k), _MM_HINT_T1);
        _mm_prefetch((const char *)(w2 + 4 * ws + k), _MM_HINT_T1);
        _mm_prefetch((const char *)(w3 + 4 * ws + k), _MM_HINT_T1);
        for (int u = 0; u < 16; u += 8) {
            __m256 xv = _mm256_loadu_ps(x + k + u);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k + u), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k + u), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k + u), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k + u), xv, a3);
        }
    }
    for (; k < K; k += 8) {
        __m256 xv = _mm256_loadu_ps(x + k);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), xv, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), xv, a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), xv, a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), xv, a3);
    }
    y[0] = hsum8(a0);
    y[1] = hsum8(a1);
    y[2] = hsum8(a2);
    y[3] = hsum8(a3);
}

/* rows [0, R) of a block (R <= 4) against all T tokens; y points at column r0 of row 0. */
static void rows_f32(const float *w, size_t ws, int R, const float *x, int T, int K, float *y,
                     size_t ys) {
    int t = 0;
    if (R == 4) {
        for (; t + 3 <= T; t += 3) tile_f32(w, ws, 4, x + (size_t)t * K, 3, K, y + t * ys, ys);
        if (T - t == 2) tile_f32(w, ws, 4, x + (size_t)t * K, 2, K, y + t * ys, ys);
        else if (T - t == 1 && T == 1) tile_f32_4x1_pf(w, ws, x, K, y);
        else if (T - t == 1) tile_f32(w, ws, 4, x + (size_t)t * K, 1, K, y + t * ys, ys);
        return;
    }
    for (int r = 0; r < R; r++)
        for (t = 0; t < T; t++) y[(size_t)t * ys + r] = fr_cpu_dot(w + r * ws, x + (size_t)t * K, K);
}

/* ------------------------------------------------------------------ exact dequantisation */
static void deq_q8_0(const fr_block_q8_0 *b, float *dst, int K) {
    for (int g = 0; g < K / FR_QK; g++) {
        __m256 d = _mm256_set1_ps(_cvtsh_ss(b[g].d));
        for (int j = 0; j < FR_QK; j += 8) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(b[g].qs + j));
            __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            _mm256_storeu_ps(dst + g * FR_QK + j, _mm256_mul_ps(q, d));
        }
    }
}

static void deq_q4_0(const fr_block_q4_0 *b, float *dst, int K) {
    const __m128i m4 = _mm_set1_epi8(15), e8 = _mm_set1_epi8(8);
    for (int g = 0; g < K / FR_QK; g++) {
        __m256 d = _mm256_set1_ps(_cvtsh_ss(b[g].d));
        __m128i v = _mm_loadu_si128((const __m128i *)b[g].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), e8);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), e8);
        float *o = dst + g * FR_QK;
        _mm256_storeu_ps(o + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(
                                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(
                                     _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
    }
}

/* ------------------------------------------------------------------ int8 activations */
/* Same arithmetic as fr_ref_quantize_act (cvtps_epi32 rounds to nearest even, like lrintf). */
static void quantize_act(const float *x, int K, int8_t *q, float *d, float *s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int g = 0; g < K / FR_QK; g++) {
        const float *xg = x + g * FR_QK;
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xg + 8 * j);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
        float amax = _mm_cvtss_f32(m);
        float dg = amax / 127.0f, id = dg != 0.0f ? 1.0f / dg : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i i[4];
        for (int j = 0; j < 4; j++) {
            i[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], idv));
            i[j] = _mm256_max_epi32(_mm256_min_epi32(i[j], _mm256_set1_epi32(127)),
                                    _mm256_set1_epi32(-127));
        }
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        /* pack to int8 in element order */
        __m256i p01 = _mm256_packs_epi32(i[0], i[1]), p23 = _mm256_packs_epi32(i[2], i[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + g * FR_QK), p);
        d[g] = dg;
        s[g] = dg * (float)_mm_cvtsi128_si32(s4);
    }
}

/* group scales of one own-format row as floats: dw (nb) [, mw (nb)] */
/* f (round_up(nb, 8)) from h: 8 at a time. Reading up to 7 values past nb stays inside the row
 * (the scale area is followed by more scales or by the quants); the extra lanes are unused. */
static inline void row_scales(const uint16_t *h, float *f, int nb) {
    for (int g = 0; g < nb; g += 8)
        _mm256_storeu_ps(f + g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + g))));
}

/* sc (TT, nb) = dw (nb) * xd (TT, nb): the float scale of every group product */
static inline void group_scales(const float *dw, const float *xd, int nb, int TT, float *sc) {
    for (int t = 0; t < TT; t++) {
        const float *x = xd + (size_t)t * nb;
        float *o = sc + (size_t)t * nb;
        int g = 0;
        for (; g + 8 <= nb; g += 8)
            _mm256_storeu_ps(o + g, _mm256_mul_ps(_mm256_loadu_ps(dw + g), _mm256_loadu_ps(x + g)));
        for (; g < nb; g++) o[g] = dw[g] * x[g];
    }
}

/* One q8 row x TT tokens. xq (TT, K) int8 */
/* sc (TT, nb): per token and group, dw * dx (computed by group_scales). */
/* one group g of a q8 row into acc[0..TT) */
FR_INLINE void step_q8(const int8_t *wq, const float *sc, int K, int nb, const int8_t *xq, int TT,
                       int g, __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i w = _mm256_loadu_si256((const __m256i *)(wq + g * FR_QK));
    __m256i aw = _mm256_sign_epi8(w, w);
    for (int t = 0; t < TT; t++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + (size_t)t * K + g * FR_QK));
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, w)), ones);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(sc + (size_t)t * nb + g),
                                 acc[t]);
    }
}

/* sc (TT, nb): per token and group, dw * dx (computed by group_scales). Even groups go to one
 * accumulator, odd ones to another (two FMA chains), summed at the end. */
FR_INLINE void tile_q8(const int8_t *wq, const float *sc, int K, const int8_t *xq, int TT, float *y,
                       size_t ys) {
    const int nb = K / FR_QK;
    __m256 a0[4], a1[4];
    for (int t = 0; t < TT; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int g = 0;
    for (; g + 1 < nb; g += 2) {
        step_q8(wq, sc, K, nb, xq, TT, g, a0);
        step_q8(wq, sc, K, nb, xq, TT, g + 1, a1);
    }
    if (g < nb) step_q8(wq, sc, K, nb, xq, TT, g, a0);
    for (int t = 0; t < TT; t++) y[(size_t)t * ys] = hsum8(_mm256_add_ps(a0[t], a1[t]));
}

FR_INLINE void step_q4(const uint8_t *wq, const float *sc, int K, int nb, const int8_t *xq, int TT,
                       int g, __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(15);
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    /* 16 bytes in both halves; the high half shifted by 4: elements 0..15 | 16..31 */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wq + g * 16)));
    __m256i w = _mm256_and_si256(_mm256_srlv_epi64(v, shift), m4);
    for (int t = 0; t < TT; t++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + (size_t)t * K + g * FR_QK));
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, xv), ones);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(sc + (size_t)t * nb + g),
                                 acc[t]);
    }
}

/* minimum term of q4, sum_g mw[g] * xs[t][g], as 8 lane partial sums (8 groups per FMA, the
 * last partial block masked); the caller adds it into the row's accumulators before the final
 * horizontal sum. */
FR_INLINE __m256 min_term(const float *mw, const float *xs, int nb) {
    __m256 m = _mm256_setzero_ps();
    int g = 0;
    for (; g + 8 <= nb; g += 8)
        m = _mm256_fmadd_ps(_mm256_loadu_ps(mw + g), _mm256_loadu_ps(xs + g), m);
    if (g < nb) {
        __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(nb - g),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        m = _mm256_fmadd_ps(_mm256_maskload_ps(mw + g, k), _mm256_maskload_ps(xs + g, k), m);
    }
    return m;
}

/* One q4 row x TT tokens; xs (TT, nb) group sums for the minimum term. */
FR_INLINE void tile_q4(const uint8_t *wq, const float *sc, const float *mw, int K, const int8_t *xq,
                       const float *xs, int TT, float *y, size_t ys) {
    const int nb = K / FR_QK;
    __m256 a0[4], a1[4];
    for (int t = 0; t < TT; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    int g = 0;
    for (; g + 1 < nb; g += 2) {
        step_q4(wq, sc, K, nb, xq, TT, g, a0);
        step_q4(wq, sc, K, nb, xq, TT, g + 1, a1);
    }
    if (g < nb) step_q4(wq, sc, K, nb, xq, TT, g, a0);
    for (int t = 0; t < TT; t++)
        y[(size_t)t * ys] =
            hsum8(_mm256_add_ps(_mm256_add_ps(a0[t], a1[t]), min_term(mw, xs + (size_t)t * nb, nb)));
}

/* ------------------------------------------------------------------ matmul driver */
#define FR_MM_MAX 4 /* matrices per fused call */

typedef struct mm_mat {
    float *y;           /* (T, N) output */
    const fr_tensor *w; /* (N, K) weights */
    int N;              /* rows of w */
    size_t wstride;     /* bytes per stored row */
    int chunk;          /* rows per work item (multiple of 4) */
    int c0;             /* first work item of this matrix */
} mm_mat;

typedef struct mm_ctx {
    fr_cpu_scratch *s;
    const float *x;     /* (T, K) shared input */
    int T, K;
    int n_mat;          /* matrices in this call */
    mm_mat mat[FR_MM_MAX];
    int n_items;        /* work items over all matrices */
    bool avx512;        /* own formats: AVX-512 VNNI kernels */
    atomic_int next;    /* next work item */
} mm_ctx;

static void mm_chunk_f32(const mm_ctx *c, const mm_mat *mt, int ith, int r0, int r1) {
    const int K = c->K, T = c->T;
    const fr_dtype dt = mt->w->dtype;
    float *deq = c->s->deq + (size_t)ith * FR_CPU_ROWS * K;
    for (int r = r0; r < r1; r += FR_CPU_ROWS) {
        int R = FR_MIN(FR_CPU_ROWS, r1 - r);
        const uint8_t *wr = (const uint8_t *)mt->w->data + (size_t)r * mt->wstride;
        const float *wf;
        size_t ws;
        if (dt == FR_DTYPE_F32) {
            wf = (const float *)wr;
            ws = (size_t)K;
        } else {
            for (int i = 0; i < R; i++) {
                if (dt == FR_DTYPE_Q8_0)
                    deq_q8_0((const fr_block_q8_0 *)(wr + i * mt->wstride), deq + (size_t)i * K, K);
                else if (dt == FR_DTYPE_Q4_0)
                    deq_q4_0((const fr_block_q4_0 *)(wr + i * mt->wstride), deq + (size_t)i * K, K);
                else /* K-quants: ggml's reference dequantisation, exact */
                    fr_dtype_to_f32(dt, wr + i * mt->wstride, deq + (size_t)i * K, K);
            }
            wf = deq;
            ws = (size_t)K;
        }
        rows_f32(wf, ws, R, c->x, T, K, mt->y + r, (size_t)mt->N);
    }
}

/* F32 prefill: token tiles of 3 outside, 4-row blocks inside, so a chunk of W stays in L2 */
static void mm_chunk_f32_tiled(const mm_ctx *c, const mm_mat *mt, int r0, int r1) {
    const int K = c->K, T = c->T;
    const float *w = mt->w->data;
    for (int t = 0; t < T; t += 3) {
        int TT = FR_MIN(3, T - t);
        const float *xt = c->x + (size_t)t * K;
        float *yt = mt->y + (size_t)t * mt->N;
        for (int r = r0; r < r1; r += 4) {
            int R = r1 - r;
            const float *wr = w + (size_t)r * K;
            if (R >= 4) {
                if (TT == 3) tile_f32(wr, (size_t)K, 4, xt, 3, K, yt + r, (size_t)mt->N);
                else if (TT == 2) tile_f32(wr, (size_t)K, 4, xt, 2, K, yt + r, (size_t)mt->N);
                else tile_f32(wr, (size_t)K, 4, xt, 1, K, yt + r, (size_t)mt->N);
            } else {
                rows_f32(wr, (size_t)K, R, xt, TT, K, yt + r, (size_t)mt->N);
            }
        }
    }
}

#define FR_DEFINE_CHUNK_OWN(NAME, ATTR, TQ8, TQ4)                                                \
ATTR static void NAME(const mm_ctx *c, const mm_mat *mt, int r0, int r1) {                         \
    const int K = c->K, T = c->T, nb = K / FR_QK;                                                  \
    const bool q4 = mt->w->dtype == FR_DTYPE_Q4;                                                   \
    float dw[FR_MAX_GROUPS + 8], mw[FR_MAX_GROUPS + 8]; /* (nb) row's scales / minimums */        \
    float sc[4 * FR_MAX_GROUPS];                /* (TT, nb) scale products */                      \
    const int pf = (int)((FR_PF_BYTES + mt->wstride - 1) / mt->wstride); /* rows */                \
    for (int t = 0; t < T; t += 4) {                                                               \
        int TT = FR_MIN(4, T - t);                                                                 \
        const int8_t *xq = c->s->xq + (size_t)t * K;                                               \
        const float *xd = c->s->xd + (size_t)t * nb, *xs = c->s->xs + (size_t)t * nb;              \
        for (int r = r0; r < r1; r++) {                                                            \
            const uint8_t *wr = (const uint8_t *)mt->w->data + (size_t)r * mt->wstride;            \
            if (t == 0 && r + pf < mt->N) /* the stream goes on into the next chunk */             \
                for (size_t o = 0; o < mt->wstride; o += 64)                                       \
                    _mm_prefetch((const char *)wr + (size_t)pf * mt->wstride + o, _MM_HINT_T0);    \
            float *y = mt->y + (size_t)t * mt->N + r;                                              \
            size_t ys = (size_t)mt->N;                                                             \
            const uint8_t *wqs = wr + fr_own_head_bytes(mt->w->dtype, K);                          \
            if (q4) {                                                                              \
                const uint16_t *h = (const uint16_t *)wr;                                          \
                row_scales(h, dw, nb);                                                             \
                row_scales(h + nb, mw, nb);                                                        \
                group_scales(dw, xd, nb, TT, sc);                                                  \
                switch (TT) {                                                                      \
                case 4: TQ4(wqs, sc, mw, K, xq, xs, 4, y, ys); break;                              \
                case 3: TQ4(wqs, sc, mw, K, xq, xs, 3, y, ys); break;                              \
                case 2: TQ4(wqs, sc, mw, K, xq, xs, 2, y, ys); break;                              \
                default: TQ4(wqs, sc, mw, K, xq, xs, 1, y, ys); break;                             \
                }                                                                                  \
            } else {                                                                               \
                row_scales((const uint16_t *)wr, dw, nb);                                          \
                group_scales(dw, xd, nb, TT, sc);                                                  \
                const int8_t *wq = (const int8_t *)wqs;                                            \
                switch (TT) {                                                                      \
                case 4: TQ8(wq, sc, K, xq, 4, y, ys); break;                                       \
                case 3: TQ8(wq, sc, K, xq, 3, y, ys); break;                                       \
                case 2: TQ8(wq, sc, K, xq, 2, y, ys); break;                                       \
                default: TQ8(wq, sc, K, xq, 1, y, ys); break;                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}

/* ------------------------------------------------------------------ AVX-512 VNNI variants
 * Used when the CPU has AVX-512 BW + VNNI (checked at run time; FRUGAL_CPU_AVX2=1 or
 * fr_cpu_use_avx512(false) turns them off). Two groups per 512-bit step, vpdpbusd for the group
 * dot products (exact int32, like maddubs/madd); each output keeps two 16-lane FMA chains and the
 * same fixed final sum whatever the number of tokens, so batch independence holds as with AVX2. */
#define FR_T512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

FR_T512 static inline __m512 scale_pair(const float *sc, bool odd_only) {
    __m512 s = _mm512_set1_ps(sc[0]);
    return odd_only ? s : _mm512_mask_broadcastss_ps(s, 0xFF00, _mm_load_ss(sc + 1));
}

FR_T512 static inline float hsum16(__m512 a, __m512 b) {
    __m512 s = _mm512_add_ps(a, b);
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1)));
}

/* two groups 2p, 2p+1 of a q8 row (just 2p when `last` and nb is odd) into acc[0..TT) */
FR_T512 static inline __attribute__((always_inline)) void
step_q8_512(const int8_t *wq, const float *sc, int K, int nb, const int8_t *xq, int TT, int p,
            bool one, __m512 *acc) {
    const __m512i zero = _mm512_setzero_si512();
    const __mmask64 ld = one ? 0xFFFFFFFFull : ~(__mmask64)0;
    __m512i w = _mm512_maskz_loadu_epi8(ld, wq + p * 64);
    __m512i aw = _mm512_abs_epi8(w);
    __mmask64 neg = _mm512_movepi8_mask(w);
    for (int t = 0; t < TT; t++) {
        __m512i xv = _mm512_maskz_loadu_epi8(ld, xq + (size_t)t * K + p * 64);
        __m512i d = _mm512_dpbusd_epi32(zero, aw, _mm512_mask_sub_epi8(xv, neg, zero, xv));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), scale_pair(sc + (size_t)t * nb + 2 * p, one),
                                 acc[t]);
    }
}

FR_T512 static inline __attribute__((always_inline)) void
tile_q8_512(const int8_t *wq, const float *sc, int K, const int8_t *xq, int TT, float *y, size_t ys) {
    const int nb = K / FR_QK, np = nb / 2;
    __m512 a0[4], a1[4];
    for (int t = 0; t < TT; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    int p = 0;
    for (; p + 1 < np; p += 2) {
        step_q8_512(wq, sc, K, nb, xq, TT, p, false, a0);
        step_q8_512(wq, sc, K, nb, xq, TT, p + 1, false, a1);
    }
    if (p < np) step_q8_512(wq, sc, K, nb, xq, TT, p++, false, a0);
    if (nb & 1) step_q8_512(wq, sc, K, nb, xq, TT, p, true, a1);
    for (int t = 0; t < TT; t++) y[(size_t)t * ys] = hsum16(a0[t], a1[t]);
}

FR_T512 static inline __attribute__((always_inline)) void
step_q4_512(const uint8_t *wq, const float *sc, int K, int nb, const int8_t *xq, int TT, int p,
            bool one, __m512 *acc) {
    const __m512i zero = _mm512_setzero_si512(), m4 = _mm512_set1_epi8(15);
    const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    const __mmask64 ld = one ? 0xFFFFFFFFull : ~(__mmask64)0;
    /* 32 bytes = two groups' nibbles -> 128-bit lanes [A, A, B, B], the second of each pair
     * shifted by 4: bytes in element order A 0..15, A 16..31, B 0..15, B 16..31 */
    __m256i v = _mm256_maskz_loadu_epi8(one ? 0xFFFFu : 0xFFFFFFFFu, wq + p * 32);
    __m512i v4 = _mm512_shuffle_i64x2(_mm512_castsi256_si512(v), _mm512_castsi256_si512(v),
                                      _MM_SHUFFLE(1, 1, 0, 0));
    __m512i w = _mm512_and_si512(_mm512_srlv_epi64(v4, shift), m4);
    for (int t = 0; t < TT; t++) {
        __m512i xv = _mm512_maskz_loadu_epi8(ld, xq + (size_t)t * K + p * 64);
        __m512i d = _mm512_dpbusd_epi32(zero, w, xv);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), scale_pair(sc + (size_t)t * nb + 2 * p, one),
                                 acc[t]);
    }
}

FR_T512 static inline __attribute__((always_inline)) void
tile_q4_512(const uint8_t *wq, const float *sc, const float *mw, int K, const int8_t *xq,
            const float *xs, int TT, float *y, size_t ys) {
    const int nb = K / FR_QK, np = nb / 2;
    __m512 a0[4], a1[4];
    for (int t = 0; t < TT; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    int p = 0;
    for (; p + 1 < np; p += 2) {
        step_q4_512(wq, sc, K, nb, xq, TT, p, false, a0);
        step_q4_512(wq, sc, K, nb, xq, TT, p + 1, false, a1);
    }
    if (p < np) step_q4_512(wq, sc, K, nb, xq, TT, p++, false, a0);
    if (nb & 1) step_q4_512(wq, sc, K, nb, xq, TT, p, true, a1);
    for (int t = 0; t < TT; t++) {
        __m512 m = _mm512_insertf32x8(_mm512_setzero_ps(), min_term(mw, xs + (size_t)t * nb, nb), 0);
        y[(size_t)t * ys] = hsum16(_mm512_add_ps(a0[t], m), a1[t]);
    }
}

FR_DEFINE_CHUNK_OWN(mm_chunk_own, , tile_q8, tile_q4)
FR_DEFINE_CHUNK_OWN(mm_chunk_own_512, FR_T512, tile_q8_512, tile_q4_512)

/* -1 unknown, 0 AVX2, 1 AVX-512 VNNI */
static atomic_int use_512 = -1;

static bool cpu_has_512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}

bool fr_cpu_avx512(void) {
    int u = atomic_load(&use_512);
    if (u < 0) {
        const char *e = getenv("FRUGAL_CPU_AVX2");
        u = cpu_has_512() && !(e && *e && strcmp(e, "0")) ? 1 : 0;
        atomic_store(&use_512, u);
    }
    return u == 1;
}

bool fr_cpu_use_avx512(bool on) {
    atomic_store(&use_512, on && cpu_has_512() ? 1 : 0);
    return atomic_load(&use_512) == 1;
}

static void mm_worker(void *arg, int ith, int nth) {
    mm_ctx *c = arg;
    (void)nth;
    for (;;) {
        int it = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
        if (it >= c->n_items) break;
        int i = 0;
        while (i + 1 < c->n_mat && it >= c->mat[i + 1].c0) i++;
        const mm_mat *mt = &c->mat[i];
        int r0 = (it - mt->c0) * mt->chunk, r1 = FR_MIN(mt->N, r0 + mt->chunk);
        switch ((int)mt->w->dtype) {
        case FR_DTYPE_F32:
            if (c->T > 3) mm_chunk_f32_tiled(c, mt, r0, r1);
            else mm_chunk_f32(c, mt, ith, r0, r1);
            break;
        case FR_DTYPE_Q8_0:
        case FR_DTYPE_Q4_0:
        case FR_DTYPE_Q4_K:
        case FR_DTYPE_Q5_K:
        case FR_DTYPE_Q6_K: mm_chunk_f32(c, mt, ith, r0, r1); break;
        default:
            if (c->avx512) mm_chunk_own_512(c, mt, r0, r1);
            else mm_chunk_own(c, mt, r0, r1);
            break;
        }
    }
}

typedef struct qa_ctx {
    const float *x;
    fr_cpu_scratch *s;
    int T, K;
} qa_ctx;

static void qa_worker(void *arg, int ith, int nth) {
    qa_ctx *c = arg;
    int nb = c->K / FR_QK;
    for (int t = ith; t < c->T; t += nth)
        quantize_act(c->x + (size_t)t * c->K, c->K, c->s->xq + (size_t)t * c->K,
                     c->s->xd + (size_t)t * nb, c->s->xs + (size_t)t * nb);
}

void fr_cpu_matmul_n(fr_pool *pool, fr_cpu_scratch *s, int n, float *const *ys, const float *x,
                     const fr_tensor *const *ws, int T) {
    FR_ASSERT(n >= 1 && n <= FR_MM_MAX);
    const int K = (int)ws[0]->ne[0];
    int nth = fr_pool_size(pool);
    FR_ASSERT(T >= 1 && T <= s->max_T && K <= s->max_K && nth <= s->n_threads);
    mm_ctx c = {.s = s, .x = x, .T = T, .K = K, .n_mat = n, .avx512 = fr_cpu_avx512()};
    bool own = false;
    size_t work = 0;
    for (int i = 0; i < n; i++) {
        const fr_tensor *w = ws[i];
        const fr_dtype dt = w->dtype;
        const int N = (int)w->ne[1];
        FR_ASSERT(w->ne[0] == K && fr_cpu_dtype_supported(dt));
        FR_ASSERT(K % (dt == FR_DTYPE_F32 ? 8 : FR_QK) == 0);
        own |= dt == FR_DTYPE_Q8 || dt == FR_DTYPE_Q4;
        /* enough items for balance (a core may be interrupted), at least 16 rows in prefill */
        int target = N / (nth * 16);
        int chunk = target > 16 ? target : 16;
        if (T > 1 && chunk > 64) chunk = 64;
        if (T == 1 && N < nth * 64) chunk = 4;
        chunk = (chunk + 3) / 4 * 4;
        c.mat[i] = (mm_mat){.y = ys[i], .w = w, .N = N, .wstride = fr_cpu_row_bytes(dt, K),
                            .chunk = chunk, .c0 = c.n_items};
        c.n_items += (N + chunk - 1) / chunk;
        work += (size_t)N * K * (size_t)T;
    }
    if (own) {
        qa_ctx q = {x, s, T, K};
        if (T >= 8) fr_pool_run(pool, qa_worker, &q);
        else qa_worker(&q, 0, 1);
    }
    atomic_init(&c.next, 0);
    if (nth > 1 && work >= 32768) fr_pool_run(pool, mm_worker, &c);
    else mm_worker(&c, 0, 1);
}

void fr_cpu_matmul(fr_pool *pool, fr_cpu_scratch *s, float *y, const float *x, const fr_tensor *w,
                   int T) {
    fr_cpu_matmul_n(pool, s, 1, &y, x, &w, T);
}

/* ------------------------------------------------------------------ small ops */
void fr_cpu_rmsnorm(float *out, const float *x, const float *g, int T, int n, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n;
        float *o = out + (size_t)t * n;
        float ss;
        if (n % 8 == 0) {
            ss = fr_cpu_dot(xr, xr, n);
        } else {
            ss = 0;
            for (int i = 0; i < n; i++) ss = fmaf(xr[i], xr[i], ss);
        }
        float r = 1.0f / sqrtf(ss / (float)n + eps);
        for (int i = 0; i < n; i++) o[i] = (xr[i] * r) * g[i];
    }
}

void fr_cpu_rope_table(float *cs, float *sn, int n_pos, int head_dim, float theta,
                       const float *freq_factors, bool bf16_freqs) {
    int half = head_dim / 2;
    for (int p = 0; p < n_pos; p++)
        for (int i = 0; i < half; i++) {
            double inv = pow((double)theta, -2.0 * i / head_dim);
            if (freq_factors) inv /= freq_factors[i];
            if (bf16_freqs) inv = fr_bf16_to_f32(fr_f32_to_bf16((float)inv));
            double a = (double)p * inv;
            cs[(size_t)p * half + i] = (float)cos(a);
            sn[(size_t)p * half + i] = (float)sin(a);
        }
}

void fr_cpu_rope(float *x, int T, int n_head, int head_dim, const int32_t *pos, bool interleaved,
                 const float *cs, const float *sn) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cs + (size_t)pos[t] * half, *s = sn + (size_t)pos[t] * half;
        for (int h = 0; h < n_head; h++) {
            float *v = x + ((size_t)t * n_head + h) * head_dim;
            for (int i = 0; i < half; i++) {
                int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
                float x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * c[i] - x1 * s[i];
                v[i1] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}

void fr_cpu_rope_mrope(float *x, int T, int n_head, int head_dim, const int32_t *rope_pos,
                       const int sect[3], bool interleaved, const float *cs, const float *sn) {
    int half = head_dim / 2, b1 = sect[0], b2 = sect[0] + sect[1];
    for (int t = 0; t < T; t++) {
        const size_t r0 = (size_t)rope_pos[t] * half, r1 = (size_t)rope_pos[T + t] * half,
                     r2 = (size_t)rope_pos[2 * (size_t)T + t] * half;
        for (int h = 0; h < n_head; h++) {
            float *v = x + ((size_t)t * n_head + h) * head_dim;
            for (int i = 0; i < half; i++) {
                size_t r = (i < b1 ? r0 : i < b2 ? r1 : r2) + (size_t)i;
                int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
                float x0 = v[i0], x1 = v[i1];
                v[i0] = x0 * cs[r] - x1 * sn[r];
                v[i1] = x0 * sn[r] + x1 * cs[r];
            }
        }
    }
}

void fr_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

typedef struct att_ctx {
    float *out;
    const float *q;
    const fr_kv_view *kv;
    const int *const *blocks;
    const int32_t *pos;
    int T, n_head, n_head_kv, head_dim;
    float *scores;
    int scores_stride;
    atomic_int next;
} att_ctx;

static void att_one(att_ctx *c, int ith, int t, int h) {
    const int hd = c->head_dim, hk = h / (c->n_head / c->n_head_kv), n = c->pos[t] + 1;
    const int bs = c->kv->block_size;
    const size_t row = (size_t)c->kv->kv_dim, layer_off = (size_t)c->kv->layer * bs * row,
                 block_stride = (size_t)c->kv->n_layer * bs * row, head_off = (size_t)hk * hd;
    const float *qh = c->q + ((size_t)t * c->n_head + h) * hd;
    float *o = c->out + ((size_t)t * c->n_head + h) * hd;
    float *sc = c->scores + (size_t)ith * c->scores_stride; /* (n) scores, then weights */
    const int *blocks = c->blocks[t];
    const float scale = 1.0f / sqrtf((float)hd);
    float mx = -INFINITY;
    /* positions j = 0..n-1 in order, walking the block table (no division per position) */
    for (int j0 = 0, bi = 0; j0 < n; j0 += bs, bi++) {
        const float *kb = c->kv->k + (size_t)blocks[bi] * block_stride + layer_off + head_off;
        int m = FR_MIN(bs, n - j0);
        for (int i = 0; i < m; i++) {
            const float *kj = kb + (size_t)i * row;
            float s;
            if (hd % 8 == 0) {
                s = fr_cpu_dot(qh, kj, hd);
            } else {
                s = 0;
                for (int e = 0; e < hd; e++) s = fmaf(qh[e], kj[e], s);
            }
            sc[j0 + i] = s * scale;
            mx = sc[j0 + i] > mx ? sc[j0 + i] : mx;
        }
    }
    float sum = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    for (int i = 0; i < hd; i++) o[i] = 0;
    for (int j0 = 0, bi = 0; j0 < n; j0 += bs, bi++) {
        const float *vb = c->kv->v + (size_t)blocks[bi] * block_stride + layer_off + head_off;
        int m = FR_MIN(bs, n - j0);
        for (int jj = 0; jj < m; jj++) {
            const float *vj = vb + (size_t)jj * row;
            const float pj = sc[j0 + jj];
            int i = 0;
            __m256 p = _mm256_set1_ps(pj);
            for (; i + 8 <= hd; i += 8)
                _mm256_storeu_ps(o + i, _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + i),
                                                        _mm256_loadu_ps(o + i)));
            for (; i < hd; i++) o[i] = fmaf(pj, vj[i], o[i]);
        }
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++) o[i] *= inv;
}

static void att_worker(void *arg, int ith, int nth) {
    att_ctx *c = arg;
    (void)nth;
    const int total = c->T * c->n_head;
    for (;;) {
        int i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
        if (i >= total) break;
        att_one(c, ith, i / c->n_head, i % c->n_head);
    }
}

void fr_cpu_attention(fr_pool *pool, float *out, const float *q, const fr_kv_view *kv,
                      const int *const *blocks, const int32_t *pos, int T, int n_head,
                      int n_head_kv, int head_dim, float *scores, int scores_stride) {
    att_ctx c = {.out = out, .q = q, .kv = kv, .blocks = blocks, .pos = pos, .T = T,
                 .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim,
                 .scores = scores, .scores_stride = scores_stride};
    atomic_init(&c.next, 0);
    fr_pool_run(pool, att_worker, &c);
}

void fr_cpu_sgemm_nt(float *c, const float *a, const float *b, int M, int N, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
}
