/* whisper_check.c — the CUDA Whisper (backend/cuda/cuda_whisper.h) against the CPU reference
 * (backend/cpu/whisper.h, fp32, equal to HF on the fixtures), and its benchmark.
 *
 * Models: the fixtures tests/fixtures/whisper-tiny/{hf-80, hf-128-f16, ggml-80-f32.bin} (width
 * 24, 4 heads of 6: the encoder takes the generic attention kernel k_wh_attn), and a random
 * model made here (width 128, 2 heads of 64: the encoder takes the tensor-core kernel of
 * k_vit_attn; vocabulary 1000, not a multiple of 64, so the padded logits are exercised).
 * Inputs: random log-mel windows (values in [-0.8, 1.2] with a smooth component), fixed seeds.
 *
 * Checks, per model:
 *   - encoder output (B = 1) vs CPU: rel L2 <= TOL_ENC;
 *   - batched encoder (B = 3 different windows) vs each window alone on the GPU: rel L2 <=
 *     TOL_SAME (the same roundings; only the order of fp32 sums may differ between cuBLAS
 *     kernels of other row counts), and each vs the CPU;
 *   - decoder logits per step (the prompt, then 6 greedy steps on the CPU's tokens) vs the CPU,
 *     on the GPU's own encoder output and on the CPU's encoder output (fr_cuda_whisper_cross_new,
 *     the decoder alone): rel L2 <= TOL_LOGITS each step;
 *   - greedy tokens: the GPU's argmax (on the device) equals the CPU's at every step whose CPU
 *     top-2 margin is above 4 x the step's largest logit difference (a closer call is printed
 *     as a near tie and not counted; the random model must have such steps, the fixtures' tiny
 *     logits may have none);
 *   - the prompt decoded with all = true (every row's logits; a 70-token prompt on the random
 *     model: two chunks of the 64-row step) vs the CPU;
 *   - continuous batching: three sequences of different prompt lengths on different windows
 *     stepped together with fr_cuda_whisper_step (one joining late, one leaving early) vs each
 *     run alone with fr_cuda_whisper_decode: rel L2 <= TOL_SAME per step, tokens equal;
 *   - across requests: 4 threads, each its own window and sequence, encode at once and decode
 *     greedily at once (their calls combined into shared encoder batches and steps): windows
 *     rel L2 <= TOL_SAME against the window alone, logits per step rel L2 <= TOL_SAME against
 *     the sequence alone, tokens equal; how many calls went into how many batches is printed;
 *   - graph replay vs eager launches (fr_cuda_whisper_set_graphs): rel L2 <= TOL_GRAPH;
 *   - kv_copy: a copied cache continues exactly as the original;
 *   - errors: a token out of range, a full cache, a cache given twice, a batch of 0 windows:
 *     FR_ERR_BAD_REQUEST.
 * Tolerances (bf16 weights and matrix inputs, fp32 accumulation / residual / softmax, bf16
 * caches): TOL_ENC 2e-2, TOL_LOGITS 3e-2, TOL_SAME 5e-3 (against 1 for a wrong row or head), TOL_GRAPH 1e-4
 * (the same kernels: expected bit-equal). A missing fixture is a FAIL. Without a
 * GPU it prints that and exits 0.
 *
 *   gpu-whisper [FIXTURES_DIR]   (default tests/fixtures)
 *   gpu-whisper --quick [DIR]    hf-80 and the random model only (for compute-sanitizer)
 *   gpu-whisper --bench          random whisper-large-v3-turbo and whisper-small shapes:
 *                                encoder ms per 30 s window at batch 1 and 8, decoder step ms
 *                                at batch 1 and 8, RTFx of a 30 s window with 100 tokens at
 *                                batch 1 and 8, NVML joules per audio minute (no checks)
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/whisper.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_whisper.h"
#include "base/base.h"
#include "meter/sources.h"
#include "model/whisper.h"

#define TOL_ENC 2e-2
#define TOL_LOGITS 3e-2
#define TOL_SAME 5e-3
#define TOL_GRAPH 1e-4
#define N_STEPS 6

static int n_pass, n_fail, n_tie;

static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}
static double max_abs(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN becomes the maximum */
    }
    return m;
}
static void report(const char *name, double e, double tol) {
    const bool ok = e <= tol; /* NaN fails */
    printf("%-4s %-70s %.2e  (tol %.0e)\n", ok ? "ok" : "FAIL", name, e, tol);
    fflush(stdout);
    if (ok) n_pass++; else n_fail++;
}
static void check(const char *name, bool ok, const char *detail) {
    printf("%-4s %-70s %s\n", ok ? "ok" : "FAIL", name, detail ? detail : "");
    fflush(stdout);
    if (ok) n_pass++; else n_fail++;
}
static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
static float margin(const float *x, int n) { /* top-1 minus top-2 */
    const int b = argmax(x, n);
    float s = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && x[i] > s) s = x[i];
    return x[b] - s;
}

static uint64_t rng = 0x12345678abcdefull;
static float frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.f;
}

