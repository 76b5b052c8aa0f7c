/* tokmask.c — the vocabulary trie, the per-frame mask cache and the per-step mask (tokmask.h).
 *
 * Trie layout: nodes in preorder; node k has its byte, its depth (1 = first byte), the token
 * that ends there (-1 none) and skip[k], the first node after its subtree. Tokens are sorted by
 * bytes, so building is one pass that shares each token's common prefix with the previous one.
 *
 * Cold entry for a frame f: walk the trie from the state {[BASE, f]} (grammar.h
 * fr_gstate_from_frame). At each node the level's state is the parent's fed with the byte. A
 * live state at a token's node: accepted for sure. A byte that reached BASE marks the path
 * "uncertain" (it depends on the frames below f): tokens under a dead uncertain node are all
 * uncertain, a dead certain node prunes its subtree.
 */
#include "engine/tokmask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct fr_tokvocab {
    int n_vocab;             /* model rows */
    int words;               /* mask words */
    const fr_tokenizer *tok; /* token bytes (borrowed) */
    int n_nodes;
    uint8_t *byte;           /* (n_nodes) */
    uint8_t *depth;          /* (n_nodes) 1.. */
    int32_t *token;          /* (n_nodes) token ending here or -1 */
    int32_t *skip;           /* (n_nodes) first node after the subtree */
    int32_t *other;          /* tokens checked one by one (long, duplicate bytes) */
    int n_other;
    int32_t *eos;            /* EOS ids within n_vocab */
    int n_eos;
    int max_chars;           /* longest token in bytes (bounds its characters) */
};

typedef struct centry {
    fr_gframe key;
    bool used;
    uint32_t *acc;           /* (words) accepted by the frame alone */
    int32_t *unc;            /* uncertain tokens */
    int n_unc, cap_unc;
} centry;

struct fr_tokmask {
    const fr_tokvocab *v;
    const fr_grammar *g;
    fr_gstate st;            /* current state */
    fr_gstate tmp[2];        /* scratch for checks */
    fr_gstate *lv;           /* (FR_TOKMASK_TRIE_DEPTH + 1) trie walk levels */
    bool *unc_lv;            /* (FR_TOKMASK_TRIE_DEPTH + 1) path uncertain */
    centry cache[FR_TOKMASK_CACHE];
    centry scratch;          /* used when the cache is full */
    int n_cache;
    long hits, misses;
};

/* --- vocabulary --- */

static const fr_tokenizer *sort_tok; /* qsort has no context argument; built under one thread */

static int cmp_tok(const void *a, const void *b) {
    size_t la, lb;
    const char *x = fr_token_data(sort_tok, *(const int32_t *)a, &la);
    const char *y = fr_token_data(sort_tok, *(const int32_t *)b, &lb);
    int c = memcmp(x, y, FR_MIN(la, lb));
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

static void trie_add(fr_tokvocab *v, int32_t id, const char *s, size_t n, size_t common,
                     int32_t *open) {
    for (size_t d = common; d < n; d++) {
        int k = v->n_nodes++;
        v->byte[k] = (uint8_t)s[d];
        v->depth[k] = (uint8_t)(d + 1);
        v->token[k] = d + 1 == n ? id : -1;
        /* every open node at depth >= d+1 ends its subtree here */
        for (size_t e = d + 1; e <= FR_TOKMASK_TRIE_DEPTH && open[e] >= 0; e++) {
            v->skip[open[e]] = k;
            open[e] = -1;
        }
        open[d + 1] = k;
    }
}

static void build_trie(fr_tokvocab *v, int32_t *ids, int n) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    sort_tok = v->tok;
    qsort(ids, (size_t)n, sizeof(int32_t), cmp_tok);
    pthread_mutex_unlock(&mu);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t l;
        fr_token_data(v->tok, ids[i], &l);
        total += l;
    }
    v->byte = fr_xmalloc(total + 1);
    v->depth = fr_xmalloc(total + 1);
    v->token = fr_xmalloc(sizeof(int32_t) * (total + 1));
    v->skip = fr_xmalloc(sizeof(int32_t) * (total + 1));
    int32_t open[FR_TOKMASK_TRIE_DEPTH + 2];
    for (int i = 0; i <= FR_TOKMASK_TRIE_DEPTH + 1; i++) open[i] = -1;
    const char *prev = NULL;
    size_t lprev = 0;
    for (int i = 0; i < n; i++) {
        size_t l, c = 0;
        const char *s = fr_token_data(v->tok, ids[i], &l);
        while (prev && c < l && c < lprev && prev[c] == s[c]) c++;
        if (prev && c == l && l == lprev) { /* same bytes as the previous token */
            v->other[v->n_other++] = ids[i];
            continue;
        }
        trie_add(v, ids[i], s, l, c, open);
        prev = s;
        lprev = l;
    }
    for (int e = 0; e <= FR_TOKMASK_TRIE_DEPTH; e++)
        if (open[e] >= 0) v->skip[open[e]] = v->n_nodes;
}

