/* ref.c — see ref.h. Plain C11, no CUDA. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

float ref_bf16(float x) { return fr_bf16_to_f32(fr_f32_to_bf16(x)); }
float ref_f16(float x) { return fr_f16_to_f32(fr_f32_to_f16(x)); }

void ref_rmsnorm(const float *x, const float *w, int n, int E, float eps, float *out) {
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int j = 0; j < E; j++) ss += (double)x[(size_t)i * E + j] * x[(size_t)i * E + j];
        const double inv = 1.0 / sqrt(ss / E + eps);
        for (int j = 0; j < E; j++)
            out[(size_t)i * E + j] = (float)(x[(size_t)i * E + j] * inv * w[j]);
    }
}

void ref_inv_freq(double *inv, int D, float theta, const float *ff, bool bf16_freqs) {
    for (int i = 0; i < D / 2; i++) {
        double v = pow((double)theta, -2.0 * i / D);
        if (ff) v /= ff[i];
        if (bf16_freqs) v = ref_bf16((float)v);
        inv[i] = v;
    }
}

void ref_rope(float *v, int n_head, int D, int pos, const double *inv, bool interleaved) {
    const int half = D / 2;
    for (int h = 0; h < n_head; h++) {
        float *x = v + (size_t)h * D;
        for (int i = 0; i < half; i++) {
            const double a = (double)pos * inv[i];
            const double c = cos(a), s = sin(a);
            const int i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
            const double x0 = x[i0], x1 = x[i1];
            x[i0] = (float)(x0 * c - x1 * s);
            x[i1] = (float)(x0 * s + x1 * c);
        }
    }
}

void ref_gemv(const float *W, const float *x, int M, int K, int nb, float *y) {
    for (int n = 0; n < nb; n++)
        for (int m = 0; m < M; m++) {
            double acc = 0;
            const float *w = W + (size_t)m * K, *xx = x + (size_t)n * K;
            for (int k = 0; k < K; k++) acc += (double)w[k] * xx[k];
            y[(size_t)n * M + m] = (float)acc;
        }
}

void ref_swiglu_pairs(const float *y, int nb, int M, float *act) {
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < M / 2; i++) {
            const double g = y[(size_t)n * M + 2 * i], u = y[(size_t)n * M + 2 * i + 1];
            act[(size_t)n * (M / 2) + i] = (float)(g / (1.0 + exp(-g)) * u);
        }
}

void ref_dequant(const uint8_t *q, const uint16_t *s, const uint8_t *z, int M, int K, float *W) {
    const int NG = (K + 127) / 128, Kp = NG * 128;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            const int g = k / 128;
            W[(size_t)m * K + k] = (float)((int)q[(size_t)m * Kp + k] - (int)z[(size_t)m * NG + g]) *
                                   fr_f16_to_f32(s[(size_t)m * NG + g]);
        }
}

void ref_attention(const float *q, const float *K, const float *V, int ctx, int H, int Hkv, int D,
                   float *out) {
    const int G = H / Hkv;
    double *sc = malloc((size_t)ctx * sizeof(double));
    for (int h = 0; h < H; h++) {
        const int g = h / G;
        double mx = -INFINITY;
        for (int j = 0; j < ctx; j++) {
            double d = 0;
            for (int e = 0; e < D; e++)
                d += (double)q[(size_t)h * D + e] * K[((size_t)j * Hkv + g) * D + e];
            sc[j] = d / sqrt((double)D);
            if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0;
        for (int j = 0; j < ctx; j++) {
            sc[j] = exp(sc[j] - mx);
            sum += sc[j];
        }
        for (int e = 0; e < D; e++) {
            double o = 0;
            for (int j = 0; j < ctx; j++) o += sc[j] * V[((size_t)j * Hkv + g) * D + e];
            out[(size_t)h * D + e] = (float)(o / sum);
        }
    }
    free(sc);
}

int ref_argmax(const float *l, int V) {
    int best = -1;
    for (int i = 0; i < V; i++) {
        if (l[i] != l[i]) continue;
        if (best < 0 || l[i] > l[best]) best = i;
    }
    return best < 0 ? 0 : best;
}

static int cmp_desc(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ref_sample_set(const float *l, int V, float temperature, int top_k, float top_p, float min_p,
                   unsigned char *allowed) {
    if (V <= 0) return 0;
    const int am = ref_argmax(l, V);
    memset(allowed, 0, (size_t)V);
    if (!(temperature > 0.f) || top_k == 1) {
        allowed[am] = 1;
        return 1;
    }
    double *e = malloc((size_t)V * sizeof(double)), *srt = malloc((size_t)V * sizeof(double));
    for (int i = 0; i < V; i++) {
        e[i] = l[i] != l[i] ? 0.0 : exp(((double)l[i] - l[am]) / temperature);
        srt[i] = e[i];
    }
    qsort(srt, (size_t)V, sizeof(double), cmp_desc);
    double thr = 0.0;
    int nk = V;
    if (top_k > 0 && top_k < V) {
        thr = srt[top_k - 1];
        nk = top_k;
    }
    if (top_p < 1.f) {
        double tot = 0;
        for (int i = 0; i < nk; i++) tot += srt[i];
        double acc = 0;
        for (int i = 0; i < nk; i++) {
            acc += srt[i];
            if (acc >= top_p * tot) {
                thr = srt[i] > thr ? srt[i] : thr;
                break;
            }
        }
    }
    if (min_p > 0.f && min_p > thr) thr = min_p;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (e[i] >= thr * (1 - 1e-5) && e[i] > 0) {
            allowed[i] = 1;
            n++;
        }
    free(e);
    free(srt);
    return n;
}

double ref_rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) && isfinite(b[i])) return INFINITY;
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

/* ---------------------------------------------------------------- reference decoder */
static float *tensor_copy(const fr_tensor *t) {
    const int64_t n = fr_tensor_nelem(t);
    FR_ASSERT(t->dtype == FR_DTYPE_F32);
    float *o = fr_xmalloc((size_t)n * sizeof(float));
    memcpy(o, t->data, (size_t)n * sizeof(float));
    return o;
}