/* A log-mel window (n_mels, 2 * n_audio_ctx) in Whisper's range. */
static float *rand_mel(const fr_whisper_hparams *hp, uint64_t seed) {
    rng = seed * 0x9e3779b97f4a7c15ull + 1;
    const int M = hp->n_mels, F = 2 * hp->n_audio_ctx;
    float *mel = malloc((size_t)M * F * sizeof(float));
    FR_ASSERT(mel);
    const float ph = 3.f * frand();
    for (int i = 0; i < M; i++)
        for (int t = 0; t < F; t++)
            mel[(size_t)i * F + t] = 0.2f + 0.5f * sinf(0.013f * t + 0.3f * i + ph) + 0.5f * frand();
    return mel;
}

/* ---------------------------------------------------------------- a random model */

typedef struct arena {
    float *p;
    size_t at, cap;
} arena;
static float *take(arena *a, size_t n, float offset, float amp) {
    FR_ASSERT(a->at + n <= a->cap);
    float *d = a->p + a->at;
    a->at += n;
    for (size_t i = 0; i < n; i++) d[i] = offset + amp * frand();
    return d;
}
static size_t model_floats(const fr_whisper_hparams *h) {
    const size_t d = (size_t)h->n_audio_state, M = (size_t)h->n_mels, T = (size_t)h->n_audio_ctx;
    const size_t ea = 4 * d * d + 3 * d, eb = 2 * d * (size_t)h->n_audio_ff + h->n_audio_ff + d;
    const size_t da = 8 * d * d + 6 * d, db = 2 * d * (size_t)h->n_text_ff + h->n_text_ff + d;
    return d * M * 3 + d + 3 * d * d + d + T * d + 2 * d +
           (size_t)h->n_audio_layer * (ea + eb + 4 * d) + (size_t)h->n_vocab * d +
           (size_t)h->n_text_ctx * d + (size_t)h->n_text_layer * (da + db + 6 * d) + 2 * d;
}
static void rand_attn(arena *a, fr_whisper_attn *t, int d) {
    const float w = sqrtf(3.f / d);
    t->q_w = take(a, (size_t)d * d, 0, w), t->q_b = take(a, d, 0, 0.1f);
    t->k_w = take(a, (size_t)d * d, 0, w);
    t->v_w = take(a, (size_t)d * d, 0, w), t->v_b = take(a, d, 0, 0.1f);
    t->o_w = take(a, (size_t)d * d, 0, w), t->o_b = take(a, d, 0, 0.1f);
}
static void rand_mlp(arena *a, fr_whisper_layer *L, int d, int ff) {
    L->mlp_ln_w = take(a, d, 1, 0.1f), L->mlp_ln_b = take(a, d, 0, 0.1f);
    L->fc1_w = take(a, (size_t)ff * d, 0, sqrtf(3.f / d)), L->fc1_b = take(a, ff, 0, 0.1f);
    L->fc2_w = take(a, (size_t)d * ff, 0, sqrtf(3.f / ff)), L->fc2_b = take(a, d, 0, 0.1f);
}
/* Random weights of shape hp (uniform, variance-preserving scales); false when out of memory. */
static bool rand_model(const fr_whisper_hparams *hp, uint64_t seed, fr_whisper_model *m) {
    memset(m, 0, sizeof *m);
    m->hp = *hp;
    arena a = {NULL, 0, model_floats(hp)};
    a.p = malloc(a.cap * sizeof(float));
    m->enc = calloc((size_t)hp->n_audio_layer, sizeof(fr_whisper_layer));
    m->dec = calloc((size_t)hp->n_text_layer, sizeof(fr_whisper_layer));
    if (!a.p || !m->enc || !m->dec) {
        free(a.p), free(m->enc), free(m->dec);
        return false;
    }
    rng = seed;
    const int d = hp->n_audio_state, M = hp->n_mels;
    m->conv1_w = take(&a, (size_t)d * M * 3, 0, sqrtf(3.f / (3 * M)));
    m->conv1_b = take(&a, d, 0, 0.1f);
    m->conv2_w = take(&a, (size_t)d * d * 3, 0, sqrtf(3.f / (3 * d)));
    m->conv2_b = take(&a, d, 0, 0.1f);
    m->enc_pos = take(&a, (size_t)hp->n_audio_ctx * d, 0, 0.5f);
    for (int l = 0; l < hp->n_audio_layer; l++) {
        fr_whisper_layer *L = &m->enc[l];
        L->attn_ln_w = take(&a, d, 1, 0.1f), L->attn_ln_b = take(&a, d, 0, 0.1f);
        rand_attn(&a, &L->attn, d);
        rand_mlp(&a, L, d, hp->n_audio_ff);
    }
    m->enc_ln_w = take(&a, d, 1, 0.1f), m->enc_ln_b = take(&a, d, 0, 0.1f);
    m->tok_emb = take(&a, (size_t)hp->n_vocab * d, 0, 0.5f);
    m->proj = m->tok_emb;
    m->dec_pos = take(&a, (size_t)hp->n_text_ctx * d, 0, 0.3f);
    for (int l = 0; l < hp->n_text_layer; l++) {
        fr_whisper_layer *L = &m->dec[l];
        L->attn_ln_w = take(&a, d, 1, 0.1f), L->attn_ln_b = take(&a, d, 0, 0.1f);
        rand_attn(&a, &L->attn, d);
        L->cross_ln_w = take(&a, d, 1, 0.1f), L->cross_ln_b = take(&a, d, 0, 0.1f);
        rand_attn(&a, &L->cross, d);
        rand_mlp(&a, L, d, hp->n_text_ff);
    }
    m->dec_ln_w = take(&a, d, 1, 0.1f), m->dec_ln_b = take(&a, d, 0, 0.1f);
    m->arena = a.p;
    m->arena_floats = a.cap;
    return true;
}
static void rand_model_free(fr_whisper_model *m) {
    free(m->arena), free(m->enc), free(m->dec);
}

