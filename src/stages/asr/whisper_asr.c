/* whisper_asr.c — see whisper_asr.h. One window is: features -> encoder -> cross-attention cache
 * -> prompt -> greedy or beam decoding with the logits processors -> segments. */
#include "stages/asr/whisper_asr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_whisper.h"
#include "stages/audio/mel.h"
#include "stages/audio/vad.h"

#define NEG_BIG (-1.0e9f) /* HF's "very large negative" beam score */

/* The CUDA Whisper is linked only into binaries built with the CUDA backend (make cuda); it is
 * referenced weakly, as ppocr_run.c references the CUDA ONNX executor. Only
 * fr_whisper_cuda_open checks that it is there: a handle exists only when it is. */
#pragma weak fr_cuda_whisper_new
#pragma weak fr_cuda_whisper_free
#pragma weak fr_cuda_whisper_encode
#pragma weak fr_cuda_whisper_cross_free
#pragma weak fr_cuda_whisper_kv_new
#pragma weak fr_cuda_whisper_kv_free
#pragma weak fr_cuda_whisper_kv_copy
#pragma weak fr_cuda_whisper_decode
#pragma weak fr_cuda_whisper_step
#pragma weak fr_cuda_whisper_device

/* Where a transcription computes: the CPU reference (cw NULL) or the CUDA model. */
typedef struct weng {
    const fr_whisper_model *m;
    fr_cuda_whisper *cw;
} weng;
/* A window's cross-attention cache on one or the other. */
typedef struct wcross {
    const fr_whisper_cross *c;
    const fr_cuda_whisper_cross *g;
} wcross;
/* A sequence's self-attention cache on one or the other. */
typedef struct wkv {
    fr_whisper_kv *c;
    fr_cuda_whisper_kv *g;
} wkv;

static int kv_new(const weng *e, wkv *k, fr_err *err) {
    k->c = NULL, k->g = NULL;
    if (!e->cw) {
        k->c = fr_whisper_kv_new(e->m);
        return 0;
    }
    return (k->g = fr_cuda_whisper_kv_new(e->cw, err)) ? 0 : -1;
}
static void kv_free(const weng *e, wkv *k) {
    if (k->c) fr_whisper_kv_free(k->c);
    if (k->g) fr_cuda_whisper_kv_free(e->cw, k->g);
    k->c = NULL, k->g = NULL;
}
static void kv_copy(const weng *e, wkv *dst, const wkv *src) {
    if (e->cw) fr_cuda_whisper_kv_copy(e->cw, dst->g, src->g);
    else fr_whisper_kv_copy(e->m, dst->c, src->c);
}
static int dec(const weng *e, const wcross *x, wkv *k, const int *t, int n, float *logits,
               fr_err *err) {
    if (e->cw) return fr_cuda_whisper_decode(e->cw, x->g, k->g, t, n, logits, false, err);
    return fr_whisper_decode(e->m, x->c, k->c, t, n, logits, false, err);
}
/* One token for each of n sequences (the beams): on CUDA one batched step. */
static int dec_many(const weng *e, const wcross *x, wkv *k, const int *const *t, int n,
                    float *logits, fr_err *err) {
    const int V = e->m->hp.n_vocab;
    if (e->cw && n <= FR_CUDA_WHISPER_MAX_ROWS) {
        fr_cuda_whisper_kv *kv[FR_CUDA_WHISPER_MAX_ROWS];
        const fr_cuda_whisper_cross *xs[FR_CUDA_WHISPER_MAX_ROWS];
        int tok[FR_CUDA_WHISPER_MAX_ROWS];
        for (int i = 0; i < n; i++) kv[i] = k[i].g, xs[i] = x->g, tok[i] = *t[i];
        return fr_cuda_whisper_step(e->cw, n, kv, xs, tok, logits, NULL, err);
    }
    for (int i = 0; i < n; i++)
        if (dec(e, x, &k[i], t[i], 1, logits + (size_t)i * V, err)) return -1;
    return 0;
}

int fr_whisper_cuda_open(const fr_whisper_model *m, const char *device, fr_cuda_whisper **out,
                         fr_err *err) {
    *out = NULL;
    if (!device || !device[0]) return 0;
    fr_backend_kind kind;
    int idx = 0;
    if (fr_backend_parse_device(device, &kind, &idx, err)) return -1;
    if (kind == FR_BACKEND_CPU) return 0;
    if (!fr_cuda_whisper_new) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "whisper: device %s: this binary has no CUDA "
                    "backend (frugal-cuda has it)", device);
        return -1;
    }
    *out = fr_cuda_whisper_new(m, idx, err);
    return *out ? 0 : -1;
}

