/* qformat.c — storage formats of weight rows: sizes, names, quantisation and dequantisation of
 * one row, for the GGUF block formats (Q8_0, Q4_0) and the CPU's own q8/q4 (layouts in cpu.h).
 *
 * All of this is plain C: it runs once per row at load/quantise time, or once per gathered
 * embedding row, never in a hot loop.
 *
 * Own q4 quantisation: start from the group's min/max (d = (max-min)/15, m = min), then refine
 * (d, m) twice by least squares on the current integer codes, keeping the best squared error.
 * Scales and minimums are stored as f16, and the codes are computed against the rounded values so
 * the stored row reproduces exactly what was measured.
 */
#include "backend/cpu/cpu.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define FR_ROW_ALIGN 64

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

const char *fr_cpu_dtype_name(fr_dtype t) {
    switch ((int)t) {
    case FR_DTYPE_F32: return "f32";
    case FR_DTYPE_F16: return "f16";
    case FR_DTYPE_BF16: return "bf16";
    case FR_DTYPE_Q8_0: return "q8_0";
    case FR_DTYPE_Q4_0: return "q4_0";
    case FR_DTYPE_Q4_K: return "q4_k";
    case FR_DTYPE_Q5_K: return "q5_k";
    case FR_DTYPE_Q6_K: return "q6_k";
    case (int)FR_DTYPE_Q8: return "q8";
    case (int)FR_DTYPE_Q4: return "q4";
    default: return "?";
    }
}

size_t fr_cpu_row_bytes(fr_dtype t, int64_t n) {
    size_t un = (size_t)n, nb = un / FR_QK;
    switch ((int)t) {
    case FR_DTYPE_F32: return un * 4;
    case FR_DTYPE_F16:
    case FR_DTYPE_BF16: return un * 2;
    case FR_DTYPE_Q8_0: return nb * sizeof(fr_block_q8_0);
    case FR_DTYPE_Q4_0: return nb * sizeof(fr_block_q4_0);
    case FR_DTYPE_Q4_K:
    case FR_DTYPE_Q5_K:
    case FR_DTYPE_Q6_K: return fr_dtype_row_size(t, n);
    case (int)FR_DTYPE_Q8: return round_up(fr_own_head_bytes(t, n) + un, FR_ROW_ALIGN);
    case (int)FR_DTYPE_Q4: return round_up(fr_own_head_bytes(t, n) + un / 2, FR_ROW_ALIGN);
    default: return 0;
    }
}

bool fr_cpu_dtype_supported(fr_dtype t) {
    return t == FR_DTYPE_F32 || t == FR_DTYPE_Q8_0 || t == FR_DTYPE_Q4_0 || t == FR_DTYPE_Q4_K ||
           t == FR_DTYPE_Q5_K || t == FR_DTYPE_Q6_K || t == FR_DTYPE_Q8 || t == FR_DTYPE_Q4;
}

/* round to nearest, ties to even (the default MXCSR mode): lrintf without the libm call */
static inline long rint_l(float x) { return _mm_cvtss_si32(_mm_set_ss(x)); }

static float f16r(float x) { return fr_f16_to_f32(fr_f32_to_f16(x)); }

/* One q4 group: codes q (32) for scale d and min m, and the squared error. */
static double q4_codes(const float *x, float d, float m, uint8_t *q) {
    double err = 0;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < FR_QK; j++) {
        long v = rint_l((x[j] - m) * id);
        v = v < 0 ? 0 : v > 15 ? 15 : v;
        q[j] = (uint8_t)v;
        double e = (double)x[j] - ((double)v * d + m);
        err += e * e;
    }
    return err;
}

static void quantize_q4_group(const float *x, uint16_t *dd, uint16_t *mm, uint8_t *q) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < FR_QK; j++) {
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    float d = f16r((hi - lo) / 15.0f), m = f16r(lo);
    uint8_t best[FR_QK], cur[FR_QK];
    double best_err = q4_codes(x, d, m, best);
    float bd = d, bm = m;
    memcpy(cur, best, sizeof cur);
    for (int it = 0; it < 2; it++) {
        /* least squares x ~ q*d + m for fixed codes */
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        for (int j = 0; j < FR_QK; j++) {
            sq += cur[j];
            sqq += (double)cur[j] * cur[j];
            sx += x[j];
            sqx += (double)cur[j] * x[j];
        }
        double det = FR_QK * sqq - sq * sq;
        if (det <= 0) break;
        float nd = f16r((float)((FR_QK * sqx - sq * sx) / det));
        float nm = f16r((float)((sx - (double)nd * sq) / FR_QK));
        double e = q4_codes(x, nd, nm, cur);
        if (e < best_err) {
            best_err = e;
            bd = nd;
            bm = nm;
            memcpy(best, cur, sizeof best);
        }
    }
    *dd = fr_f32_to_f16(bd);
    *mm = fr_f32_to_f16(bm);
    memcpy(q, best, sizeof best);
}