static fr_whisper_hparams shape(int layers_enc, int layers_dec, int d, int heads, int mels,
                                int vocab) {
    fr_whisper_hparams h = {.n_vocab = vocab, .n_mels = mels, .n_audio_ctx = 1500,
                            .n_audio_state = d, .n_audio_head = heads, .n_audio_layer = layers_enc,
                            .n_audio_ff = 4 * d, .n_text_ctx = 448, .n_text_state = d,
                            .n_text_head = heads, .n_text_layer = layers_dec, .n_text_ff = 4 * d};
    return h;
}

/* ---------------------------------------------------------------- checks */

/* A prompt of n tokens below the vocabulary (sot-like ids near the top, then text ids). */
static void make_prompt(const fr_whisper_model *m, int n, uint64_t seed, int *out) {
    const int V = m->hp.n_vocab;
    for (int i = 0; i < n; i++)
        out[i] = (int)((seed * 2654435761u + (uint64_t)i * 40503u) % (uint64_t)(V - 1));
    out[0] = m->vocab.sot > 0 && m->vocab.sot < V ? m->vocab.sot : V - 1;
}

/* Greedy on the CPU from the prompt for N_STEPS steps (the CPU's tokens), the GPU fed the same
 * tokens; logits compared per step, tokens per step. */
static void check_decoder(const char *name, const fr_whisper_model *m, fr_cuda_whisper *cw,
                          const fr_whisper_cross *cx, const fr_cuda_whisper_cross *gx,
                          const int *prompt, int P, bool need_clear) {
    const int V = m->hp.n_vocab;
    fr_err err = {0};
    float *lc = malloc((size_t)V * 4), *lg = malloc((size_t)V * 4);
    FR_ASSERT(lc && lg);
    fr_whisper_kv *kc = fr_whisper_kv_new(m);
    fr_cuda_whisper_kv *kg = fr_cuda_whisper_kv_new(cw, &err);
    char label[200];
    if (!kg) {
        check(name, false, err.msg);
        goto out;
    }
    int tok_ok = 0, tok_n = 0;
    int next = 0;
    for (int s = 0; s <= N_STEPS; s++) {
        const int *in = s == 0 ? prompt : &next;
        const int n = s == 0 ? P : 1;
        memset(lg, 0xFF, (size_t)V * 4); /* NaN until written */
        if (fr_whisper_decode(m, cx, kc, in, n, lc, false, &err) ||
            fr_cuda_whisper_decode(cw, gx, kg, in, n, lg, false, &err)) {
            check(name, false, err.msg);
            goto out;
        }
        const double e = rel_l2(lg, lc, (size_t)V);
        snprintf(label, sizeof label, "%s: logits step %d (%s)", name, s, s ? "1 token" : "prompt");
        report(label, e, TOL_LOGITS);
        const int tc = argmax(lc, V), tg = argmax(lg, V);
        const double diff = max_abs(lg, lc, (size_t)V);
        if (tc == tg) tok_ok++, tok_n++;
        else if (margin(lc, V) > 4 * diff) tok_n++;
        else {
            n_tie++;
            printf("note %s: step %d near tie (CPU %d, GPU %d, margin %.3g, max diff %.3g)\n", name,
                   s, tc, tg, margin(lc, V), diff);
        }
        next = tc; /* both continue on the CPU's token */
    }
    snprintf(label, sizeof label, "%s: greedy tokens equal (%d steps with a clear margin)", name,
             tok_n);
    char det[64];
    snprintf(det, sizeof det, "%d of %d", tok_ok, tok_n);
    if (tok_n == 0 && !need_clear)
        printf("note %s: no step had a clear top-2 margin (tiny random logits): tokens not "
               "compared\n", name);
    else
        check(label, tok_ok == tok_n && tok_n > 0, det);
out:
    fr_whisper_kv_free(kc);
    fr_cuda_whisper_kv_free(cw, kg);
    free(lc), free(lg);
}

/* The prompt with all = true (every row's logits) vs the CPU's. */
static void check_all_rows(const char *name, const fr_whisper_model *m, fr_cuda_whisper *cw,
                           const fr_whisper_cross *cx, const fr_cuda_whisper_cross *gx, int P) {
    const int V = m->hp.n_vocab;
    fr_err err = {0};
    int *prompt = malloc((size_t)P * sizeof(int));
    float *lc = malloc((size_t)P * V * 4), *lg = malloc((size_t)P * V * 4);
    FR_ASSERT(prompt && lc && lg);
    make_prompt(m, P, 7, prompt);
    memset(lg, 0xFF, (size_t)P * V * 4);
    fr_whisper_kv *kc = fr_whisper_kv_new(m);
    fr_cuda_whisper_kv *kg = fr_cuda_whisper_kv_new(cw, &err);
    char label[200];
    snprintf(label, sizeof label, "%s: %d-token prompt, logits of every row", name, P);
    if (!kg || fr_whisper_decode(m, cx, kc, prompt, P, lc, true, &err) ||
        fr_cuda_whisper_decode(cw, gx, kg, prompt, P, lg, true, &err)) {
        check(label, false, err.msg);
    } else {
        double worst = 0;
        for (int r = 0; r < P; r++) {
            const double e = rel_l2(lg + (size_t)r * V, lc + (size_t)r * V, (size_t)V);
            if (!(e <= worst)) worst = e;
        }
        report(label, worst, TOL_LOGITS);
        snprintf(label, sizeof label, "%s: cache length after the prompt", name);
        check(label, kg->n == P && kc->n == P, NULL);
    }
    fr_whisper_kv_free(kc);
    fr_cuda_whisper_kv_free(cw, kg);
    free(prompt), free(lc), free(lg);
}