void fr_whisper_cuda_free(fr_cuda_whisper *cw) {
    if (cw) fr_cuda_whisper_free(cw);
}

int fr_whisper_cuda_device(const fr_cuda_whisper *cw) {
    return cw ? fr_cuda_whisper_device(cw) : -1;
}

fr_whisper_params fr_whisper_default_params(void) {
    fr_whisper_params p;
    memset(&p, 0, sizeof p);
    p.language = -1;
    p.task = FR_WHISPER_TASK_TRANSCRIBE;
    p.num_beams = 1;
    p.length_penalty = 1.0f;
    return p;
}

void fr_whisper_result_free(fr_whisper_result *r) {
    if (!r) return;
    free(r->prompt);
    free(r->tokens);
    for (int i = 0; i < r->n_segments; i++) {
        free(r->segments[i].tokens);
        free(r->segments[i].text);
    }
    free(r->segments);
    free(r->text);
    memset(r, 0, sizeof *r);
}

static int stopped(const fr_whisper_params *p, fr_err *err) {
    fr_cancel_reason why = fr_cancel_check(p->cancel);
    if (why == FR_CANCEL_NONE) return 0;
    fr_err_setc(err, fr_cancel_reason_code(why), "whisper: stopped (%s)",
                fr_cancel_reason_name(why));
    return -1;
}

/* ---------------------------------------------------------------- features, language, prompt */

int fr_whisper_features(const fr_whisper_model *m, const float *pcm, size_t n, bool pad30,
                        float **feat, int *n_frames, fr_err *err) {
    fr_mel *mel = fr_mel_new(m->hp.n_mels, m->mel_filters, err);
    if (!mel) return -1;
    size_t target = pad30 || n <= FR_WHISPER_N_SAMPLES ? (size_t)FR_WHISPER_N_SAMPLES : n;
    int rc = fr_mel_compute(mel, pcm, n, target, feat, n_frames, err);
    fr_mel_free(mel);
    return rc;
}

static int detect_language(const weng *e, const wcross *x, fr_err *err) {
    const fr_whisper_vocab *v = &e->m->vocab;
    wkv kv;
    if (kv_new(e, &kv, err)) return -1;
    float *logits = fr_xmalloc((size_t)e->m->hp.n_vocab * sizeof(float));
    int best = -1;
    if (dec(e, x, &kv, &v->sot, 1, logits, err) == 0) {
        best = 0;
        for (int i = 1; i < v->n_lang; i++)
            if (logits[v->lang_begin + i] > logits[v->lang_begin + best]) best = i;
    }
    free(logits);
    kv_free(e, &kv);
    return best;
}

int fr_whisper_detect_language(const fr_whisper_model *m, const fr_whisper_cross *c, fr_err *err) {
    const weng e = {m, NULL};
    const wcross x = {c, NULL};
    return detect_language(&e, &x, err);
}

int fr_whisper_prompt(const fr_whisper_model *m, int language, fr_whisper_task task,
                      bool timestamps, int *out) {
    const fr_whisper_vocab *v = &m->vocab;
    int n = 0;
    out[n++] = v->sot;
    if (v->multilingual) {
        if (language >= 0) out[n++] = v->lang_begin + language;
        out[n++] = task == FR_WHISPER_TASK_TRANSLATE ? v->translate : v->transcribe;
    }
    if (!timestamps) out[n++] = v->no_timestamps;
    return n;
}

/* ---------------------------------------------------------------- logits processors */

static void mask(float *s, int from, int to) {
    for (int i = from; i < to; i++) s[i] = -INFINITY;
}

/* HF's processors for the next token after seq[0..len) (the prompt is seq[0..begin)); scores are
 * logits (greedy) or log-probabilities (beam search), changed in place. */
