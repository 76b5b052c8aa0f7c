/* whisper.c (backend/cpu) — see whisper.h. Plain loops for everything but the matrix products
 * (cblas_sgemm); activations in float, LayerNorm statistics in double. */
#include "backend/cpu/whisper.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LN_EPS 1e-5f

/* y (T, out) = x (T, in) . W^T (W: (out, in)) + b (NULL: none) */
static void linear(float *y, const float *x, const float *W, const float *b, int T, int in,
                   int out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, out, in, 1.0f, x, in, W, in, 0.0f, y,
                out);
    if (b)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < out; o++) y[(size_t)t * out + o] += b[o];
}

static void layernorm(float *y, const float *x, const float *g, const float *b, int T, int n) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n;
        float *yr = y + (size_t)t * n;
        double mean = 0, var = 0;
        for (int i = 0; i < n; i++) mean += xr[i];
        mean /= n;
        for (int i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= n;
        float inv = (float)(1.0 / sqrt(var + LN_EPS));
        for (int i = 0; i < n; i++) yr[i] = (float)(xr[i] - mean) * inv * g[i] + b[i];
    }
}

static void gelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

/* out (Tq, d) = softmax(q k^T [+ causal]) v per head; q (Tq, d) already scaled, k/v (Tk, d).
 * causal_off >= 0: query i sees keys 0..causal_off + i; < 0: all keys. scores: Tq * Tk floats. */
static void attention(float *out, const float *q, const float *k, const float *v, int Tq, int Tk,
                      int d, int n_head, int causal_off, float *scores) {
    int dh = d / n_head;
    for (int h = 0; h < n_head; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, dh, 1.0f, q + h * dh, d,
                    k + h * dh, d, 0.0f, scores, Tk);
        for (int i = 0; i < Tq; i++) {
            float *s = scores + (size_t)i * Tk;
            int last = causal_off >= 0 ? causal_off + i : Tk - 1;
            float mx = -INFINITY;
            for (int j = 0; j <= last; j++) mx = s[j] > mx ? s[j] : mx;
            double sum = 0;
            for (int j = 0; j <= last; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            float inv = (float)(1.0 / sum);
            for (int j = 0; j <= last; j++) s[j] *= inv;
            for (int j = last + 1; j < Tk; j++) s[j] = 0;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, dh, Tk, 1.0f, scores, Tk,
                    v + h * dh, d, 0.0f, out + h * dh, d);
    }
}