/* Three sequences of different lengths on different windows, stepped together (C joins at step
 * 2, A leaves after step 3), vs each alone with decode. */
static void check_batching(const char *name, const fr_whisper_model *m, fr_cuda_whisper *cw,
                           fr_cuda_whisper_cross *const *gx /* [3] */) {
    const int V = m->hp.n_vocab, S = 6;
    fr_err err = {0};
    const int plen[3] = {3, 5, 9};
    const int join[3] = {0, 0, 2}, leave[3] = {4, S, S}; /* active at steps join..leave-1 */
    int prompt[3][16];
    fr_cuda_whisper_kv *kb[3] = {0}, *ka[3] = {0};
    float *lb = malloc((size_t)3 * V * 4), *la = malloc((size_t)V * 4);
    FR_ASSERT(lb && la);
    int cur[3], nxt[3];
    char label[200];
    double worst = 0;
    bool tok_ok = true, ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        make_prompt(m, plen[i], 11 + (uint64_t)i, prompt[i]);
        kb[i] = fr_cuda_whisper_kv_new(cw, &err);
        ka[i] = fr_cuda_whisper_kv_new(cw, &err);
        ok = kb[i] && ka[i] &&
             fr_cuda_whisper_decode(cw, gx[i], kb[i], prompt[i], plen[i], la, false, &err) == 0 &&
             fr_cuda_whisper_decode(cw, gx[i], ka[i], prompt[i], plen[i], la, false, &err) == 0;
        cur[i] = argmax(la, V);
    }
    for (int s = 0; s < S && ok; s++) {
        fr_cuda_whisper_kv *k[3];
        const fr_cuda_whisper_cross *x[3];
        int t[3], who[3], n = 0;
        for (int i = 0; i < 3; i++)
            if (s >= join[i] && s < leave[i])
                k[n] = kb[i], x[n] = gx[i], t[n] = cur[i], who[n] = i, n++;
        memset(lb, 0xFF, (size_t)3 * V * 4);
        if (fr_cuda_whisper_step(cw, n, k, x, t, lb, nxt, &err)) {
            ok = false;
            break;
        }
        for (int j = 0; j < n; j++) {
            const int i = who[j];
            if (fr_cuda_whisper_decode(cw, gx[i], ka[i], &cur[i], 1, la, false, &err)) {
                ok = false;
                break;
            }
            const double e = rel_l2(lb + (size_t)j * V, la, (size_t)V);
            if (!(e <= worst)) worst = e;
            if (nxt[j] != argmax(lb + (size_t)j * V, V)) tok_ok = false;
            if (nxt[j] != argmax(la, V) && margin(la, V) > 4 * max_abs(lb + (size_t)j * V, la, V))
                tok_ok = false;
            cur[i] = argmax(la, V);
        }
    }
    snprintf(label, sizeof label, "%s: batched steps (3 seqs, join/leave) vs each alone", name);
    if (!ok) check(label, false, err.msg);
    else report(label, worst, TOL_SAME);
    snprintf(label, sizeof label, "%s: batched device argmax = its logits' argmax = alone's", name);
    if (ok) check(label, tok_ok, NULL);
    snprintf(label, sizeof label, "%s: cache lengths after the batched steps", name);
    if (ok) check(label, kb[0]->n == plen[0] + 4 && kb[1]->n == plen[1] + S && kb[2]->n == plen[2] + S - 2, NULL);
    for (int i = 0; i < 3; i++) fr_cuda_whisper_kv_free(cw, kb[i]), fr_cuda_whisper_kv_free(cw, ka[i]);
    free(lb), free(la);
}

