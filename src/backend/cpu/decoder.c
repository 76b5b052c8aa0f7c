/* decoder.c — the Qwen2/Llama forward pass over a batch of tokens from many sequences.
 *
 * One forward call, T tokens, each with its own sequence and position:
 *   x = embed(tokens), or the batch's embd rows where embd_use (T, n_embd)
 *   per layer:  xn = rmsnorm(x); q,k,v = xn Wq/Wk/Wv (+bias);
 *               rope(q, k) at pos, or M-RoPE at the batch's rope_pos (t/h/w sections);
 *               write k, v of every token into its sequence's cache blocks;
 *               att = attention of each token over positions 0..pos of its own sequence;
 *               x += att Wo;  xn = rmsnorm(x);  x += (silu(xn Wg) * xn Wu) Wd
 *   logits = rmsnorm(x[wanted]) Wout                          (n_wanted, n_vocab)
 * Every op computes each token's row with a fixed reduction order (backend/cpu/cpu.h), so a
 * token's result does not depend on what else is in the batch: a sequence decoded alone or among
 * 31 others, or prefilled in chunks or at once, gives bit-identical logits.
 *
 * All buffers are allocated in fr_decoder_new for max_tokens tokens and max_ctx positions; the
 * forward pass allocates nothing. The batch is validated completely before anything is written,
 * so a rejected batch leaves the cache and the sequences untouched.
 */
#include "backend/cpu/decoder.h"

#include "model/lora.h"

#include "backend/cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fr_decoder {
    const fr_model *m;      /* read-only weights */
    fr_hparams hp;          /* copy of m->hp */
    int max_tokens;         /* tokens per forward */
    int max_ctx;            /* positions per sequence (rope table length) */
    int q_dim, kv_dim;      /* n_head*head_dim, n_head_kv*head_dim */
    const fr_tensor *out_w; /* output projection (tok_embd when tied and absent) */
    fr_pool *pool;          /* worker threads (one per core) */
    fr_cpu_scratch *scr;    /* matmul scratch for max_tokens x max_K */
    float *x;               /* (max_tokens, n_embd) residual stream */
    float *xn;              /* (max_tokens, n_embd) normalised input of a sublayer */
    float *q;               /* (max_tokens, q_dim) queries */
    float *k, *v;           /* (max_tokens, kv_dim) new keys / values of the batch */
    float *att;             /* (max_tokens, q_dim) attention output */
    float *ffa;             /* (max_tokens, n_ff) gate, then silu(gate)*up */
    float *ffb;             /* (max_tokens, n_ff) up */
    float *proj;            /* (max_tokens, n_embd) Wo / Wd output before the residual add */
    float *rope_cos;        /* (max_ctx, head_dim/2) */
    float *rope_sin;        /* (max_ctx, head_dim/2) */
    float *scores;          /* (n_threads, max_ctx) attention scores per thread */
    const int **tok_blocks; /* (max_tokens) block table of each token's sequence */
    fr_seq **useq;          /* (max_tokens) distinct sequences of the batch */
    int *useq_next;         /* (max_tokens) next expected position of each distinct sequence */
    int *wanted;            /* (max_tokens) batch rows that return logits */
    fr_attn_probe_fn probe; /* analysis callback (decoder.h), or NULL */
    void *probe_user;       /* its argument */
};

static bool matrix_ok(const fr_tensor *t, int64_t in, int64_t out, fr_err *err, const char *what) {
    if (!fr_tensor_present(t)) {
        fr_err_set(err, "decoder: missing tensor %s", what);
        return false;
    }
    if (t->ne[0] != in || t->ne[1] != out) {
        fr_err_set(err, "decoder: tensor %s has shape (%lld, %lld), expected (%lld, %lld)", what,
                   (long long)t->ne[1], (long long)t->ne[0], (long long)out, (long long)in);
        return false;
    }
    if (!fr_cpu_dtype_supported(t->dtype)) {
        fr_err_set(err, "decoder: tensor %s has dtype %s, which the CPU backend does not compute "
                   "with", what, fr_cpu_dtype_name(t->dtype));
        return false;
    }
    if (in % (t->dtype == FR_DTYPE_F32 ? 8 : FR_QK) != 0) {
        fr_err_set(err, "decoder: tensor %s: row length %lld not a multiple of %d", what,
                   (long long)in, t->dtype == FR_DTYPE_F32 ? 8 : FR_QK);
        return false;
    }
    return true;
}