/* The matrix as the GPU sees it. */
static float *mat_as_gpu(const fr_tensor *t, int wq, ref_quant_fn quant) {
    float *w = tensor_copy(t);
    const int K = (int)t->ne[0], M = (int)t->ne[1];
    if (wq == 16) {
        for (size_t i = 0; i < (size_t)M * K; i++) w[i] = ref_bf16(w[i]);
    } else if (wq == 8 || wq == 4) {
        float *o = fr_xmalloc((size_t)M * K * sizeof(float));
        quant(w, M, K, wq, o);
        free(w);
        w = o;
    }
    return w;
}

static void matvec(const float *W, int M, int K, const float *x, float *y) {
    for (int m = 0; m < M; m++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += (double)W[(size_t)m * K + k] * x[k];
        y[m] = (float)acc;
    }
}

int ref_forward(const fr_model *m, const int32_t *tokens, int n, int wq, ref_quant_fn quant,
                bool rope_freq_bf16, float *logits) {
    const fr_hparams *hp = &m->hp;
    const int E = hp->n_embd, H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim, F = hp->n_ff;
    const int V = hp->n_vocab, L = hp->n_layer, nq = H * D, nk = Hkv * D;
    const bool rnd = wq != 32; /* 32: no rounding anywhere (the CPU decoder's fp32 computation) */
#define RB(x) (rnd ? ref_bf16(x) : (x))
    double *inv = fr_xmalloc((size_t)(D / 2) * sizeof(double));
    ref_inv_freq(inv, D, hp->rope_theta, m->w.rope_freq_factors, rope_freq_bf16);
    float *emb = tensor_copy(&m->w.tok_embd);
    for (size_t i = 0; i < (size_t)V * E; i++) emb[i] = RB(emb[i]);
    const fr_tensor *ot = fr_tensor_present(&m->w.output) ? &m->w.output : &m->w.tok_embd;
    const bool tied = ot->data == m->w.tok_embd.data;
    float *wout = mat_as_gpu(ot, tied && wq == 16 ? 16 : wq, quant);
    float **wqm = fr_xcalloc((size_t)L * 7, sizeof(float *));
    for (int l = 0; l < L; l++) {
        const fr_layer *ly = &m->w.layers[l];
        const fr_tensor *ts[7] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->w_gate, &ly->w_up, &ly->w_down};
        for (int i = 0; i < 7; i++) wqm[l * 7 + i] = mat_as_gpu(ts[i], wq, quant);
    }
    float *K = fr_xmalloc((size_t)L * n * nk * sizeof(float));
    float *Vc = fr_xmalloc((size_t)L * n * nk * sizeof(float));
    float *x = fr_xmalloc((size_t)E * sizeof(float)), *xn = fr_xmalloc((size_t)FR_MAX(E, F) * sizeof(float));
    float *q = fr_xmalloc((size_t)nq * sizeof(float)), *att = fr_xmalloc((size_t)nq * sizeof(float));
    float *tmp = fr_xmalloc((size_t)FR_MAX(E, 2 * F) * sizeof(float));
    float *g = fr_xmalloc((size_t)F * sizeof(float)), *u = fr_xmalloc((size_t)F * sizeof(float));
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < E; j++) x[j] = emb[(size_t)tokens[t] * E + j];
        for (int l = 0; l < L; l++) {
            const fr_layer *ly = &m->w.layers[l];
            float **W = wqm + l * 7;
            ref_rmsnorm(x, ly->attn_norm.data, 1, E, hp->rms_eps, xn);
            for (int j = 0; j < E; j++) xn[j] = RB(xn[j]);
            float *kt = K + ((size_t)l * n + t) * nk, *vt = Vc + ((size_t)l * n + t) * nk;
            matvec(W[0], nq, E, xn, q);
            matvec(W[1], nk, E, xn, kt);
            matvec(W[2], nk, E, xn, vt);
            if (fr_tensor_present(&ly->bq)) {
                const float *bq = ly->bq.data, *bk = ly->bk.data, *bv = ly->bv.data;
                for (int j = 0; j < nq; j++) q[j] += bq[j];
                for (int j = 0; j < nk; j++) kt[j] += bk[j], vt[j] += bv[j];
            }
            ref_rope(q, H, D, t, inv, hp->rope_interleaved);
            ref_rope(kt, Hkv, D, t, inv, hp->rope_interleaved);
            for (int j = 0; j < nq; j++) q[j] = RB(q[j]);
            for (int j = 0; j < nk; j++) kt[j] = RB(kt[j]), vt[j] = RB(vt[j]);
            ref_attention(q, K + (size_t)l * n * nk, Vc + (size_t)l * n * nk, t + 1, H, Hkv, D, att);
            for (int j = 0; j < nq; j++) att[j] = RB(att[j]);
            matvec(W[3], E, nq, att, tmp);
            for (int j = 0; j < E; j++) x[j] += tmp[j];
            ref_rmsnorm(x, ly->ffn_norm.data, 1, E, hp->rms_eps, xn);
            for (int j = 0; j < E; j++) xn[j] = RB(xn[j]);
            matvec(W[4], F, E, xn, g);
            matvec(W[5], F, E, xn, u);
            for (int j = 0; j < F; j++) {
                const double gg = g[j];
                xn[j] = RB((float)(gg / (1.0 + exp(-gg)) * u[j]));
            }
            matvec(W[6], E, F, xn, tmp);
            for (int j = 0; j < E; j++) x[j] += tmp[j];
        }
        ref_rmsnorm(x, m->w.output_norm.data, 1, E, hp->rms_eps, xn);
        for (int j = 0; j < E; j++) xn[j] = RB(xn[j]);
        matvec(wout, V, E, xn, logits + (size_t)t * V);
    }
    for (int i = 0; i < L * 7; i++) free(wqm[i]);
    free(wqm), free(wout), free(emb), free(inv), free(K), free(Vc), free(x), free(xn), free(q);
    free(att), free(tmp), free(g), free(u);
#undef RB
    return 0;
}