/* The same decode with graphs and eagerly; a copied cache continues as its source; errors. */
static void check_graph_copy_errors(const char *name, const fr_whisper_model *m,
                                    fr_cuda_whisper *cw, const fr_cuda_whisper_cross *gx) {
    const int V = m->hp.n_vocab;
    fr_err err = {0};
    int prompt[5];
    make_prompt(m, 5, 3, prompt);
    float *l1 = malloc((size_t)V * 4), *l2 = malloc((size_t)V * 4);
    FR_ASSERT(l1 && l2);
    char label[200];
    double worst = 0;
    bool ok = true;
    fr_cuda_whisper_kv *a = fr_cuda_whisper_kv_new(cw, &err), *b = fr_cuda_whisper_kv_new(cw, &err);
    ok = a && b;
    int ta = prompt[0], tb = prompt[0];
    for (int s = 0; s < 4 && ok; s++) {
        const int n = s ? 1 : 5;
        fr_cuda_whisper_set_graphs(cw, true);
        ok = fr_cuda_whisper_decode(cw, gx, a, s ? &ta : prompt, n, l1, false, &err) == 0;
        fr_cuda_whisper_set_graphs(cw, false);
        ok = ok && fr_cuda_whisper_decode(cw, gx, b, s ? &tb : prompt, n, l2, false, &err) == 0;
        fr_cuda_whisper_set_graphs(cw, true);
        const double e = rel_l2(l1, l2, (size_t)V);
        if (!(e <= worst)) worst = e;
        ta = tb = argmax(l1, V);
    }
    snprintf(label, sizeof label, "%s: graph replay vs eager (4 steps, worst)", name);
    if (!ok) check(label, false, err.msg);
    else report(label, worst, TOL_GRAPH);
    /* kv_copy: c = copy of a, then both take the same token */
    fr_cuda_whisper_kv *c = ok ? fr_cuda_whisper_kv_new(cw, &err) : NULL;
    snprintf(label, sizeof label, "%s: a copied cache continues as its source", name);
    if (c) {
        fr_cuda_whisper_kv_copy(cw, c, a);
        ok = c->n == a->n && fr_cuda_whisper_decode(cw, gx, a, &ta, 1, l1, false, &err) == 0 &&
             fr_cuda_whisper_decode(cw, gx, c, &ta, 1, l2, false, &err) == 0;
        if (ok) report(label, max_abs(l1, l2, (size_t)V), 0);
        else check(label, false, err.msg);
    } else {
        check(label, false, err.msg);
    }
    /* errors */
    if (a) {
        fr_err e1 = {0}, e2 = {0}, e3 = {0}, e4 = {0};
        const int bad = V;
        const int r1 = fr_cuda_whisper_decode(cw, gx, a, &bad, 1, l1, false, &e1);
        fr_cuda_whisper_kv *two[2] = {a, a};
        const fr_cuda_whisper_cross *xx[2] = {gx, gx};
        const int tt[2] = {0, 0};
        const int r2 = fr_cuda_whisper_step(cw, 2, two, xx, tt, NULL, NULL, &e2);
        const int keep = a->n;
        a->n = a->cap; /* full */
        const int r3 = fr_cuda_whisper_step(cw, 1, two, xx, tt, NULL, NULL, &e3);
        a->n = keep;
        const int r4 = fr_cuda_whisper_encode(cw, NULL, 0, NULL, NULL, &e4);
        snprintf(label, sizeof label, "%s: bad token, shared cache, full cache, 0 windows refused", name);
        check(label, r1 && r2 && r3 && r4 && e1.code == FR_ERR_BAD_REQUEST &&
                         e2.code == FR_ERR_BAD_REQUEST && e3.code == FR_ERR_BAD_REQUEST &&
                         e4.code == FR_ERR_BAD_REQUEST && a->n == keep, NULL);
    }
    fr_cuda_whisper_kv_free(cw, a), fr_cuda_whisper_kv_free(cw, b), fr_cuda_whisper_kv_free(cw, c);
    free(l1), free(l2);
}

/* Across requests: N_THR threads at once, each encoding its own window and decoding 16 greedy
 * steps (1-token decode calls), against the same done by one thread alone beforehand. */
#define N_THR 4
#define THR_STEPS 16
typedef struct thr_job {
    fr_cuda_whisper *cw;
    const fr_whisper_model *m;
    const float *mel;   /* the window */
    float *enc;         /* (T, d) out */
    float *lg;          /* (THR_STEPS + 1, V) out */
    int tok[THR_STEPS + 1];
    int rc;
    fr_err err;
} thr_job;

static void *thr_run(void *arg) {
    thr_job *j = arg;
    const int V = j->m->hp.n_vocab;
    fr_cuda_whisper_cross *x = NULL;
    fr_cuda_whisper_kv *kv = NULL;
    int prompt[4];
    make_prompt(j->m, 4, 1, prompt);
    j->rc = -1;
    if (fr_cuda_whisper_encode(j->cw, j->mel, 1, j->enc, &x, &j->err) ||
        !(kv = fr_cuda_whisper_kv_new(j->cw, &j->err)) ||
        fr_cuda_whisper_decode(j->cw, x, kv, prompt, 4, j->lg, false, &j->err))
        goto out;
    j->tok[0] = argmax(j->lg, V);
    for (int s = 1; s <= THR_STEPS; s++) {
        if (fr_cuda_whisper_decode(j->cw, x, kv, &j->tok[s - 1], 1, j->lg + (size_t)s * V, false,
                                   &j->err))
            goto out;
        j->tok[s] = argmax(j->lg + (size_t)s * V, V);
    }
    j->rc = 0;
out:
    fr_cuda_whisper_kv_free(j->cw, kv);
    fr_cuda_whisper_cross_free(j->cw, x);
    return NULL;
}