static void process(const fr_whisper_model *m, bool timestamps, int begin, const int *seq,
                    int len, float *s) {
    const fr_whisper_vocab *v = &m->vocab;
    int V = m->hp.n_vocab, tb = v->ts_begin;
    if (len == begin)
        for (int i = 0; i < v->n_begin_suppress; i++) s[v->begin_suppress[i]] = -INFINITY;
    for (int i = 0; i < v->n_suppress; i++) s[v->suppress[i]] = -INFINITY;
    if (!timestamps) return;
    s[v->no_timestamps] = -INFINITY;
    const int *gen = seq + begin;
    int ng = len - begin;
    bool last_ts = ng >= 1 && gen[ng - 1] >= tb;
    bool pen_ts = ng < 2 || gen[ng - 2] >= tb;
    if (last_ts) {
        if (pen_ts) mask(s, tb, V);
        else mask(s, 0, v->eot);
    }
    int last = -1;
    for (int i = 0; i < ng; i++)
        if (gen[i] >= tb) last = gen[i];
    if (last >= 0) mask(s, tb, last_ts && !pen_ts ? last : last + 1);
    if (len == begin) {
        mask(s, 0, tb);
        if (v->max_initial_ts >= 0) mask(s, tb + v->max_initial_ts + 1, V);
    }
    /* a timestamp when their total probability beats every text token */
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) mx = s[i] > mx ? s[i] : mx;
    if (mx == -INFINITY) return;
    double z = 0;
    for (int i = 0; i < V; i++) z += s[i] == -INFINITY ? 0.0 : exp((double)s[i] - mx);
    double lz = mx + log(z);
    double ts_sum = 0, ts_max = -INFINITY;
    for (int i = tb; i < V; i++)
        if (s[i] > ts_max) ts_max = s[i];
    if (ts_max == -INFINITY) return;
    for (int i = tb; i < V; i++) ts_sum += s[i] == -INFINITY ? 0.0 : exp(s[i] - ts_max);
    double ts_lp = ts_max + log(ts_sum) - lz;
    double text_max = -INFINITY;
    for (int i = 0; i < tb; i++) text_max = s[i] > text_max ? s[i] : text_max;
    if (ts_lp > text_max - lz) mask(s, 0, tb);
}

static void log_softmax(float *s, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = s[i] > mx ? s[i] : mx;
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((double)s[i] - mx);
    float lz = (float)(mx + log(z));
    for (int i = 0; i < n; i++) s[i] -= lz;
}

static int argmax(const float *s, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (s[i] > s[b]) b = i;
    return b;
}

/* ---------------------------------------------------------------- greedy and beam search */

static int max_new(const fr_whisper_model *m, const fr_whisper_params *p, int n_prompt) {
    int room = m->hp.n_text_ctx - n_prompt;
    return p->max_new_tokens > 0 && p->max_new_tokens < room ? p->max_new_tokens : room;
}

static int greedy(const weng *e, const wcross *c, const int *prompt, int P,
                  const fr_whisper_params *p, int **out, int *n_out, fr_err *err) {
    const fr_whisper_model *m = e->m;
    int V = m->hp.n_vocab, N = max_new(m, p, P);
    wkv kv;
    if (kv_new(e, &kv, err)) return -1;
    int *seq = fr_xmalloc((size_t)(P + N + 1) * sizeof(int));
    memcpy(seq, prompt, (size_t)P * sizeof(int));
    float *logits = fr_xmalloc((size_t)V * sizeof(float));
    int len = P, rc = -1;
    if (dec(e, c, &kv, prompt, P, logits, err)) goto out;
    while (len - P < N) {
        process(m, p->timestamps, P, seq, len, logits);
        int t = argmax(logits, V);
        seq[len++] = t;
        if (t == m->vocab.eot || len - P == N) break;
        if (stopped(p, err) || dec(e, c, &kv, &t, 1, logits, err)) goto out;
    }
    *n_out = len - P;
    *out = fr_xmalloc((size_t)(*n_out + 1) * sizeof(int));
    memcpy(*out, seq + P, (size_t)*n_out * sizeof(int));
    rc = 0;
out:
    kv_free(e, &kv);
    free(logits);
    free(seq);
    return rc;
}

typedef struct hyp {
    int *seq;      /* prompt + generated (cap ids) */
    int len;
    float score;
    bool finished; /* a real finished hypothesis (HF's is_sent_finished) */
} hyp;

typedef struct cand {
    int parent, tok;
    float score;
    bool hits; /* ends in <|endoftext|> or reaches max_length */
} cand;

/* the k best of n scores (descending; ties keep the lower index first, as torch.topk on CPU) */
static void top_k(const float *s, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) idx[j] = -1;
    for (int i = 0; i < n; i++) {
        int j = k;
        while (j > 0 && (idx[j - 1] < 0 || s[i] > s[idx[j - 1]])) j--;
        if (j >= k) continue;
        for (int q = k - 1; q > j; q--) idx[q] = idx[q - 1];
        idx[j] = i;
    }
}

