/* ref.c — reference ops: plain C, one element at a time, double accumulators. Never optimise
 * these: they define what the fast kernels (kernels.c) and any other backend must compute, and
 * tests/test_ops.c compares every fast path against them on fresh random inputs.
 */
#include "backend/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>

void fr_ref_embed(float *out, const fr_tensor *w, const int32_t *tokens, int T) {
    int64_t n = w->ne[0];
    for (int t = 0; t < T; t++)
        fr_cpu_dequantize_row(w->dtype, fr_cpu_row_ptr(w, tokens[t]), out + (size_t)t * n, n);
}

void fr_ref_rmsnorm(float *out, const float *x, const float *g, int T, int n, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n;
        float *o = out + (size_t)t * n;
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        double r = 1.0 / sqrt(ss / n + (double)eps);
        for (int i = 0; i < n; i++) o[i] = (float)((double)xr[i] * r * g[i]);
    }
}

void fr_ref_rope(float *x, int T, int n_head, int head_dim, const int32_t *pos, float theta,
                 bool interleaved, const float *freq_factors) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < n_head; h++) {
            float *v = x + ((size_t)t * n_head + h) * head_dim;
            for (int i = 0; i < half; i++) {
                double inv = pow((double)theta, -2.0 * i / head_dim);
                if (freq_factors) inv /= freq_factors[i];
                double a = (double)pos[t] * inv, c = cos(a), s = sin(a);
                int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
                double x0 = v[i0], x1 = v[i1];
                v[i0] = (float)(x0 * c - x1 * s);
                v[i1] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

void fr_ref_rope_mrope(float *x, int T, int n_head, int head_dim, const int32_t *rope_pos,
                       const int sect[3], float theta, bool interleaved,
                       const float *freq_factors) {
    int half = head_dim / 2;
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < n_head; h++) {
            float *v = x + ((size_t)t * n_head + h) * head_dim;
            for (int i = 0; i < half; i++) {
                int sec = i < sect[0] ? 0 : i < sect[0] + sect[1] ? 1 : 2;
                double inv = pow((double)theta, -2.0 * i / head_dim);
                if (freq_factors) inv /= freq_factors[i];
                double a = (double)rope_pos[(size_t)sec * T + t] * inv, c = cos(a), s = sin(a);
                int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
                double x0 = v[i0], x1 = v[i1];
                v[i0] = (float)(x0 * c - x1 * s);
                v[i1] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

void fr_ref_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
    }
}

void fr_ref_softmax(float *x, int n) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    for (int i = 0; i < n; i++) x[i] = (float)(exp((double)x[i] - mx) / sum);
}

void fr_ref_matmul(float *y, const float *x, const fr_tensor *w, int T) {
    int64_t K = w->ne[0], N = w->ne[1], nb = K / FR_QK;
    bool own = w->dtype == FR_DTYPE_Q8 || w->dtype == FR_DTYPE_Q4;
    float *row = malloc((size_t)K * sizeof(float));   /* (K) one dequantised weight row */
    int8_t *xq = malloc((size_t)K);                   /* (K) quantised activation row */
    float *xd = malloc((size_t)(nb + 1) * sizeof(float)), *xs = malloc((size_t)(nb + 1) * 4);
    FR_ASSERT(row && xq && xd && xs);
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * K;
        if (own) fr_ref_quantize_act(xt, K, xq, xd, xs);
        for (int64_t r = 0; r < N; r++) {
            const void *wr = fr_cpu_row_ptr(w, r);
            double acc = 0;
            if (w->dtype == FR_DTYPE_Q8) {
                const uint16_t *ds = wr;
                const int8_t *q = (const int8_t *)wr + fr_own_head_bytes(w->dtype, K);
                for (int64_t g = 0; g < nb; g++) {
                    int32_t isum = 0;
                    for (int j = 0; j < FR_QK; j++) isum += q[g * FR_QK + j] * xq[g * FR_QK + j];
                    acc += (double)fr_f16_to_f32(ds[g]) * xd[g] * isum;
                }
            } else if (w->dtype == FR_DTYPE_Q4) {
                const uint16_t *ds = wr, *ms = ds + nb;
                const uint8_t *qs = (const uint8_t *)wr + fr_own_head_bytes(w->dtype, K);
                for (int64_t g = 0; g < nb; g++) {
                    int32_t isum = 0;
                    for (int j = 0; j < FR_QK / 2; j++)
                        isum += (qs[g * 16 + j] & 15) * xq[g * FR_QK + j] +
                                (qs[g * 16 + j] >> 4) * xq[g * FR_QK + j + 16];
                    acc += (double)fr_f16_to_f32(ds[g]) * xd[g] * isum +
                           (double)fr_f16_to_f32(ms[g]) * xs[g];
                }
            } else {
                fr_cpu_dequantize_row(w->dtype, wr, row, K);
                for (int64_t k = 0; k < K; k++) acc += (double)row[k] * xt[k];
            }
            y[(size_t)t * N + r] = (float)acc;
        }
    }
    free(row);
    free(xq);
    free(xd);
    free(xs);
}

void fr_ref_attention(float *out, const float *q, const fr_kv_view *kv, const int *blocks,
                      int pos, int n_head, int n_head_kv, int head_dim) {
    int group = n_head / n_head_kv, n = pos + 1;
    double *p = malloc((size_t)n * sizeof(double)); /* (pos+1) scores, then probabilities */
    FR_ASSERT(p);
    double scale = 1.0 / sqrt((double)head_dim);
    for (int h = 0; h < n_head; h++) {
        int hk = h / group;
        const float *qh = q + (size_t)h * head_dim;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            const float *kj = fr_kv_at(kv->k, kv, blocks, j) + (size_t)hk * head_dim;
            double s = 0;
            for (int i = 0; i < head_dim; i++) s += (double)qh[i] * kj[i];
            p[j] = s * scale;
            mx = p[j] > mx ? p[j] : mx;
        }
        for (int j = 0; j < n; j++) {
            p[j] = exp(p[j] - mx);
            sum += p[j];
        }
        for (int i = 0; i < head_dim; i++) {
            double o = 0;
            for (int j = 0; j < n; j++)
                o += p[j] * fr_kv_at(kv->v, kv, blocks, j)[(size_t)hk * head_dim + i];
            out[(size_t)h * head_dim + i] = (float)(o / sum);
        }
    }
    free(p);
}