static void check_threads(const char *name, const fr_whisper_model *m, fr_cuda_whisper *cw,
                          const float *mel3 /* 3 windows */) {
    const fr_whisper_hparams *hp = &m->hp;
    const size_t T = (size_t)hp->n_audio_ctx, d = (size_t)hp->n_audio_state, V = (size_t)hp->n_vocab;
    const size_t per_mel = (size_t)hp->n_mels * 2 * T;
    thr_job alone[N_THR], both[N_THR];
    char label[200];
    for (int i = 0; i < N_THR; i++) {
        thr_job *js[2] = {&alone[i], &both[i]};
        for (int k = 0; k < 2; k++) {
            memset(js[k], 0, sizeof *js[k]);
            js[k]->cw = cw, js[k]->m = m, js[k]->mel = mel3 + (size_t)(i % 3) * per_mel;
            js[k]->enc = malloc(T * d * 4);
            js[k]->lg = malloc((THR_STEPS + 1) * V * 4);
            FR_ASSERT(js[k]->enc && js[k]->lg);
        }
        thr_run(&alone[i]); /* one after the other: nothing to combine */
    }
    fr_cuda_whisper_stats s0, s1;
    fr_cuda_whisper_get_stats(cw, &s0);
    pthread_t th[N_THR];
    for (int i = 0; i < N_THR; i++) FR_ASSERT(pthread_create(&th[i], NULL, thr_run, &both[i]) == 0);
    for (int i = 0; i < N_THR; i++) pthread_join(th[i], NULL);
    fr_cuda_whisper_get_stats(cw, &s1);
    bool ok = true, tok_ok = true;
    double we = 0, wl = 0;
    for (int i = 0; i < N_THR; i++) {
        if (alone[i].rc || both[i].rc) {
            snprintf(label, sizeof label, "%s: thread %d", name, i);
            check(label, false, alone[i].rc ? alone[i].err.msg : both[i].err.msg);
            ok = false;
            continue;
        }
        const double e = rel_l2(both[i].enc, alone[i].enc, T * d);
        if (!(e <= we)) we = e;
        for (int s = 0; s <= THR_STEPS; s++) {
            const double l = rel_l2(both[i].lg + s * V, alone[i].lg + s * V, V);
            if (!(l <= wl)) wl = l;
            if (both[i].tok[s] != alone[i].tok[s]) {
                const float *la = alone[i].lg + s * V;
                if (margin(la, (int)V) > 4 * max_abs(both[i].lg + s * V, la, V)) {
                    tok_ok = false;
                } else {
                    n_tie++;
                    printf("note %s: thread %d step %d near tie\n", name, i, s);
                }
                break; /* the sequences differ from here on */
            }
        }
    }
    if (ok) {
        snprintf(label, sizeof label, "%s: %d threads at once: windows vs alone", name, N_THR);
        report(label, we, TOL_SAME);
        snprintf(label, sizeof label, "%s: %d threads at once: logits per step vs alone", name, N_THR);
        report(label, wl, TOL_SAME);
        snprintf(label, sizeof label, "%s: %d threads at once: greedy tokens vs alone", name, N_THR);
        check(label, tok_ok, NULL);
    }
    printf("note %s: %d threads: %ld encode calls in %ld batches, %ld step calls in %ld steps "
           "(%ld rows)\n", name, N_THR, s1.enc_calls - s0.enc_calls, s1.encodes - s0.encodes,
           s1.step_calls - s0.step_calls, s1.steps - s0.steps, s1.step_rows - s0.step_rows);
    for (int i = 0; i < N_THR; i++)
        free(alone[i].enc), free(alone[i].lg), free(both[i].enc), free(both[i].lg);
}

/* Every check on one model. */
static void check_model(const char *name, const fr_whisper_model *m, int long_prompt,
                        bool need_clear) {
    const fr_whisper_hparams *hp = &m->hp;
    const size_t T = (size_t)hp->n_audio_ctx, d = (size_t)hp->n_audio_state;
    const size_t per_mel = (size_t)hp->n_mels * 2 * T;
    fr_err err = {0};
    char label[200];
    fr_cuda_whisper *cw = fr_cuda_whisper_new(m, 0, &err);
    if (!cw) {
        check(name, false, err.msg);
        return;
    }
    float *mel = malloc(3 * per_mel * 4);
    float *ec = malloc(3 * T * d * 4), *eg1 = malloc(3 * T * d * 4), *egb = malloc(3 * T * d * 4);
    FR_ASSERT(mel && ec && eg1 && egb);
    for (int b = 0; b < 3; b++) {
        float *one = rand_mel(hp, 100 + (uint64_t)b);
        memcpy(mel + b * per_mel, one, per_mel * 4);
        free(one);
        fr_whisper_encode(m, mel + b * per_mel, ec + b * T * d);
    }
    fr_cuda_whisper_cross *gx[3] = {0};
    fr_cuda_whisper_cross *g1 = NULL;
    memset(eg1, 0xFF, 3 * T * d * 4);
    memset(egb, 0xFF, 3 * T * d * 4);
    bool ok = true;
    for (int b = 0; b < 3 && ok; b++)
        ok = fr_cuda_whisper_encode(cw, mel + b * per_mel, 1, eg1 + b * T * d, b ? NULL : &g1,
                                    &err) == 0;
    ok = ok && fr_cuda_whisper_encode(cw, mel, 3, egb, gx, &err) == 0;
    if (!ok) {
        check(name, false, err.msg);
        goto out;
    }
    snprintf(label, sizeof label, "%s: encoder (B=1) vs CPU", name);
    report(label, rel_l2(eg1, ec, T * d), TOL_ENC);
    {
        double wc = 0, ws = 0;
        for (int b = 0; b < 3; b++) {
            const double e1 = rel_l2(egb + b * T * d, ec + b * T * d, T * d);
            const double e2 = rel_l2(egb + b * T * d, eg1 + b * T * d, T * d);
            if (!(e1 <= wc)) wc = e1;
            if (!(e2 <= ws)) ws = e2;
        }
        snprintf(label, sizeof label, "%s: batched encoder (B=3) vs CPU, worst window", name);
        report(label, wc, TOL_ENC);
        snprintf(label, sizeof label, "%s: batched encoder (B=3) vs each window alone", name);
        report(label, ws, TOL_SAME);
    }
    {
        fr_whisper_cross *cx = fr_whisper_cross_new(m, ec);
        fr_cuda_whisper_cross *gxc = fr_cuda_whisper_cross_new(cw, ec, &err);
        int prompt[4];
        make_prompt(m, 4, 1, prompt);
        snprintf(label, sizeof label, "%s dec(GPU enc)", name);
        check_decoder(label, m, cw, cx, g1, prompt, 4, need_clear);
        snprintf(label, sizeof label, "%s dec(CPU enc)", name);
        if (gxc) check_decoder(label, m, cw, cx, gxc, prompt, 4, need_clear);
        else check(label, false, err.msg);
        check_all_rows(name, m, cw, cx, g1, long_prompt);
        fr_cuda_whisper_cross_free(cw, gxc);
        fr_whisper_cross_free(cx);
    }
    check_batching(name, m, cw, gx);
    check_threads(name, m, cw, mel);
    check_graph_copy_errors(name, m, cw, g1);
out:
    for (int b = 0; b < 3; b++) fr_cuda_whisper_cross_free(cw, gx[b]);
    fr_cuda_whisper_cross_free(cw, g1);
    fr_cuda_whisper_free(cw);
    free(mel), free(ec), free(eg1), free(egb);
}