void fr_cpu_quantize_row(fr_dtype t, const float *src, void *dst, int64_t n) {
    int64_t nb = n / FR_QK;
    FR_ASSERT(n % FR_QK == 0);
    if (t == FR_DTYPE_Q8_0) {
        fr_block_q8_0 *b = dst;
        for (int64_t g = 0; g < nb; g++) {
            const float *x = src + g * FR_QK;
            float amax = 0;
            for (int j = 0; j < FR_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
            float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            b[g].d = fr_f32_to_f16(d);
            for (int j = 0; j < FR_QK; j++) b[g].qs[j] = (int8_t)roundf(x[j] * id);
        }
    } else if (t == FR_DTYPE_Q4_0) {
        fr_block_q4_0 *b = dst;
        for (int64_t g = 0; g < nb; g++) {
            const float *x = src + g * FR_QK;
            float amax = 0, mx = 0;
            for (int j = 0; j < FR_QK; j++)
                if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); mx = x[j]; }
            float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            b[g].d = fr_f32_to_f16(d);
            for (int j = 0; j < FR_QK / 2; j++) {
                int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                b[g].qs[j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
    } else if (t == FR_DTYPE_Q8) {
        memset(dst, 0, fr_cpu_row_bytes(t, n));
        uint16_t *ds = dst;
        int8_t *q = (int8_t *)dst + fr_own_head_bytes(t, n);
        for (int64_t g = 0; g < nb; g++) {
            const float *x = src + g * FR_QK;
            float amax = 0;
            for (int j = 0; j < FR_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
            uint16_t d16 = fr_f32_to_f16(amax / 127.0f);
            float d = fr_f16_to_f32(d16), id = d != 0.0f ? 1.0f / d : 0.0f;
            ds[g] = d16;
            for (int j = 0; j < FR_QK; j++) {
                long v = rint_l(x[j] * id);
                q[g * FR_QK + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
        }
    } else if (t == FR_DTYPE_Q4) {
        memset(dst, 0, fr_cpu_row_bytes(t, n));
        uint16_t *ds = dst, *ms = ds + nb;
        uint8_t *qs = (uint8_t *)dst + fr_own_head_bytes(t, n);
        for (int64_t g = 0; g < nb; g++) {
            uint8_t q[FR_QK];
            quantize_q4_group(src + g * FR_QK, &ds[g], &ms[g], q);
            for (int j = 0; j < FR_QK / 2; j++)
                qs[g * 16 + j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        }
    } else {
        FR_ASSERT(!"fr_cpu_quantize_row: unsupported dtype");
    }
}

void fr_cpu_dequantize_row(fr_dtype t, const void *src, float *dst, int64_t n) {
    int64_t nb = n / FR_QK;
    switch ((int)t) {
    case FR_DTYPE_Q4_K:
    case FR_DTYPE_Q5_K:
    case FR_DTYPE_Q6_K: fr_dtype_to_f32(t, src, dst, n); return;
    case FR_DTYPE_F32: memcpy(dst, src, (size_t)n * 4); return;
    case FR_DTYPE_F16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = fr_f16_to_f32(h[i]);
        return;
    }
    case FR_DTYPE_BF16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = fr_bf16_to_f32(h[i]);
        return;
    }
    case FR_DTYPE_Q8_0: {
        const fr_block_q8_0 *b = src;
        for (int64_t g = 0; g < nb; g++) {
            float d = fr_f16_to_f32(b[g].d);
            for (int j = 0; j < FR_QK; j++) dst[g * FR_QK + j] = (float)b[g].qs[j] * d;
        }
        return;
    }
    case FR_DTYPE_Q4_0: {
        const fr_block_q4_0 *b = src;
        for (int64_t g = 0; g < nb; g++) {
            float d = fr_f16_to_f32(b[g].d);
            for (int j = 0; j < FR_QK / 2; j++) {
                dst[g * FR_QK + j] = (float)((b[g].qs[j] & 15) - 8) * d;
                dst[g * FR_QK + j + 16] = (float)((b[g].qs[j] >> 4) - 8) * d;
            }
        }
        return;
    }
    case (int)FR_DTYPE_Q8: {
        const uint16_t *ds = src;
        const int8_t *q = (const int8_t *)src + fr_own_head_bytes(t, n);
        for (int64_t g = 0; g < nb; g++) {
            float d = fr_f16_to_f32(ds[g]);
            for (int j = 0; j < FR_QK; j++) dst[g * FR_QK + j] = (float)q[g * FR_QK + j] * d;
        }
        return;
    }
    case (int)FR_DTYPE_Q4: {
        const uint16_t *ds = src, *ms = ds + nb;
        const uint8_t *qs = (const uint8_t *)src + fr_own_head_bytes(t, n);
        for (int64_t g = 0; g < nb; g++) {
            float d = fr_f16_to_f32(ds[g]), m = fr_f16_to_f32(ms[g]);
            for (int j = 0; j < FR_QK / 2; j++) {
                dst[g * FR_QK + j] = fmaf((float)(qs[g * 16 + j] & 15), d, m);
                dst[g * FR_QK + j + 16] = fmaf((float)(qs[g * 16 + j] >> 4), d, m);
            }
        }
        return;
    }
    default: FR_ASSERT(!"fr_cpu_dequantize_row: unsupported dtype");
    }
}

void fr_ref_quantize_act(const float *x, int64_t k, int8_t *q, float *d, float *s) {
    for (int64_t g = 0; g < k / FR_QK; g++) {
        const float *xg = x + g * FR_QK;
        float amax = 0;
        for (int j = 0; j < FR_QK; j++) amax = fmaxf(amax, fabsf(xg[j]));
        float dg = amax / 127.0f, id = dg != 0.0f ? 1.0f / dg : 0.0f;
        int sum = 0;
        for (int j = 0; j < FR_QK; j++) {
            long v = rint_l(xg[j] * id);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q[g * FR_QK + j] = (int8_t)v;
            sum += (int)v;
        }
        d[g] = dg;
        s[g] = dg * (float)sum;
    }
}