fr_tokvocab *fr_tokvocab_new(const fr_tokenizer *t, int n_vocab, const int *eos, int n_eos) {
    fr_tokvocab *v = fr_xcalloc(1, sizeof *v);
    v->n_vocab = n_vocab;
    v->words = (n_vocab + 31) / 32;
    v->tok = t;
    int nt = FR_MIN(n_vocab, fr_tokenizer_n_vocab(t));
    int32_t *ids = fr_xmalloc(sizeof(int32_t) * (size_t)(nt + 1));
    v->other = fr_xmalloc(sizeof(int32_t) * (size_t)(nt + 1));
    int n = 0;
    for (int id = 0; id < nt; id++) {
        size_t l;
        if (fr_tokenizer_is_special(t, id) || !fr_token_data(t, id, &l) || l == 0) continue;
        v->max_chars = FR_MAX(v->max_chars, (int)l);
        if (l > FR_TOKMASK_TRIE_DEPTH) v->other[v->n_other++] = id;
        else ids[n++] = id;
    }
    build_trie(v, ids, n);
    free(ids);
    v->eos = fr_xmalloc(sizeof(int32_t) * (size_t)(n_eos + 1));
    for (int i = 0; i < n_eos; i++)
        if (eos[i] >= 0 && eos[i] < n_vocab) v->eos[v->n_eos++] = eos[i];
    return v;
}

void fr_tokvocab_free(fr_tokvocab *v) {
    if (!v) return;
    free(v->byte);
    free(v->depth);
    free(v->token);
    free(v->skip);
    free(v->other);
    free(v->eos);
    free(v);
}

int fr_tokvocab_n(const fr_tokvocab *v) { return v->n_vocab; }
int fr_tokvocab_trie_nodes(const fr_tokvocab *v) { return v->n_nodes; }
int fr_tokmask_words(const fr_tokvocab *v) { return v->words; }

/* --- masks --- */

fr_tokmask *fr_tokmask_new(const fr_tokvocab *v, const fr_grammar *g) {
    fr_tokmask *m = fr_xcalloc(1, sizeof *m);
    m->v = v;
    m->g = g;
    fr_gstate_init(g, &m->st);
    return m;
}

static void entry_free(centry *e) {
    free(e->acc);
    free(e->unc);
    memset(e, 0, sizeof *e);
}

void fr_tokmask_free(fr_tokmask *m) {
    if (!m) return;
    for (int i = 0; i < m->n_cache; i++) entry_free(&m->cache[i]);
    entry_free(&m->scratch);
    free(m->lv);
    free(m->unc_lv);
    free(m);
}

static inline void bit_set(uint32_t *b, int i) { b[i >> 5] |= 1u << (i & 31); }
static inline bool bit_get(const uint32_t *b, int i) { return b[i >> 5] >> (i & 31) & 1; }

static void unc_add(centry *e, int32_t id) {
    if (e->n_unc == e->cap_unc) {
        e->cap_unc = e->cap_unc ? e->cap_unc * 2 : 64;
        e->unc = fr_xrealloc(e->unc, sizeof(int32_t) * (size_t)e->cap_unc);
    }
    e->unc[e->n_unc++] = id;
}

/* the trie walk of a cold entry (file comment) */
static void entry_compute(fr_tokmask *m, const fr_gframe *f, centry *e) {
    const fr_tokvocab *v = m->v;
    if (!m->lv) {
        m->lv = fr_xmalloc(sizeof(fr_gstate) * (FR_TOKMASK_TRIE_DEPTH + 1));
        m->unc_lv = fr_xmalloc(sizeof(bool) * (FR_TOKMASK_TRIE_DEPTH + 1));
    }
    if (!e->acc) e->acc = fr_xmalloc(sizeof(uint32_t) * (size_t)v->words);
    memset(e->acc, 0, sizeof(uint32_t) * (size_t)v->words);
    e->n_unc = 0;
    fr_gstate_from_frame(m->g, f, &m->lv[0]);
    m->unc_lv[0] = false;
    for (int k = 0; k < v->n_nodes;) {
        int d = v->depth[k];
        fr_gstate *s = &m->lv[d];
        fr_gstate_feed(m->g, &m->lv[d - 1], v->byte[k], s);
        bool u = m->unc_lv[d - 1] || s->hit_base;
        if (s->n == 0) {
            if (u)
                for (int j = k; j < v->skip[k]; j++)
                    if (v->token[j] >= 0) unc_add(e, v->token[j]);
            k = v->skip[k];
            continue;
        }
        if (v->token[k] >= 0) bit_set(e->acc, v->token[k]);
        m->unc_lv[d] = u;
        k++;
    }
}