static bool vector_ok(const fr_tensor *t, int64_t n, bool required, fr_err *err, const char *what) {
    if (!fr_tensor_present(t)) {
        if (required) fr_err_set(err, "decoder: missing tensor %s", what);
        return !required;
    }
    if (t->dtype != FR_DTYPE_F32 || fr_tensor_nelem(t) != n) {
        fr_err_set(err, "decoder: tensor %s must be %lld F32 values", what, (long long)n);
        return false;
    }
    return true;
}

static bool check_model(const fr_model *m, const fr_tensor *out_w, fr_err *err) {
    const fr_hparams *hp = &m->hp;
    if (hp->n_embd < 8 || hp->n_layer < 1 || hp->n_head < 1 || hp->n_head_kv < 1 ||
        hp->n_head % hp->n_head_kv || hp->head_dim < 2 || hp->head_dim % 2 || hp->n_ff < 8 ||
        hp->n_vocab < 1) {
        fr_err_set(err, "decoder: unsupported hyperparameters");
        return false;
    }
    const int *ms = hp->mrope_section;
    if ((ms[0] || ms[1] || ms[2]) &&
        (ms[0] < 0 || ms[1] < 0 || ms[2] < 0 || ms[0] + ms[1] + ms[2] != hp->head_dim / 2)) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "decoder: mrope_section [%d, %d, %d] must add up to "
                    "head_dim/2 = %d", ms[0], ms[1], ms[2], hp->head_dim / 2);
        return false;
    }
    int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim,
            KV = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    const fr_tensor *emb = &m->w.tok_embd;
    if (!fr_tensor_present(emb) || emb->ne[0] != E || emb->ne[1] != hp->n_vocab ||
        fr_cpu_row_bytes(emb->dtype, E) == 0) {
        fr_err_set(err, "decoder: bad or missing token embedding");
        return false;
    }
    if (!matrix_ok(out_w, E, hp->n_vocab, err, "output")) return false;
    if (!vector_ok(&m->w.output_norm, E, true, err, "output_norm")) return false;
    for (int l = 0; l < hp->n_layer; l++) {
        const fr_layer *L = &m->w.layers[l];
        bool ok = vector_ok(&L->attn_norm, E, true, err, "attn_norm") &&
                  matrix_ok(&L->wq, E, Q, err, "attn_q") && matrix_ok(&L->wk, E, KV, err, "attn_k") &&
                  matrix_ok(&L->wv, E, KV, err, "attn_v") &&
                  vector_ok(&L->bq, Q, false, err, "attn_q.bias") &&
                  vector_ok(&L->bk, KV, false, err, "attn_k.bias") &&
                  vector_ok(&L->bv, KV, false, err, "attn_v.bias") &&
                  matrix_ok(&L->wo, Q, E, err, "attn_output") &&
                  vector_ok(&L->ffn_norm, E, true, err, "ffn_norm") &&
                  matrix_ok(&L->w_gate, E, F, err, "ffn_gate") &&
                  matrix_ok(&L->w_up, E, F, err, "ffn_up") &&
                  matrix_ok(&L->w_down, F, E, err, "ffn_down");
        if (!ok) {
            fr_err_prefix(err, "layer %d", l);
            return false;
        }
    }
    return true;
}

fr_decoder *fr_decoder_new(const fr_model *m, int max_tokens, int max_ctx, fr_err *err) {
    return fr_decoder_new_opts(m, max_tokens, max_ctx, NULL, err);
}