static int beam(const weng *e, const wcross *c, const int *prompt, int P,
                const fr_whisper_params *p, int **out, int *n_out, fr_err *err) {
    const fr_whisper_model *m = e->m;
    int V = m->hp.n_vocab, NB = p->num_beams, K = 2 * NB, N = max_new(m, p, P);
    int max_len = P + N, cap = max_len + 1, rc = -1;
    hyp *run = fr_xcalloc((size_t)NB, sizeof *run), *nrun = fr_xcalloc((size_t)NB, sizeof *nrun);
    hyp *fin = fr_xcalloc((size_t)NB, sizeof *fin), *nfin = fr_xcalloc((size_t)NB, sizeof *nfin);
    wkv *kv = fr_xcalloc((size_t)NB, sizeof *kv), *nkv = fr_xcalloc((size_t)NB, sizeof *nkv);
    const int **toks = fr_xcalloc((size_t)NB, sizeof *toks);
    float *lp = fr_xmalloc((size_t)NB * V * sizeof(float));
    float *acc = fr_xmalloc((size_t)NB * V * sizeof(float));
    cand *cd = fr_xmalloc((size_t)K * sizeof *cd);
    int *idx = fr_xmalloc((size_t)(K + NB) * sizeof(int));
    float *tmp = fr_xmalloc((size_t)(K + NB) * sizeof(float));
    for (int b = 0; b < NB; b++) {
        hyp *hs[4] = {&run[b], &nrun[b], &fin[b], &nfin[b]};
        for (int q = 0; q < 4; q++) {
            hs[q]->seq = fr_xmalloc((size_t)cap * sizeof(int));
            memcpy(hs[q]->seq, prompt, (size_t)P * sizeof(int));
            hs[q]->len = P;
            hs[q]->score = NEG_BIG;
        }
        run[b].score = b == 0 ? 0.0f : NEG_BIG;
    }
    for (int b = 0; b < NB; b++)
        if (kv_new(e, &kv[b], err) || kv_new(e, &nkv[b], err)) goto out;
    if (dec(e, c, &kv[0], prompt, P, lp, err)) goto out;
    for (int b = 1; b < NB; b++) {
        kv_copy(e, &kv[b], &kv[0]);
        memcpy(lp + (size_t)b * V, lp, (size_t)V * sizeof(float));
    }
    bool unsat = true;
    for (int cur = P;; cur++) {
        /* 1. log-probabilities, processed, plus each beam's score */
        for (int b = 0; b < NB; b++) {
            float *l = lp + (size_t)b * V;
            log_softmax(l, V);
            process(m, p->timestamps, P, run[b].seq, cur, l);
            for (int i = 0; i < V; i++) acc[(size_t)b * V + i] = l[i] + run[b].score;
        }
        /* 2. the 2 x beams best continuations */
        top_k(acc, NB * V, K, idx);
        bool all_hit = true;
        for (int j = 0; j < K; j++) {
            cd[j].parent = idx[j] / V;
            cd[j].tok = idx[j] % V;
            cd[j].score = acc[idx[j]];
            cd[j].hits = cd[j].tok == m->vocab.eot || cur + 1 >= max_len;
            all_hit = all_hit && cd[j].hits;
        }
        /* 3. the running beams of the next step: the best that did not stop */
        for (int j = 0; j < K; j++) tmp[j] = cd[j].score + (cd[j].hits ? NEG_BIG : 0.0f);
        top_k(tmp, K, NB, idx);
        for (int b = 0; b < NB; b++) {
            const cand *x = &cd[idx[b]];
            memcpy(nrun[b].seq, run[x->parent].seq, (size_t)cur * sizeof(int));
            nrun[b].seq[cur] = x->tok;
            nrun[b].len = cur + 1;
            nrun[b].score = tmp[idx[b]];
            kv_copy(e, &nkv[b], &kv[x->parent]);
        }
        /* 4. finished hypotheses: the best of the old ones and those that just stopped among the
         *    top beams, scored with the length penalty */
        float lpen = powf((float)(cur + 1 - P), p->length_penalty);
        for (int b = 0; b < NB; b++) tmp[b] = fin[b].score;
        for (int j = 0; j < K; j++) {
            float s = cd[j].score / lpen;
            if (!unsat) s += NEG_BIG;
            if (!(cd[j].hits && j < NB)) s += NEG_BIG;
            tmp[NB + j] = s;
        }
        top_k(tmp, NB + K, NB, idx);
        for (int b = 0; b < NB; b++) {
            int q = idx[b];
            if (q < NB) {
                memcpy(nfin[b].seq, fin[q].seq, (size_t)fin[q].len * sizeof(int));
                nfin[b].len = fin[q].len;
                nfin[b].finished = fin[q].finished;
            } else {
                const cand *x = &cd[q - NB];
                memcpy(nfin[b].seq, run[x->parent].seq, (size_t)cur * sizeof(int));
                nfin[b].seq[cur] = x->tok;
                nfin[b].len = cur + 1;
                nfin[b].finished = x->hits && q - NB < NB;
            }
            nfin[b].score = tmp[q];
        }
        hyp *t1 = run; run = nrun; nrun = t1;
        hyp *t2 = fin; fin = nfin; nfin = t2;
        wkv *t3 = kv; kv = nkv; nkv = t3;
        /* 5. can the running beams still beat the worst finished one? */
        float best = run[0].score / powf((float)(cur + 1 - P), p->length_penalty);
        float minf = fin[0].score;
        for (int b = 1; b < NB; b++) minf = fin[b].score < minf ? fin[b].score : minf;
        bool any = false;
        for (int b = 0; b < NB; b++) any = any || best > (fin[b].finished ? minf : NEG_BIG);
        unsat = unsat && any;
        if (!unsat || all_hit) break;
        if (stopped(p, err)) goto out;
        for (int b = 0; b < NB; b++) toks[b] = &run[b].seq[cur];
        if (dec_many(e, c, kv, toks, NB, lp, err)) goto out;
    }
    *n_out = fin[0].len - P;
    *out = fr_xmalloc((size_t)(*n_out + 1) * sizeof(int));
    memcpy(*out, fin[0].seq + P, (size_t)*n_out * sizeof(int));
    rc = 0;
out:
    for (int b = 0; b < NB; b++) {
        free(run[b].seq);
        free(nrun[b].seq);
        free(fin[b].seq);
        free(nfin[b].seq);
        kv_free(e, &kv[b]);
        kv_free(e, &nkv[b]);
    }
    free(toks);
    free(run);
    free(nrun);
    free(fin);
    free(nfin);
    free(kv);
    free(nkv);
    free(lp);
    free(acc);
    free(cd);
    free(idx);
    free(tmp);
    return rc;
}