static void check_fixture(const char *dir, const char *sub) {
    char path[1024], name[160];
    snprintf(path, sizeof path, "%s/whisper-tiny/%s", dir, sub);
    snprintf(name, sizeof name, "whisper-tiny/%s", sub);
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load(path, &err);
    if (!m) {
        check(name, false, err.msg);
        return;
    }
    check_model(name, m, 12, false);
    fr_whisper_free(m);
}

static void check_random(void) {
    fr_whisper_hparams hp = shape(2, 2, 128, 2, 80, 1000);
    fr_whisper_model m;
    if (!rand_model(&hp, 42, &m)) {
        check("random d128", false, "out of host memory");
        return;
    }
    check_model("random d128 h64", &m, 70, true);
    rand_model_free(&m);
}

/* ---------------------------------------------------------------- benchmark */

static fr_nvml *nvml;
static double joules(void) {
    fr_nvml_reading r;
    if (!nvml) return NAN;
    fr_nvml_read(nvml, 0, &r);
    return r.energy_rc == FR_NVML_SUCCESS ? (double)r.energy_mj / 1000.0 : NAN;
}

/* One window's transcription of 100 tokens for B windows at once: encode, a 4-token prompt
 * per sequence, then 100 batched steps on the device's argmax. Returns seconds. */
static double run_windows(fr_cuda_whisper *cw, const fr_whisper_model *m, const float *mel, int B,
                          int n_tok, fr_err *err) {
    const double t0 = fr_time_s();
    fr_cuda_whisper_cross *x[8] = {0};
    fr_cuda_whisper_kv *kv[8] = {0};
    int tok[8], prompt[4];
    make_prompt(m, 4, 1, prompt);
    double t = -1;
    if (fr_cuda_whisper_encode(cw, mel, B, NULL, x, err)) return -1;
    for (int b = 0; b < B; b++) {
        if (!(kv[b] = fr_cuda_whisper_kv_new(cw, err))) goto out;
        float *lg = malloc((size_t)m->hp.n_vocab * 4);
        FR_ASSERT(lg);
        const int rc = fr_cuda_whisper_decode(cw, x[b], kv[b], prompt, 4, lg, false, err);
        tok[b] = argmax(lg, m->hp.n_vocab);
        free(lg);
        if (rc) goto out;
    }
    for (int s = 0; s < n_tok; s++)
        if (fr_cuda_whisper_step(cw, B, kv, (const fr_cuda_whisper_cross *const *)x, tok, NULL, tok,
                                 err))
            goto out;
    t = fr_time_s() - t0;
out:
    for (int b = 0; b < B; b++) fr_cuda_whisper_kv_free(cw, kv[b]), fr_cuda_whisper_cross_free(cw, x[b]);
    return t;
}