fr_decoder *fr_decoder_new_opts(const fr_model *m, int max_tokens, int max_ctx,
                                const fr_decoder_opts *o, fr_err *err) {
    fr_decoder_opts def = {0};
    if (!o) o = &def;
    if (max_tokens < 1 || max_ctx < 1) {
        fr_err_set(err, "decoder: max_tokens and max_ctx must be positive");
        return NULL;
    }
    const fr_tensor *out_w = fr_tensor_present(&m->w.output) ? &m->w.output : &m->w.tok_embd;
    if (!check_model(m, out_w, err)) return NULL;
    fr_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        fr_err_set(err, "decoder: out of memory");
        return NULL;
    }
    const fr_hparams *hp = &m->hp;
    d->m = m;
    d->hp = *hp;
    d->max_tokens = max_tokens;
    d->max_ctx = max_ctx;
    d->q_dim = hp->n_head * hp->head_dim;
    d->kv_dim = hp->n_head_kv * hp->head_dim;
    d->out_w = out_w;
    d->pool = fr_pool_new(o->n_threads);
    int nth = fr_pool_size(d->pool);
    int max_K = FR_MAX(FR_MAX(hp->n_embd, hp->n_ff), d->q_dim);
    d->scr = fr_cpu_scratch_new(max_tokens, max_K, nth);
    size_t T = (size_t)max_tokens, half = (size_t)hp->head_dim / 2;
    d->x = malloc(T * hp->n_embd * sizeof(float));
    d->xn = malloc(T * hp->n_embd * sizeof(float));
    d->q = malloc(T * d->q_dim * sizeof(float));
    d->k = malloc(T * d->kv_dim * sizeof(float));
    d->v = malloc(T * d->kv_dim * sizeof(float));
    d->att = malloc(T * d->q_dim * sizeof(float));
    d->ffa = malloc(T * hp->n_ff * sizeof(float));
    d->ffb = malloc(T * hp->n_ff * sizeof(float));
    d->proj = malloc(T * hp->n_embd * sizeof(float));
    d->rope_cos = malloc((size_t)max_ctx * half * sizeof(float));
    d->rope_sin = malloc((size_t)max_ctx * half * sizeof(float));
    d->scores = malloc((size_t)nth * max_ctx * sizeof(float));
    d->tok_blocks = malloc(T * sizeof(int *));
    d->useq = malloc(T * sizeof(fr_seq *));
    d->useq_next = malloc(T * sizeof(int));
    d->wanted = malloc(T * sizeof(int));
    if (!d->scr || !d->x || !d->xn || !d->q || !d->k || !d->v || !d->att || !d->ffa || !d->ffb ||
        !d->proj || !d->rope_cos || !d->rope_sin || !d->scores || !d->tok_blocks || !d->useq ||
        !d->useq_next || !d->wanted) {
        fr_decoder_free(d);
        fr_err_set(err, "decoder: out of memory for %d tokens x %d positions", max_tokens, max_ctx);
        return NULL;
    }
    fr_cpu_rope_table(d->rope_cos, d->rope_sin, max_ctx, hp->head_dim, hp->rope_theta,
                      m->w.rope_freq_factors, o->rope_freq_bf16);
    return d;
}

void fr_decoder_free(fr_decoder *d) {
    if (!d) return;
    fr_pool_free(d->pool);
    fr_cpu_scratch_free(d->scr);
    free(d->x);
    free(d->xn);
    free(d->q);
    free(d->k);
    free(d->v);
    free(d->att);
    free(d->ffa);
    free(d->ffb);
    free(d->proj);
    free(d->rope_cos);
    free(d->rope_sin);
    free(d->scores);
    free(d->tok_blocks);
    free(d->useq);
    free(d->useq_next);
    free(d->wanted);
    free(d);
}