static void scale(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static void add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void fr_whisper_encode(const fr_whisper_model *m, const float *mel, float *out) {
    const fr_whisper_hparams *hp = &m->hp;
    int T = hp->n_audio_ctx, T2 = 2 * T, d = hp->n_audio_state, M = hp->n_mels, ff = hp->n_audio_ff;
    size_t big = (size_t)T2 * (size_t)(3 * (M > d ? M : d));
    float *col = fr_xmalloc(big * sizeof(float));
    float *y1 = fr_xmalloc((size_t)T2 * d * sizeof(float));
    /* conv1 (kernel 3, padding 1) as im2col: col[t][i*3 + k] = mel[i][t + k - 1] */
    for (int t = 0; t < T2; t++)
        for (int i = 0; i < M; i++)
            for (int k = 0; k < 3; k++) {
                int s = t + k - 1;
                col[(size_t)t * M * 3 + i * 3 + k] = s >= 0 && s < T2 ? mel[(size_t)i * T2 + s] : 0;
            }
    linear(y1, col, m->conv1_w, m->conv1_b, T2, M * 3, d);
    gelu(y1, (size_t)T2 * d);
    /* conv2 (stride 2): col[t][i*3 + k] = y1[2t + k - 1][i] */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < d; i++)
            for (int k = 0; k < 3; k++) {
                int s = 2 * t + k - 1;
                col[(size_t)t * d * 3 + i * 3 + k] = s >= 0 && s < T2 ? y1[(size_t)s * d + i] : 0;
            }
    float *x = out; /* (T, d) */
    linear(x, col, m->conv2_w, m->conv2_b, T, d * 3, d);
    gelu(x, (size_t)T * d);
    add(x, m->enc_pos, (size_t)T * d);
    free(col);
    free(y1);
    float *h = fr_xmalloc((size_t)T * d * sizeof(float));
    float *q = fr_xmalloc((size_t)T * d * sizeof(float));
    float *k = fr_xmalloc((size_t)T * d * sizeof(float));
    float *v = fr_xmalloc((size_t)T * d * sizeof(float));
    float *a = fr_xmalloc((size_t)T * d * sizeof(float));
    float *f = fr_xmalloc((size_t)T * ff * sizeof(float));
    float *scores = fr_xmalloc((size_t)T * T * sizeof(float));
    float qs = 1.0f / sqrtf((float)(d / hp->n_audio_head));
    for (int l = 0; l < hp->n_audio_layer; l++) {
        const fr_whisper_layer *L = &m->enc[l];
        layernorm(h, x, L->attn_ln_w, L->attn_ln_b, T, d);
        linear(q, h, L->attn.q_w, L->attn.q_b, T, d, d);
        scale(q, (size_t)T * d, qs);
        linear(k, h, L->attn.k_w, NULL, T, d, d);
        linear(v, h, L->attn.v_w, L->attn.v_b, T, d, d);
        attention(a, q, k, v, T, T, d, hp->n_audio_head, -1, scores);
        linear(h, a, L->attn.o_w, L->attn.o_b, T, d, d);
        add(x, h, (size_t)T * d);
        layernorm(h, x, L->mlp_ln_w, L->mlp_ln_b, T, d);
        linear(f, h, L->fc1_w, L->fc1_b, T, d, ff);
        gelu(f, (size_t)T * ff);
        linear(h, f, L->fc2_w, L->fc2_b, T, ff, d);
        add(x, h, (size_t)T * d);
    }
    layernorm(x, x, m->enc_ln_w, m->enc_ln_b, T, d);
    free(h);
    free(q);
    free(k);
    free(v);
    free(a);
    free(f);
    free(scores);
}

fr_whisper_cross *fr_whisper_cross_new(const fr_whisper_model *m, const float *enc) {
    const fr_whisper_hparams *hp = &m->hp;
    size_t per = (size_t)hp->n_audio_ctx * hp->n_text_state;
    fr_whisper_cross *c = fr_xcalloc(1, sizeof *c);
    c->k = fr_xmalloc(per * hp->n_text_layer * sizeof(float));
    c->v = fr_xmalloc(per * hp->n_text_layer * sizeof(float));
    for (int l = 0; l < hp->n_text_layer; l++) {
        const fr_whisper_layer *L = &m->dec[l];
        linear(c->k + per * l, enc, L->cross.k_w, NULL, hp->n_audio_ctx, hp->n_text_state,
               hp->n_text_state);
        linear(c->v + per * l, enc, L->cross.v_w, L->cross.v_b, hp->n_audio_ctx,
               hp->n_text_state, hp->n_text_state);
    }
    return c;
}

void fr_whisper_cross_free(fr_whisper_cross *c) {
    if (!c) return;
    free(c->k);
    free(c->v);
    free(c);
}

/* scratch layout per token: x, h, q, a (d each), f (ff); scores: cap * max(cap, n_audio_ctx) */
static size_t scratch_floats(const fr_whisper_hparams *hp) {
    size_t cap = (size_t)hp->n_text_ctx;
    size_t keys = cap > (size_t)hp->n_audio_ctx ? cap : (size_t)hp->n_audio_ctx;
    return cap * (4 * (size_t)hp->n_text_state + (size_t)hp->n_text_ff) + cap * keys;
}

fr_whisper_kv *fr_whisper_kv_new(const fr_whisper_model *m) {
    const fr_whisper_hparams *hp = &m->hp;
    size_t per = (size_t)hp->n_text_ctx * hp->n_text_state;
    fr_whisper_kv *kv = fr_xcalloc(1, sizeof *kv);
    kv->k = fr_xmalloc(per * hp->n_text_layer * sizeof(float));
    kv->v = fr_xmalloc(per * hp->n_text_layer * sizeof(float));
    kv->cap = hp->n_text_ctx;
    kv->scratch = fr_xmalloc(scratch_floats(hp) * sizeof(float));
    return kv;
}