static int bench_shape(const char *name, const fr_whisper_hparams *hp) {
    fr_whisper_model m;
    const double tb = fr_time_s();
    if (!rand_model(hp, 7, &m)) {
        printf("whisper-bench %s: out of host memory\n", name);
        return 1;
    }
    fr_err err = {0};
    fr_cuda_whisper *cw = fr_cuda_whisper_new(&m, 0, &err);
    if (!cw) {
        printf("whisper-bench %s: %s\n", name, err.msg);
        rand_model_free(&m);
        return 1;
    }
    printf("note %s: random weights made and uploaded in %.1f s\n", name, fr_time_s() - tb);
    const size_t per = (size_t)hp->n_mels * 2 * hp->n_audio_ctx;
    float *mel = malloc(8 * per * 4);
    FR_ASSERT(mel);
    for (int b = 0; b < 8; b++) {
        float *one = rand_mel(hp, 200 + (uint64_t)b);
        memcpy(mel + b * per, one, per * 4);
        free(one);
    }
    int rc = 0;
    const int Bs[2] = {1, 8};
    for (int i = 0; i < 2 && !rc; i++) { /* encoder */
        const int B = Bs[i];
        double t = 0;
        for (int it = 0; it < 6 && !rc; it++) {
            fr_cuda_whisper_cross *x[8] = {0};
            const double t0 = fr_time_s();
            if (fr_cuda_whisper_encode(cw, mel, B, NULL, x, &err)) rc = 1;
            if (it) t += fr_time_s() - t0;
            for (int b = 0; b < B; b++) fr_cuda_whisper_cross_free(cw, x[b]);
        }
        if (!rc)
            printf("whisper-bench %s encoder batch %d: %.2f ms per batch, %.2f ms per 30 s window "
                   "(with cross K/V; mean of 5)\n", name, B, t / 5 * 1e3, t / 5 * 1e3 / B);
    }
    for (int i = 0; i < 2 && !rc; i++) { /* decoder step at positions 4..103 */
        const int B = Bs[i];
        fr_cuda_whisper_cross *x[8] = {0};
        fr_cuda_whisper_kv *kv[8] = {0};
        int tok[8];
        if (fr_cuda_whisper_encode(cw, mel, B, NULL, x, &err)) rc = 1;
        for (int b = 0; b < B && !rc; b++) {
            int prompt[4];
            make_prompt(&m, 4, 1, prompt);
            float *lg = malloc((size_t)hp->n_vocab * 4);
            FR_ASSERT(lg);
            if (!(kv[b] = fr_cuda_whisper_kv_new(cw, &err)) ||
                fr_cuda_whisper_decode(cw, x[b], kv[b], prompt, 4, lg, false, &err))
                rc = 1;
            tok[b] = rc ? 0 : argmax(lg, hp->n_vocab);
            free(lg);
        }
        double t = 0;
        for (int s = 0; s < 101 && !rc; s++) {
            const double t0 = fr_time_s();
            if (fr_cuda_whisper_step(cw, B, kv, (const fr_cuda_whisper_cross *const *)x, tok, NULL,
                                     tok, &err))
                rc = 1;
            if (s) t += fr_time_s() - t0; /* the first step captures the graph */
        }
        if (!rc)
            printf("whisper-bench %s decoder step batch %d: %.3f ms (graph, argmax on the device; "
                   "mean of 100 at positions 5..104)\n", name, B, t / 100 * 1e3);
        for (int b = 0; b < B; b++) fr_cuda_whisper_kv_free(cw, kv[b]), fr_cuda_whisper_cross_free(cw, x[b]);
    }
    for (int i = 0; i < 2 && !rc; i++) { /* RTFx */
        const int B = Bs[i];
        if (run_windows(cw, &m, mel, B, 100, &err) < 0) { /* warm: graphs, pool */
            rc = 1;
            break;
        }
        const double j0 = joules();
        double t = 0;
        for (int it = 0; it < 3 && !rc; it++) {
            const double ti = run_windows(cw, &m, mel, B, 100, &err);
            if (ti < 0) rc = 1;
            t += ti;
        }
        const double J = joules() - j0;
        if (!rc) {
            const double audio = 3.0 * 30.0 * B;
            printf("whisper-bench %s RTFx batch %d: %.1f (30 s window + 100 tokens: %.1f ms per "
                   "batch of %d)", name, B, audio / t, t / 3 * 1e3, B);
            if (isfinite(J)) printf(", %.2f J per audio minute", J / (audio / 60.0));
            printf("\n");
        }
    }
    if (rc) printf("whisper-bench %s: %s\n", name, err.msg);
    fflush(stdout);
    free(mel);
    fr_cuda_whisper_free(cw);
    rand_model_free(&m);
    return rc;
}

static int bench(void) {
    char why[256];
    nvml = fr_nvml_open("libnvidia-ml.so.1", why, sizeof why);
    if (!nvml) printf("note NVML: %s (no energy figures)\n", why);
    const fr_whisper_hparams turbo = shape(32, 4, 1280, 20, 128, 51866);
    const fr_whisper_hparams small = shape(12, 12, 768, 12, 80, 51865);
    int rc = bench_shape("large-v3-turbo-shape", &turbo);
    rc |= bench_shape("small-shape", &small);
    if (nvml) fr_nvml_close(nvml);
    return rc;
}

int main(int argc, char **argv) {
    const bool do_bench = argc > 1 && !strcmp(argv[1], "--bench");
    const bool quick = argc > 1 && !strcmp(argv[1], "--quick"); /* under compute-sanitizer */
    const char *dir = argc > 2 && quick ? argv[2] : argc > 1 && !do_bench && !quick ? argv[1]
                                                                                  : "tests/fixtures";
    if (fr_cuda_device_count() <= 0) {
        printf("gpu-whisper: no CUDA device: skipped (the program builds and links)\n");
        printf("0 passed, 0 failed\n");
        return 0;
    }
    if (do_bench) return bench();
    check_fixture(dir, "hf-80");
    if (!quick) {
        check_fixture(dir, "hf-128-f16");
        check_fixture(dir, "ggml-80-f32.bin");
    }
    check_random();
    printf("%d passed, %d failed (%d near ties not counted)\n", n_pass, n_fail, n_tie);
    return n_fail ? 1 : 0;
}