/* Check the whole batch; fills useq/useq_next (distinct sequences) and tok_blocks. */
static int validate(fr_decoder *d, const fr_kv_pool *kv, const fr_batch *b, int *n_useq,
                    fr_err *err) {
    if (b->n_tokens < 1 || b->n_tokens > d->max_tokens) {
        fr_err_set(err, "batch of %d tokens (1..%d allowed)", b->n_tokens, d->max_tokens);
        return -1;
    }
    if (!kv || kv->n_layer != d->hp.n_layer || kv->n_head_kv != d->hp.n_head_kv ||
        kv->head_dim != d->hp.head_dim) {
        fr_err_set(err, "KV pool does not match the model");
        return -1;
    }
    int nu = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        int tok = b->tokens[i], pos = b->pos[i];
        fr_seq *s = b->seqs[i];
        if (tok < 0 || tok >= d->hp.n_vocab) {
            fr_err_set(err, "token %d: id %d out of range (vocabulary %d)", i, tok, d->hp.n_vocab);
            return -1;
        }
        if (!s) {
            fr_err_set(err, "token %d: no sequence", i);
            return -1;
        }
        int u = 0;
        while (u < nu && d->useq[u] != s) u++;
        if (u == nu) {
            d->useq[nu] = s;
            d->useq_next[nu++] = s->n_pos;
        }
        if (pos != d->useq_next[u]) {
            fr_err_set(err, "token %d: position %d, expected %d", i, pos, d->useq_next[u]);
            return -1;
        }
        if (pos >= d->max_ctx) {
            fr_err_set(err, "token %d: position %d beyond the context limit %d", i, pos, d->max_ctx);
            return -1;
        }
        if (pos >= s->n_blocks * kv->block_size) {
            fr_err_set(err, "token %d: position %d has no reserved cache block", i, pos);
            return -1;
        }
        for (int j = 0; j <= pos / kv->block_size; j++)
            if (s->blocks[j] < 0 || s->blocks[j] >= kv->n_blocks) {
                fr_err_set(err, "token %d: bad block id in the sequence table", i);
                return -1;
            }
        d->useq_next[u]++;
        d->tok_blocks[i] = s->blocks;
    }
    if (b->rope_pos) {
        const int *ms = d->hp.mrope_section;
        if (!ms[0] && !ms[1] && !ms[2]) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "batch has M-RoPE positions but the model has no "
                        "mrope_section");
            return -1;
        }
        for (int i = 0; i < 3 * b->n_tokens; i++)
            if (b->rope_pos[i] < 0 || b->rope_pos[i] >= d->max_ctx) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "token %d: M-RoPE position %d outside "
                            "0..%d", i % b->n_tokens, b->rope_pos[i], d->max_ctx - 1);
                return -1;
            }
    }
    *n_useq = nu;
    return 0;
}

/* x (T, n_embd): the token embeddings, or the batch's embd rows where it says so. */
static void embed(fr_decoder *d, const fr_batch *b) {
    const fr_tensor *te = &d->m->w.tok_embd;
    const int E = d->hp.n_embd;
    for (int t = 0; t < b->n_tokens; t++) {
        float *x = d->x + (size_t)t * E;
        if (b->embd && (!b->embd_use || b->embd_use[t]))
            memcpy(x, b->embd + (size_t)t * E, (size_t)E * sizeof(float));
        else
            fr_cpu_dequantize_row(te->dtype, fr_cpu_row_ptr(te, b->tokens[t]), x, E);
    }
}

static void rope(const fr_decoder *d, const fr_batch *b, float *x, int n_head) {
    const fr_hparams *hp = &d->hp;
    if (b->rope_pos)
        fr_cpu_rope_mrope(x, b->n_tokens, n_head, hp->head_dim, b->rope_pos, hp->mrope_section,
                          hp->rope_interleaved, d->rope_cos, d->rope_sin);
    else
        fr_cpu_rope(x, b->n_tokens, n_head, hp->head_dim, b->pos, hp->rope_interleaved,
                    d->rope_cos, d->rope_sin);
}

