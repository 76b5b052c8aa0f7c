/* gen.c — per-request text release: EOS, stop strings, max tokens. See gen.h. */
#include "engine/gen.h"

#include <stdlib.h>
#include <string.h>

fr_gen_params fr_gen_params_default(void) {
    fr_gen_params p;
    memset(&p, 0, sizeof p);
    p.max_tokens = 256;
    p.skip_special = true;
    return p;
}

void fr_gen_init(fr_gen *g, const fr_model *m, const fr_gen_params *p) {
    memset(g, 0, sizeof *g);
    g->model = m;
    g->p = *p;
    if (g->p.max_tokens < 1) g->p.max_tokens = 1;
    int n = 0;
    for (int i = 0; i < p->n_stop && i < FR_GEN_MAX_STOP; i++) {
        if (!p->stop[i] || !p->stop[i][0]) continue; /* an empty stop string never matches */
        g->stop_copy[n] = fr_xstrdup(p->stop[i]);
        g->p.stop[n] = g->stop_copy[n];
        size_t l = strlen(g->stop_copy[n]);
        if (l > g->max_stop_len) g->max_stop_len = l;
        n++;
    }
    for (int i = n; i < FR_GEN_MAX_STOP; i++) g->p.stop[i] = NULL;
    g->p.n_stop = n;
}

bool fr_gen_is_eos(const fr_model *m, int id) {
    if (id < 0) return false;
    if (id == m->hp.eos_id) return true;
    for (size_t i = 0; i < FR_ARRAY_LEN(m->hp.eos_ids); i++)
        if (m->hp.eos_ids[i] >= 0 && id == m->hp.eos_ids[i]) return true;
    return m->tok && id == fr_tokenizer_eos(m->tok);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of some stop string. */
static size_t held_suffix(const fr_gen *g, const char *s, size_t n) {
    size_t best = 0;
    for (int i = 0; i < g->p.n_stop; i++) {
        const char *st = g->p.stop[i];
        size_t sl = strlen(st);
        size_t maxk = FR_MIN(n, sl - 1);
        for (size_t k = maxk; k > best; k--)
            if (!memcmp(s + n - k, st, k)) { best = k; break; }
    }
    return best;
}

static void release(fr_gen *g, size_t n, fr_buf *delta) {
    if (!n) return;
    fr_buf_append(delta, g->held.data, n);
    fr_buf_append(&g->text, g->held.data, n);
    memmove(g->held.data, g->held.data + n, g->held.len - n);
    g->held.len -= n;
    g->held.data[g->held.len] = 0;
}

fr_finish fr_gen_push(fr_gen *g, int id, fr_buf *delta) {
    if (g->finish != FR_FINISH_NONE) return g->finish;
    g->n_generated++;
    bool eos = !g->p.ignore_eos && fr_gen_is_eos(g->model, id);
    if (!eos) fr_detok_push(g->model->tok, &g->detok, id, g->p.skip_special, &g->held);
    /* a stop string anywhere in the held text ends generation before it */
    if (g->p.n_stop && g->held.len) {
        size_t cut = (size_t)-1;
        for (int i = 0; i < g->p.n_stop; i++) {
            const char *hit = memmem(g->held.data, g->held.len, g->p.stop[i], strlen(g->p.stop[i]));
            if (hit && (size_t)(hit - g->held.data) < cut) cut = (size_t)(hit - g->held.data);
        }
        if (cut != (size_t)-1) {
            release(g, cut, delta);
            g->held.len = 0;
            g->finish = FR_FINISH_STOP;
            return g->finish;
        }
    }
    if (eos) g->finish = FR_FINISH_STOP;
    else if (g->n_generated >= g->p.max_tokens) g->finish = FR_FINISH_LENGTH;
    if (g->finish != FR_FINISH_NONE) {
        fr_detok_flush(&g->detok, &g->held);
        release(g, g->held.len, delta);
        return g->finish;
    }
    release(g, g->held.len - held_suffix(g, g->held.data ? g->held.data : "", g->held.len), delta);
    return FR_FINISH_NONE;
}

void fr_gen_free(fr_gen *g) {
    for (int i = 0; i < FR_GEN_MAX_STOP; i++) free(g->stop_copy[i]);
    fr_buf_free(&g->held);
    fr_buf_free(&g->text);
    memset(g, 0, sizeof *g);
}
