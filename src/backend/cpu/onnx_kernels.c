/* onnx_kernels.c — the convolution kernels of the ONNX executor (onnx_ops.h), fp32, NCHW.
 *
 * Dense convolution: per image and group, im2col writes the (C/g*kh*kw, OH*OW) patch matrix
 * (skipped for a 1x1 kernel with stride 1 and no padding, whose patch matrix is the input
 * itself), then one sgemm (M/g, K) . (K, OH*OW) writes the output plane block; the bias and
 * the fused activation follow in one pass. Depthwise convolution (one input and one output
 * channel per group, the MobileNet blocks of PP-OCR) is a direct loop per channel plane: for
 * each kernel tap, the range of output columns whose input column lies inside the image is
 * computed once, so the inner loop has no bounds test (and is contiguous for stride 1).
 * Planes are split over the pool's threads; sgemm uses OpenBLAS's own threads.
 * Transposed convolution: sgemm (M/g*kh*kw, H*W) = w^T . x, then col2im adds the taps.
 */
#include <cblas.h>
#include <string.h>

#include "backend/cpu/onnx_ops.h"

void ox_sgemm(int64_t M, int64_t N, int64_t K, const float *a, const float *b, float *y) {
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum (OpenBLAS refuses a leading dimension of 0) */
        memset(y, 0, (size_t)(M * N) * sizeof *y);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a,
                (int)K, b, (int)N, 0.0f, y, (int)N);
}