static int generate(const weng *e, const wcross *c, const int *prompt, int n_prompt,
                    const fr_whisper_params *p, int **out, int *n_out, fr_err *err) {
    const fr_whisper_model *m = e->m;
    *out = NULL;
    *n_out = 0;
    if (n_prompt < 1 || n_prompt >= m->hp.n_text_ctx) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: a prompt of %d tokens", n_prompt);
        return -1;
    }
    if (p->num_beams < 1 || p->num_beams > 16) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: num_beams %d (1..16)", p->num_beams);
        return -1;
    }
    return p->num_beams == 1 ? greedy(e, c, prompt, n_prompt, p, out, n_out, err)
                             : beam(e, c, prompt, n_prompt, p, out, n_out, err);
}

int fr_whisper_generate(const fr_whisper_model *m, const fr_whisper_cross *c, const int *prompt,
                        int n_prompt, const fr_whisper_params *p, int **out, int *n_out,
                        fr_err *err) {
    const weng e = {m, NULL}; /* the CPU reference: c is a CPU cache */
    const wcross x = {c, NULL};
    return generate(&e, &x, prompt, n_prompt, p, out, n_out, err);
}

/* ---------------------------------------------------------------- segments and text */

static void text_append(const fr_whisper_model *m, const int *t, int n, fr_buf *b) {
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *s = fr_whisper_token_bytes(m, t[i], &len);
        if (s) fr_buf_append(b, s, len);
    }
}

/* the bytes made valid UTF-8: each invalid byte becomes U+FFFD */
static char *utf8_lossy(const char *s, size_t n) {
    fr_buf o = {0};
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        int k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (k && i + (size_t)k <= n && fr_utf8_valid(s + i, (size_t)k)) {
            fr_buf_append(&o, s + i, (size_t)k);
            i += (size_t)k;
        } else {
            fr_buf_puts(&o, "\xEF\xBF\xBD");
            i++;
        }
    }
    return fr_buf_cstr(&o);
}