static centry *entry_get(fr_tokmask *m, const fr_gframe *f) {
    fr_gframe key = fr_gframe_key(m->g, f, m->v->max_chars);
    for (int i = 0; i < m->n_cache; i++)
        if (!memcmp(&m->cache[i].key, &key, sizeof key)) {
            m->hits++;
            return &m->cache[i];
        }
    m->misses++;
    centry *e = m->n_cache < FR_TOKMASK_CACHE ? &m->cache[m->n_cache++] : &m->scratch;
    e->key = key;
    e->used = true;
    entry_compute(m, f, e);
    return e;
}

/* does token id's whole byte string pass from state `from` */
static bool token_ok(fr_tokmask *m, const fr_gstate *from, int id) {
    size_t l;
    const char *s = fr_token_data(m->v->tok, id, &l);
    if (!s || l == 0) return false;
    const fr_gstate *cur = from;
    for (size_t i = 0; i < l; i++) {
        fr_gstate *dst = &m->tmp[i & 1];
        if (!fr_gstate_feed(m->g, cur, (uint8_t)s[i], dst)) return false;
        cur = dst;
    }
    return true;
}

static void one_stack(fr_tokmask *m, int si, uint32_t *mask) {
    const fr_gstack *s = &m->st.s[si];
    if (s->len == 0) return;
    centry *e = entry_get(m, &s->f[s->len - 1]);
    for (int w = 0; w < m->v->words; w++) mask[w] |= e->acc[w];
    if (!e->n_unc) return;
    fr_gstate one; /* only this stack: its own context decides */
    one.n = 1;
    one.hit_base = false;
    fr_gstack_copy(&one.s[0], s);
    for (int i = 0; i < e->n_unc; i++) {
        int id = e->unc[i];
        if (!bit_get(mask, id) && token_ok(m, &one, id)) bit_set(mask, id);
    }
}

static void finish_mask(fr_tokmask *m, uint32_t *mask) {
    const fr_tokvocab *v = m->v;
    for (int i = 0; i < v->n_other; i++)
        if (!bit_get(mask, v->other[i]) && token_ok(m, &m->st, v->other[i])) bit_set(mask, v->other[i]);
    if (fr_gstate_can_finish(m->g, &m->st))
        for (int i = 0; i < v->n_eos; i++) bit_set(mask, v->eos[i]);
}

void fr_tokmask_fill(fr_tokmask *m, uint32_t *mask) {
    memset(mask, 0, sizeof(uint32_t) * (size_t)m->v->words);
    for (int i = 0; i < m->st.n; i++) one_stack(m, i, mask);
    finish_mask(m, mask);
}

void fr_tokmask_fill_ref(fr_tokmask *m, uint32_t *mask) {
    const fr_tokvocab *v = m->v;
    memset(mask, 0, sizeof(uint32_t) * (size_t)v->words);
    int nt = FR_MIN(v->n_vocab, fr_tokenizer_n_vocab(v->tok));
    for (int id = 0; id < nt; id++)
        if (!fr_tokenizer_is_special(v->tok, id) && token_ok(m, &m->st, id)) bit_set(mask, id);
    if (fr_gstate_can_finish(m->g, &m->st))
        for (int i = 0; i < v->n_eos; i++) bit_set(mask, v->eos[i]);
}

static bool is_eos(const fr_tokvocab *v, int id) {
    for (int i = 0; i < v->n_eos; i++)
        if (v->eos[i] == id) return true;
    return false;
}

bool fr_tokmask_accept(fr_tokmask *m, int id) {
    const fr_tokvocab *v = m->v;
    if (id < 0 || id >= v->n_vocab) return false;
    if (is_eos(v, id)) return fr_gstate_can_finish(m->g, &m->st);
    if (id >= fr_tokenizer_n_vocab(v->tok) || fr_tokenizer_is_special(v->tok, id)) return false;
    size_t l;
    const char *s = fr_token_data(v->tok, id, &l);
    return l > 0 && fr_gstate_feed_bytes(m->g, &m->st, s, l, m->tmp);
}

int fr_tokmask_need_after(fr_tokmask *m, int id) {
    const fr_tokvocab *v = m->v;
    if (id < 0 || id >= v->n_vocab) return -1;
    if (is_eos(v, id)) return fr_gstate_can_finish(m->g, &m->st) ? 0 : -1;
    if (id >= fr_tokenizer_n_vocab(v->tok) || fr_tokenizer_is_special(v->tok, id) ||
        !token_ok(m, &m->st, id))
        return -1;
    size_t l;
    fr_token_data(v->tok, id, &l);
    return fr_gstate_need(m->g, &m->tmp[(l - 1) & 1]);
}

int fr_tokmask_need(const fr_tokmask *m) { return fr_gstate_need(m->g, &m->st); }
bool fr_tokmask_terminal(const fr_tokmask *m) { return fr_gstate_terminal(m->g, &m->st); }

void fr_tokmask_stats(const fr_tokmask *m, long *hits, long *misses) {
    *hits = m->hits;
    *misses = m->misses;
}