/* The output columns [lo, hi) whose input column ox*s - p + k*dl lies in [0, W). */
static void col_range(int64_t W, int64_t OW, int64_t s, int64_t p, int64_t koff, int64_t *lo,
                      int64_t *hi) {
    const int64_t off = koff - p; /* ix = ox*s + off */
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = (W - 1 - off) >= 0 ? (W - 1 - off) / s + 1 : 0;
    if (a > OW) a = OW;
    if (b > OW) b = OW;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

static int conv_is_direct(const ox_conv *cv) {
    return cv->C / cv->g == 1 && cv->M / cv->g == 1;
}
static int conv_is_pointwise(const ox_conv *cv) {
    return cv->kh == 1 && cv->kw == 1 && cv->sh == 1 && cv->sw == 1 && cv->pt == 0 &&
           cv->pl == 0 && cv->OH == cv->H && cv->OW == cv->W;
}

int64_t ox_conv_scratch(const ox_conv *cv) {
    if (conv_is_direct(cv) || conv_is_pointwise(cv)) return 0;
    return cv->C / cv->g * cv->kh * cv->kw * cv->OH * cv->OW;
}

/* col (Cg*kh*kw, OH*OW) from x (Cg, H, W). */
static void im2col(const ox_conv *cv, int64_t Cg, const float *x, float *col) {
    const int64_t P = cv->OH * cv->OW;
    for (int64_t c = 0; c < Cg; c++)
        for (int64_t ky = 0; ky < cv->kh; ky++)
            for (int64_t kx = 0; kx < cv->kw; kx++) {
                float *row = col + ((c * cv->kh + ky) * cv->kw + kx) * P;
                int64_t lo, hi;
                col_range(cv->W, cv->OW, cv->sw, cv->pl, kx * cv->dw, &lo, &hi);
                const int64_t xoff = kx * cv->dw - cv->pl;
                for (int64_t oy = 0; oy < cv->OH; oy++) {
                    float *r = row + oy * cv->OW;
                    const int64_t iy = oy * cv->sh - cv->pt + ky * cv->dh;
                    if (iy < 0 || iy >= cv->H) {
                        memset(r, 0, (size_t)cv->OW * sizeof *r);
                        continue;
                    }
                    const float *xr = x + (c * cv->H + iy) * cv->W;
                    for (int64_t ox = 0; ox < lo; ox++) r[ox] = 0;
                    if (cv->sw == 1)
                        memcpy(r + lo, xr + lo + xoff, (size_t)(hi - lo) * sizeof *r);
                    else
                        for (int64_t ox = lo; ox < hi; ox++) r[ox] = xr[ox * cv->sw + xoff];
                    for (int64_t ox = hi; ox < cv->OW; ox++) r[ox] = 0;
                }
            }
}

/* Adds the bias of each of the M channels of y (M, P) and applies the activation. */
static void bias_act(float *y, int64_t M, int64_t P, const float *bias, const ox_epi *epi) {
    for (int64_t m = 0; m < M; m++) {
        float *r = y + m * P;
        if (bias) {
            const float bv = bias[m];
            for (int64_t i = 0; i < P; i++) r[i] += bv;
        }
        ox_epi_apply(epi, r, P);
    }
}

typedef struct ba_job {
    float *y;
    int64_t M, P;
    const float *bias;
    const ox_epi *epi;
} ba_job;

/* Channels [M*ith/nth, M*(ith+1)/nth) of a bias + epilogue pass. */
static void ba_worker(void *ctx, int ith, int nth) {
    const ba_job *j = ctx;
    const int64_t a = j->M * ith / nth, b = j->M * (ith + 1) / nth;
    bias_act(j->y + a * j->P, b - a, j->P, j->bias ? j->bias + a : NULL, j->epi);
}

typedef struct dw_job {
    const ox_conv *cv;
    const float *x, *w, *bias;
    float *y;
    const ox_epi *epi;
} dw_job;

static void dw_taps(const ox_conv *cv, const float *x, const float *w, float *y);
static void dw_rows_fused(const ox_conv *cv, const float *x, const float *w, float *y);

/* One plane (image n, channel c) of a depthwise convolution. */
static void dw_plane(const dw_job *j, int64_t plane) {
    const ox_conv *cv = j->cv;
    const int64_t c = plane % cv->C;
    const float *x = j->x + plane * cv->H * cv->W;
    const float *w = j->w + c * cv->kh * cv->kw;
    float *y = j->y + plane * cv->OH * cv->OW;
    const float bv = j->bias ? j->bias[c] : 0.0f;
    for (int64_t i = 0; i < cv->OH * cv->OW; i++) y[i] = bv;
    if ((cv->kw == 3 || cv->kw == 5) && cv->dw == 1) {
        dw_rows_fused(cv, x, w, y);
    } else {
        dw_taps(cv, x, w, y);
    }
    ox_epi_apply(j->epi, y, cv->OH * cv->OW);
}

/* Depthwise, one pass per kernel tap: y[oy][ox] += w[ky][kx] * x[iy][ix] over the columns where
 * ix is inside the row (any kernel, stride, dilation). */
static void dw_taps(const ox_conv *cv, const float *x, const float *w, float *y) {
    for (int64_t kx = 0; kx < cv->kw; kx++) {
        int64_t lo, hi;
        col_range(cv->W, cv->OW, cv->sw, cv->pl, kx * cv->dw, &lo, &hi);
        const int64_t xoff = kx * cv->dw - cv->pl;
        for (int64_t oy = 0; oy < cv->OH; oy++) {
            float *yr = y + oy * cv->OW;
            for (int64_t ky = 0; ky < cv->kh; ky++) {
                const int64_t iy = oy * cv->sh - cv->pt + ky * cv->dh;
                if (iy < 0 || iy >= cv->H) continue;
                const float wv = w[ky * cv->kw + kx];
                const float *xr = x + iy * cv->W + xoff;
                if (cv->sw == 1)
                    for (int64_t ox = lo; ox < hi; ox++) yr[ox] += wv * xr[ox];
                else
                    for (int64_t ox = lo; ox < hi; ox++) yr[ox] += wv * xr[ox * cv->sw];
            }
        }
    }
}

/* Depthwise with a kernel 3 or 5 wide (dilation 1 across): one pass per kernel row, the taps of
 * the row summed in registers over the columns where all of them are inside the image; the
 * columns near the edges take the taps one by one. */
static void dw_rows_fused(const ox_conv *cv, const float *x, const float *w, float *y) {
    const int64_t kw = cv->kw, sw = cv->sw, pl = cv->pl;
    int64_t A = 0, B = cv->OW; /* the columns where every tap is inside */
    for (int64_t kx = 0; kx < kw; kx++) {
        int64_t lo, hi;
        col_range(cv->W, cv->OW, sw, pl, kx, &lo, &hi);
        A = FR_MAX(A, lo);
        B = FR_MIN(B, hi);
    }
    if (B < A) B = A;
    for (int64_t oy = 0; oy < cv->OH; oy++) {
        float *yr = y + oy * cv->OW;
        for (int64_t ky = 0; ky < cv->kh; ky++) {
            const int64_t iy = oy * cv->sh - cv->pt + ky * cv->dh;
            if (iy < 0 || iy >= cv->H) continue;
            const float *wr = w + ky * kw;
            const float *xr = x + iy * cv->W; /* tap kx of column ox reads xr[ox*sw - pl + kx] */
            for (int64_t kx = 0; kx < kw; kx++) { /* the edge columns, tap by tap */
                int64_t lo, hi;
                col_range(cv->W, cv->OW, sw, pl, kx, &lo, &hi);
                for (int64_t ox = lo; ox < FR_MIN(hi, A); ox++) yr[ox] += wr[kx] * xr[ox * sw - pl + kx];
                for (int64_t ox = FR_MAX(lo, B); ox < hi; ox++) yr[ox] += wr[kx] * xr[ox * sw - pl + kx];
            }
            if (B <= A) continue;
            const float w0 = wr[0], w1 = wr[1], w2 = wr[2];
            const float *p = xr + (A * sw - pl); /* column A's first tap: inside the row */
            float *q = yr + A;
            const int64_t n = B - A;
            if (kw == 3 && sw == 1) {
                for (int64_t i = 0; i < n; i++) q[i] += w0 * p[i] + w1 * p[i + 1] + w2 * p[i + 2];
            } else if (kw == 3) {
                for (int64_t i = 0; i < n; i++) {
                    const float *t = p + i * sw;
                    q[i] += w0 * t[0] + w1 * t[1] + w2 * t[2];
                }
            } else if (sw == 1) {
                const float w3 = wr[3], w4 = wr[4];
                for (int64_t i = 0; i < n; i++)
                    q[i] += w0 * p[i] + w1 * p[i + 1] + w2 * p[i + 2] + w3 * p[i + 3] + w4 * p[i + 4];
            } else {
                const float w3 = wr[3], w4 = wr[4];
                for (int64_t i = 0; i < n; i++) {
                    const float *t = p + i * sw;
                    q[i] += w0 * t[0] + w1 * t[1] + w2 * t[2] + w3 * t[3] + w4 * t[4];
                }
            }
        }
    }
}

static void dw_worker(void *ctx, int ith, int nth) {
    const dw_job *j = ctx;
    const int64_t planes = j->cv->N * j->cv->C;
    const int64_t a = planes * ith / nth, b = planes * (ith + 1) / nth;
    for (int64_t p = a; p < b; p++) dw_plane(j, p);
}

void ox_conv_run(fr_pool *pool, const ox_conv *cv, const float *x, const float *w,
                 const float *bias, float *y, float *col, const ox_epi *epi) {
    if (conv_is_direct(cv)) {
        dw_job j = {cv, x, w, bias, y, epi};
        if (pool && cv->N * cv->C >= 2 * fr_pool_size(pool)) fr_pool_run(pool, dw_worker, &j);
        else dw_worker(&j, 0, 1);
        return;
    }
    const int64_t Cg = cv->C / cv->g, Mg = cv->M / cv->g, K = Cg * cv->kh * cv->kw;
    const int64_t P = cv->OH * cv->OW;
    const int pw = conv_is_pointwise(cv);
    for (int64_t n = 0; n < cv->N; n++)
        for (int64_t g = 0; g < cv->g; g++) {
            const float *xg = x + (n * cv->C + g * Cg) * cv->H * cv->W;
            float *yg = y + (n * cv->M + g * Mg) * P;
            const float *b = xg;
            if (!pw) {
                im2col(cv, Cg, xg, col);
                b = col;
            }
            ox_sgemm(Mg, P, K, w + g * Mg * K, b, yg);
            ba_job j = {yg, Mg, P, bias ? bias + g * Mg : NULL, epi};
            if (pool && Mg >= 2 * fr_pool_size(pool) && (bias || (epi && epi->n)))
                fr_pool_run(pool, ba_worker, &j);
            else
                ba_worker(&j, 0, 1);
        }
}

int64_t ox_convt_scratch(const ox_conv *cv) {
    return cv->M / cv->g * cv->kh * cv->kw * cv->H * cv->W;
}

void ox_convt_run(const ox_conv *cv, const float *x, const float *w, const float *bias, float *y,
                  float *col) {
    const int64_t Cg = cv->C / cv->g, Mg = cv->M / cv->g, P = cv->H * cv->W;
    const int64_t KK = cv->kh * cv->kw, OP = cv->OH * cv->OW;
    for (int64_t n = 0; n < cv->N; n++)
        for (int64_t g = 0; g < cv->g; g++) {
            const float *xg = x + (n * cv->C + g * Cg) * P;
            float *yg = y + (n * cv->M + g * Mg) * OP;
            /* col (Mg*kh*kw, P) = w_g^T (Mg*kh*kw, Cg) . x_g (Cg, P); w_g is (Cg, Mg*kh*kw) */
            if (Mg * KK > 0 && P > 0 && Cg == 0) memset(col, 0, (size_t)(Mg * KK * P) * sizeof *col);
            else if (Mg * KK > 0 && P > 0) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(Mg * KK), (int)P, (int)Cg,
                        1.0f, w + g * Cg * Mg * KK, (int)(Mg * KK), xg, (int)P, 0.0f, col,
                        (int)P);
            for (int64_t m = 0; m < Mg; m++) {
                float *ym = yg + m * OP;
                const float bv = bias ? bias[g * Mg + m] : 0.0f;
                for (int64_t i = 0; i < OP; i++) ym[i] = bv;
                if (P == 0) continue; /* an empty input: col is NULL, only the bias */
                for (int64_t ky = 0; ky < cv->kh; ky++)
                    for (int64_t kx = 0; kx < cv->kw; kx++) {
                        const float *cr = col + ((m * cv->kh + ky) * cv->kw + kx) * P;
                        for (int64_t iy = 0; iy < cv->H; iy++) {
                            const int64_t oy = iy * cv->sh - cv->pt + ky * cv->dh;
                            if (oy < 0 || oy >= cv->OH) continue;
                            for (int64_t ix = 0; ix < cv->W; ix++) {
                                const int64_t ox = ix * cv->sw - cv->pl + kx * cv->dw;
                                if (ox < 0 || ox >= cv->OW) continue;
                                ym[oy * cv->OW + ox] += cr[iy * cv->W + ix];
                            }
                        }
                    }
            }
        }
}