void fr_whisper_kv_free(fr_whisper_kv *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->scratch);
    free(kv);
}

void fr_whisper_kv_copy(const fr_whisper_model *m, fr_whisper_kv *dst, const fr_whisper_kv *src) {
    const fr_whisper_hparams *hp = &m->hp;
    size_t per = (size_t)hp->n_text_ctx * hp->n_text_state;
    size_t used = (size_t)src->n * hp->n_text_state;
    for (int l = 0; l < hp->n_text_layer; l++) {
        memcpy(dst->k + per * l, src->k + per * l, used * sizeof(float));
        memcpy(dst->v + per * l, src->v + per * l, used * sizeof(float));
    }
    dst->n = src->n;
}

int fr_whisper_decode(const fr_whisper_model *m, const fr_whisper_cross *c, fr_whisper_kv *kv,
                      const int *tokens, int n, float *logits, bool all, fr_err *err) {
    const fr_whisper_hparams *hp = &m->hp;
    int d = hp->n_text_state, ff = hp->n_text_ff, p0 = kv->n;
    if (n < 1 || p0 + n > kv->cap) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: %d tokens after %d pass the %d positions",
                    n, p0, kv->cap);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: token %d out of range", tokens[i]);
            return -1;
        }
    size_t cap = (size_t)kv->cap;
    float *x = kv->scratch, *h = x + cap * d, *q = h + cap * d, *a = q + cap * d,
          *f = a + cap * d, *scores = f + cap * ff;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < d; j++)
            x[(size_t)i * d + j] = m->tok_emb[(size_t)tokens[i] * d + j] +
                                   m->dec_pos[(size_t)(p0 + i) * d + j];
    size_t per = cap * d, xper = (size_t)hp->n_audio_ctx * d;
    float qs = 1.0f / sqrtf((float)(d / hp->n_text_head));
    for (int l = 0; l < hp->n_text_layer; l++) {
        const fr_whisper_layer *L = &m->dec[l];
        float *K = kv->k + per * l, *V = kv->v + per * l;
        layernorm(h, x, L->attn_ln_w, L->attn_ln_b, n, d);
        linear(q, h, L->attn.q_w, L->attn.q_b, n, d, d);
        scale(q, (size_t)n * d, qs);
        linear(K + (size_t)p0 * d, h, L->attn.k_w, NULL, n, d, d);
        linear(V + (size_t)p0 * d, h, L->attn.v_w, L->attn.v_b, n, d, d);
        attention(a, q, K, V, n, p0 + n, d, hp->n_text_head, p0, scores);
        linear(h, a, L->attn.o_w, L->attn.o_b, n, d, d);
        add(x, h, (size_t)n * d);
        layernorm(h, x, L->cross_ln_w, L->cross_ln_b, n, d);
        linear(q, h, L->cross.q_w, L->cross.q_b, n, d, d);
        scale(q, (size_t)n * d, qs);
        attention(a, q, c->k + xper * l, c->v + xper * l, n, hp->n_audio_ctx, d, hp->n_text_head,
                  -1, scores);
        linear(h, a, L->cross.o_w, L->cross.o_b, n, d, d);
        add(x, h, (size_t)n * d);
        layernorm(h, x, L->mlp_ln_w, L->mlp_ln_b, n, d);
        linear(f, h, L->fc1_w, L->fc1_b, n, d, ff);
        gelu(f, (size_t)n * ff);
        linear(h, f, L->fc2_w, L->fc2_b, n, ff, d);
        add(x, h, (size_t)n * d);
    }
    kv->n = p0 + n;
    int first = all ? 0 : n - 1, rows = all ? n : 1;
    layernorm(h, x + (size_t)first * d, m->dec_ln_w, m->dec_ln_b, rows, d);
    linear(logits, h, m->proj, NULL, rows, d, hp->n_vocab);
    return 0;
}