static void add_bias(float *y, const fr_tensor *b, int T, int n) {
    if (!fr_tensor_present(b)) return;
    const float *bv = b->data;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] += bv[i];
}

void fr_decoder_set_attn_probe(fr_decoder *d, fr_attn_probe_fn fn, void *user) {
    d->probe = fn;
    d->probe_user = user;
}

/* The attention probabilities of layer l for the rows that return logits, handed to d->probe
 * (analysis only; the forward's own attention is untouched). q: the batch's rotated queries. */
static void probe_layer(fr_decoder *d, const fr_batch *b, const fr_kv_view *view, int l) {
    const fr_hparams *hp = &d->hp;
    const int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const double scale = 1.0 / sqrt((double)hd);
    float *p = d->scores; /* (max_ctx): free between attention calls */
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->logits && !b->logits[t]) continue;
        int n = b->pos[t] + 1;
        for (int h = 0; h < hp->n_head; h++) {
            const float *qh = d->q + (size_t)t * d->q_dim + (size_t)h * hd;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++) {
                const float *kj = fr_kv_at(view->k, view, d->tok_blocks[t], j) +
                                  (size_t)(h / group) * hd;
                double s = 0;
                for (int i = 0; i < hd; i++) s += (double)qh[i] * kj[i];
                p[j] = (float)(s * scale);
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j < n; j++) sum += exp((double)p[j] - mx);
            for (int j = 0; j < n; j++) p[j] = (float)(exp((double)p[j] - mx) / sum);
            d->probe(d->probe_user, l, t, h, p, n);
        }
    }
}

typedef struct swiglu_ctx {
    float *a;
    const float *b;
    int T, n;
} swiglu_ctx;

static void swiglu_worker(void *arg, int ith, int nth) {
    swiglu_ctx *c = arg;
    for (int t = ith; t < c->T; t += nth)
        fr_cpu_swiglu(c->a + (size_t)t * c->n, c->a + (size_t)t * c->n, c->b + (size_t)t * c->n,
                      c->n);
}

/* LoRA: for each token with an adapter that adapts layer l's projection m, y_t += scale B (A x_t)
 * (x (T, in), y (T, out)); plain loops, the CPU reference (rank <= FR_LORA_MAX_RANK). */
static void lora_add(const fr_batch *b, int l, fr_lora_mod m, const float *x, float *y) {
    if (!b->lora) return;
    float h[FR_LORA_MAX_RANK];
    for (int t = 0; t < b->n_tokens; t++) {
        const fr_lora_mat *w = b->lora[t] ? fr_lora_get(b->lora[t], l, m) : NULL;
        if (!w) continue;
        const float *xt = x + (size_t)t * w->in;
        float *yt = y + (size_t)t * w->out;
        for (int r = 0; r < w->r; r++) {
            const float *ar = w->a + (size_t)r * w->in;
            float s = 0;
            for (int i = 0; i < w->in; i++) s += ar[i] * xt[i];
            h[r] = s * b->lora[t]->scale;
        }
        for (int o = 0; o < w->out; o++) {
            const float *br = w->b + (size_t)o * w->r;
            float s = 0;
            for (int r = 0; r < w->r; r++) s += br[r] * h[r];
            yt[o] += s;
        }
    }
}