static void add_segment(fr_whisper_result *r, const fr_whisper_model *m, double start, double end,
                        const int *t, int n) {
    r->segments = fr_xrealloc(r->segments, (size_t)(r->n_segments + 1) * sizeof *r->segments);
    fr_whisper_segment *s = &r->segments[r->n_segments++];
    s->start = start;
    s->end = end;
    s->n_tokens = n;
    s->tokens = fr_xmalloc((size_t)(n + 1) * sizeof(int));
    memcpy(s->tokens, t, (size_t)n * sizeof(int));
    fr_buf b = {0};
    text_append(m, t, n, &b);
    s->text = utf8_lossy(b.data ? b.data : "", b.len);
    fr_buf_free(&b);
    r->tokens = fr_xrealloc(r->tokens, (size_t)(r->n_tokens + n + 1) * sizeof(int));
    memcpy(r->tokens + r->n_tokens, t, (size_t)n * sizeof(int));
    r->n_tokens += n;
}

/* HF's _retrieve_segment (transformers 5): split a window's tokens at consecutive timestamps;
 * returns the frames to move seek by. */
static int split_segments(fr_whisper_result *r, const fr_whisper_model *m, const int *t, int n,
                          double offset_s, int seek_frames) {
    int tb = m->vocab.ts_begin;
    const double prec = 0.02, prec_features = 0.01;
    bool single_end = n >= 2 && t[n - 2] < tb && t[n - 1] >= tb;
    int *cuts = fr_xmalloc((size_t)(n + 2) * sizeof(int));
    int nc = 0;
    for (int i = 0; i + 1 < n; i++)
        if (t[i] >= tb && t[i + 1] >= tb) cuts[nc++] = i + 1;
    int adv;
    if (nc > 0) {
        if (single_end) cuts[nc++] = n;
        else cuts[nc - 1] += 1; /* the last segment keeps both timestamps of its pair */
        int last = 0;
        for (int k = 0; k < nc; k++) {
            const int *sl = t + last;
            int ln = cuts[k] - last;
            /* the last segment of a window that ends in a pair ends at the pair's first token */
            int end_i = k == nc - 1 && !single_end && ln >= 2 ? ln - 2 : ln - 1;
            add_segment(r, m, offset_s + (sl[0] - tb) * prec, offset_s + (sl[end_i] - tb) * prec,
                        sl, ln);
            last = cuts[k];
        }
        /* single timestamp at the end: no speech after it; else seek to the last pair */
        adv = single_end ? seek_frames : (t[last - 2] - tb) * 2;
    } else {
        double last_pos = (int)(seek_frames * prec_features / prec);
        int lt = -1;
        for (int i = 0; i < n; i++)
            if (t[i] >= tb) lt = t[i];
        if (lt >= 0 && lt != tb) last_pos = lt - tb;
        add_segment(r, m, offset_s, offset_s + last_pos * prec, t, n);
        adv = seek_frames;
    }
    free(cuts);
    return adv;
}

/* ---------------------------------------------------------------- the whole recording */

/* decode one window of features (n_mels, 3000), on the CPU or on p->cuda */
static int run_window(const fr_whisper_model *m, const float *win, fr_whisper_params *p,
                      fr_whisper_result *r, int **gen, int *n_gen, fr_err *err) {
    const fr_whisper_hparams *hp = &m->hp;
    const weng e = {m, p->cuda};
    wcross x = {NULL, NULL};
    fr_whisper_cross *c = NULL;
    fr_cuda_whisper_cross *g = NULL;
    if (p->cuda) {
        if (fr_cuda_whisper_encode(p->cuda, win, 1, NULL, &g, err)) return -1;
        x.g = g;
    } else {
        float *enc = fr_xmalloc((size_t)hp->n_audio_ctx * hp->n_audio_state * sizeof(float));
        fr_whisper_encode(m, win, enc);
        c = fr_whisper_cross_new(m, enc);
        free(enc);
        x.c = c;
    }
    int rc = -1;
    if (m->vocab.multilingual && p->language < 0) {
        p->language = detect_language(&e, &x, err);
        if (p->language < 0) goto out;
    }
    int prompt[4];
    int np = fr_whisper_prompt(m, p->language, p->task, p->timestamps, prompt);
    if (!r->prompt) {
        r->prompt = fr_xmalloc(sizeof prompt);
        memcpy(r->prompt, prompt, sizeof prompt);
        r->n_prompt = np;
        r->language = m->vocab.multilingual ? p->language : -1;
    }
    rc = generate(&e, &x, prompt, np, p, gen, n_gen, err);
    r->n_windows++;
out:
    if (c) fr_whisper_cross_free(c);
    if (g) fr_cuda_whisper_cross_free(p->cuda, g);
    return rc;
}

static void strip_eot(const fr_whisper_model *m, const int *t, int *n) {
    while (*n > 0 && t[*n - 1] == m->vocab.eot) (*n)--;
}

int fr_whisper_transcribe(const fr_whisper_model *m, const float *pcm, size_t n,
                          const fr_whisper_params *params, fr_whisper_result *r, fr_err *err) {
    memset(r, 0, sizeof *r);
    fr_whisper_params p = *params;
    const fr_whisper_vocab *v = &m->vocab;
    if (p.language >= v->n_lang) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "whisper: the model has no language %s",
                    fr_whisper_lang_code(p.language) ? fr_whisper_lang_code(p.language) : "?");
        return -1;
    }
    if (!v->multilingual && (p.language > 0 || p.task == FR_WHISPER_TASK_TRANSLATE)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "whisper: an English-only model takes no language or translate task");
        return -1;
    }
    r->audio_s = (double)n / FR_WHISPER_SAMPLE_RATE;
    if (n > FR_WHISPER_N_SAMPLES) p.timestamps = true; /* long-form needs timestamps */
    float *feat = NULL;
    int F = 0, rc = -1;
    if (fr_whisper_features(m, pcm, n, false, &feat, &F, err)) return -1;
    int M = m->hp.n_mels, W = FR_WHISPER_N_FRAMES;
    float *win = fr_xmalloc((size_t)M * W * sizeof(float));
    /* HF 5 runs this loop for every input, also one padded 30 s window (F = 3000): a window
     * whose tokens end before its last frames is followed by one from its last timestamp pair */
    int seek = 0;
    while (seek < F) {
        if (stopped(&p, err)) goto out;
        int nf = F - seek < W ? F - seek : W;
        for (int i = 0; i < M; i++) {
            memcpy(win + (size_t)i * W, feat + (size_t)i * F + seek, (size_t)nf * sizeof(float));
            memset(win + (size_t)i * W + nf, 0, (size_t)(W - nf) * sizeof(float));
        }
        int *gen = NULL, ng = 0;
        if (run_window(m, win, &p, r, &gen, &ng, err)) goto out;
        strip_eot(m, gen, &ng);
        int adv = split_segments(r, m, gen, ng, seek * 0.02 / 2, nf);
        free(gen);
        seek += adv > 0 ? adv : nf; /* a window never repeats (HF would loop forever) */
    }
    fr_buf b = {0};
    for (int i = 0; i < r->n_segments; i++) fr_buf_puts(&b, r->segments[i].text);
    r->text = fr_buf_cstr(&b);
    rc = 0;
out:
    free(win);
    free(feat);
    if (rc) fr_whisper_result_free(r);
    return rc;
}

int fr_whisper_transcribe_vad(const fr_whisper_model *m, struct fr_vad *vad, const float *pcm,
                              size_t n, const fr_whisper_params *p, fr_whisper_result *r,
                              int *spans, fr_err *err) {
    if (spans) *spans = -1;
    if (!vad) return fr_whisper_transcribe(m, pcm, n, p, r, err);
    float *sp = NULL;
    size_t sn = 0, ns = 0;
    fr_vad_seg *segs = NULL;
    if (fr_vad_trim_f32(vad, pcm, n, NULL, &sp, &sn, &segs, &ns, p->cancel, err)) return -1;
    if (spans) *spans = (int)ns;
    int rc = 0;
    if (!ns) {
        memset(r, 0, sizeof *r);
        r->language = p->language;
        r->text = fr_xstrdup("");
    } else if (!(rc = fr_whisper_transcribe(m, sp, sn, p, r, err))) {
        for (int i = 0; i < r->n_segments; i++) {
            r->segments[i].start = fr_vad_time_map(segs, ns, r->segments[i].start);
            r->segments[i].end = fr_vad_time_map(segs, ns, r->segments[i].end);
        }
    }
    if (!rc) r->audio_s = (double)n / FR_WHISPER_SAMPLE_RATE;
    free(sp);
    free(segs);
    return rc;
}