int fr_decoder_forward(fr_decoder *d, fr_kv_pool *kv, const fr_batch *b, float *logits_out,
                       fr_err *err) {
    int n_useq = 0;
    if (validate(d, kv, b, &n_useq, err)) return -1;
    const fr_model *m = d->m;
    const fr_hparams *hp = &d->hp;
    const int T = b->n_tokens, E = hp->n_embd, F = hp->n_ff;
    fr_pool *pool = d->pool;
    fr_cpu_scratch *s = d->scr;

    embed(d, b); /* (T, n_embd) */

    for (int l = 0; l < hp->n_layer; l++) {
        const fr_layer *L = &m->w.layers[l];
        fr_cpu_rmsnorm(d->xn, d->x, L->attn_norm.data, T, E, hp->rms_eps);
        {
            float *const ys[3] = {d->q, d->k, d->v};
            const fr_tensor *const ws[3] = {&L->wq, &L->wk, &L->wv};
            fr_cpu_matmul_n(pool, s, 3, ys, d->xn, ws, T);
        }
        lora_add(b, l, FR_LORA_Q, d->xn, d->q);
        lora_add(b, l, FR_LORA_K, d->xn, d->k);
        lora_add(b, l, FR_LORA_V, d->xn, d->v);
        add_bias(d->q, &L->bq, T, d->q_dim);
        add_bias(d->k, &L->bk, T, d->kv_dim);
        add_bias(d->v, &L->bv, T, d->kv_dim);
        rope(d, b, d->q, hp->n_head);
        rope(d, b, d->k, hp->n_head_kv);
        fr_kv_view view = {kv->k, kv->v, kv->n_layer, l, kv->block_size, d->kv_dim};
        for (int t = 0; t < T; t++) {
            memcpy((float *)fr_kv_at(kv->k, &view, d->tok_blocks[t], b->pos[t]),
                   d->k + (size_t)t * d->kv_dim, (size_t)d->kv_dim * sizeof(float));
            memcpy((float *)fr_kv_at(kv->v, &view, d->tok_blocks[t], b->pos[t]),
                   d->v + (size_t)t * d->kv_dim, (size_t)d->kv_dim * sizeof(float));
        }
        fr_cpu_attention(pool, d->att, d->q, &view, d->tok_blocks, b->pos, T, hp->n_head,
                         hp->n_head_kv, hp->head_dim, d->scores, d->max_ctx);
        if (d->probe) probe_layer(d, b, &view, l);
        fr_cpu_matmul(pool, s, d->proj, d->att, &L->wo, T);
        lora_add(b, l, FR_LORA_O, d->att, d->proj);
        for (size_t i = 0; i < (size_t)T * E; i++) d->x[i] += d->proj[i];

        fr_cpu_rmsnorm(d->xn, d->x, L->ffn_norm.data, T, E, hp->rms_eps);
        {
            float *const ys[2] = {d->ffa, d->ffb};
            const fr_tensor *const ws[2] = {&L->w_gate, &L->w_up};
            fr_cpu_matmul_n(pool, s, 2, ys, d->xn, ws, T);
        }
        lora_add(b, l, FR_LORA_GATE, d->xn, d->ffa);
        lora_add(b, l, FR_LORA_UP, d->xn, d->ffb);
        swiglu_ctx sc = {d->ffa, d->ffb, T, F};
        if (T >= 4) fr_pool_run(pool, swiglu_worker, &sc);
        else swiglu_worker(&sc, 0, 1);
        fr_cpu_matmul(pool, s, d->proj, d->ffa, &L->w_down, T);
        lora_add(b, l, FR_LORA_DOWN, d->ffa, d->proj);
        for (size_t i = 0; i < (size_t)T * E; i++) d->x[i] += d->proj[i];
    }

    int nw = 0;
    for (int t = 0; t < T; t++)
        if (!b->logits || b->logits[t]) d->wanted[nw++] = t;
    if (nw > 0) {
        for (int i = 0; i < nw; i++)
            fr_cpu_rmsnorm(d->xn + (size_t)i * E, d->x + (size_t)d->wanted[i] * E,
                           m->w.output_norm.data, 1, E, hp->rms_eps);
        fr_cpu_matmul(pool, s, logits_out, d->xn, d->out_w, nw);
    }
    for (int u = 0; u < n_useq; u++) d->useq[u]->n_pos = d->useq_next[u];
    return 0;
}
