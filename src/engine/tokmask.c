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
 *
 * Two refinements keep a step cheap on a 151,936-token vocabulary:
 *   - plain string tokens: a token whose bytes are only string characters (no '"', '\\',
 *     control byte, and whole UTF-8 characters) is accepted inside a string body exactly when
 *     its characters fit the room left, so those tokens are precomputed as bitsets by character
 *     count (plain_le[k]), and a string-body entry walks only the trie of the other tokens;
 *   - uncertain tokens grouped by suffix: the byte where a token leaves the frame is known from
 *     the walk, and what happens from there depends only on the stack with the frame popped, so
 *     tokens with the same remaining bytes ('",', '"}', ...) are checked once per group.
 */
#include "engine/tokmask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PLAIN_K 64 /* plain tokens of at most this many characters get a bitset per count */

typedef struct trie {
    int n_nodes;
    uint8_t *byte;           /* (n_nodes) */
    uint8_t *depth;          /* (n_nodes) 1.. */
    int32_t *token;          /* (n_nodes) token ending here or -1 */
    int32_t *skip;           /* (n_nodes) first node after the subtree */
} trie;

struct fr_tokvocab {
    int n_vocab;             /* model rows */
    int words;               /* mask words */
    const fr_tokenizer *tok; /* token bytes (borrowed) */
    trie all;                /* every normal token of at most FR_TOKMASK_TRIE_DEPTH bytes */
    trie rest;               /* those that are not plain string tokens */
    uint32_t *plain_le;      /* (PLAIN_K + 1, words) plain tokens of <= k characters */
    uint32_t *first;         /* (256, words) normal tokens by first byte */
    uint32_t *normal;        /* (words) every normal token (the union of first) */
    int32_t *other;          /* tokens checked one by one (long, duplicate bytes) */
    int n_other;
    int32_t *eos;            /* EOS ids within n_vocab */
    int n_eos;
    int max_chars;           /* longest token in bytes (bounds its characters) */
    struct strbody *sb;      /* the string-body entry, shared by every grammar */
};

typedef struct centry centry;
struct fr_maskcache {
    centry *e;               /* (FR_TOKMASK_CACHE) entries */
    int n;                   /* in use */
    unsigned victim;         /* next entry replaced when full (round robin) */
};

typedef struct centry {
    fr_gframe key;
    uint32_t *acc;           /* (words) accepted by the frame alone */
    int32_t *unc;            /* uncertain tokens, then (after grouping) the group members */
    int16_t *unc_off;        /* (n_unc) byte where each left the frame; -1: several, check whole */
    int n_unc, cap_unc;
    int32_t *raw;            /* uncertain tokens checked whole */
    int n_raw;
    int32_t *g_tok, *g_off;  /* per suffix group: a member and its suffix offset */
    int32_t *g_first, *g_n;  /* its members unc[g_first .. g_first + g_n) */
    int n_groups;
    uint32_t *pop0;          /* (words) tokens whose first byte ends the frame (a complete number
                                or sequence): allowed as the popped stack allows them; NULL none */
    uint8_t b0[32];          /* those first bytes (walk scratch) */
} centry;

/* What a string body accepts among the non-plain tokens, for any string node: the tokens
 * accepted inside it and the suffix groups of those that close it, each with the characters it
 * adds to the string; checked at a step against the frame's count and limits. */
typedef struct strbody {
    int32_t *in_id;          /* tokens that stay inside the string */
    int16_t *in_ch;          /* their characters */
    uint8_t *in_close;       /* the token's last byte closes the string (minLength applies) */
    int n_in;
    centry e;                /* groups (members in e.unc) and raw tokens */
    int16_t *mem_ch;         /* (e.n_unc) characters before the closing quote */
} strbody;

struct fr_tokmask {
    const fr_tokvocab *v;
    const fr_grammar *g;
    fr_gstate st;            /* current state */
    fr_gstate tmp[2];        /* scratch for checks */
    fr_gstate *pop_lv;       /* (FR_GRAMMAR_MAX_FRAMES + 1) popped stacks per recursion level */
    uint32_t *mask_lv;       /* (FR_GRAMMAR_MAX_FRAMES + 1, words) masks of the popped stacks */
    fr_gstate *lv;           /* (FR_TOKMASK_TRIE_DEPTH + 1) trie walk levels */
    int16_t *hit_lv;         /* (FR_TOKMASK_TRIE_DEPTH + 1) byte where the path left, -1 none */
    bool *multi_lv;          /* (FR_TOKMASK_TRIE_DEPTH + 1) left at more than one byte */
    fr_maskcache *c;         /* the frame cache (own, or shared by equal grammars) */
    bool own_cache;
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

static void trie_add(trie *t, int32_t id, const char *s, size_t n, size_t common, int32_t *open) {
    for (size_t d = common; d < n; d++) {
        int k = t->n_nodes++;
        t->byte[k] = (uint8_t)s[d];
        t->depth[k] = (uint8_t)(d + 1);
        t->token[k] = d + 1 == n ? id : -1;
        /* every open node at depth >= d+1 ends its subtree here */
        for (size_t e = d + 1; e <= FR_TOKMASK_TRIE_DEPTH && open[e] >= 0; e++) {
            t->skip[open[e]] = k;
            open[e] = -1;
        }
        open[d + 1] = k;
    }
}

static void sort_ids(const fr_tokenizer *tok, int32_t *ids, int n) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    sort_tok = tok;
    qsort(ids, (size_t)n, sizeof(int32_t), cmp_tok);
    pthread_mutex_unlock(&mu);
}

/* a trie over ids (sorted by bytes); tokens with the same bytes as the one before go to dup */
static void build_trie(const fr_tokenizer *tok, trie *t, const int32_t *ids, int n, int32_t *dup,
                       int *n_dup) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t l;
        fr_token_data(tok, ids[i], &l);
        total += l;
    }
    t->byte = fr_xmalloc(total + 1);
    t->depth = fr_xmalloc(total + 1);
    t->token = fr_xmalloc(sizeof(int32_t) * (total + 1));
    t->skip = fr_xmalloc(sizeof(int32_t) * (total + 1));
    int32_t open[FR_TOKMASK_TRIE_DEPTH + 2];
    for (int i = 0; i <= FR_TOKMASK_TRIE_DEPTH + 1; i++) open[i] = -1;
    const char *prev = NULL;
    size_t lprev = 0;
    for (int i = 0; i < n; i++) {
        size_t l, c = 0;
        const char *s = fr_token_data(tok, ids[i], &l);
        while (prev && c < l && c < lprev && prev[c] == s[c]) c++;
        if (prev && c == l && l == lprev) { /* same bytes as the previous token */
            if (dup) dup[(*n_dup)++] = ids[i];
            continue;
        }
        trie_add(t, ids[i], s, l, c, open);
        prev = s;
        lprev = l;
    }
    for (int e = 0; e <= FR_TOKMASK_TRIE_DEPTH; e++)
        if (open[e] >= 0) t->skip[open[e]] = t->n_nodes;
}

static void trie_free(trie *t) {
    free(t->byte);
    free(t->depth);
    free(t->token);
    free(t->skip);
}

/* characters of a plain string token (file comment), or -1 */
static int plain_chars(const char *s, size_t n) {
    int chars = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t c = (uint8_t)s[i];
        if (c == '"' || c == '\\' || c < 0x20) return -1;
        size_t k;
        if (c < 0x80) k = 0;
        else if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) k = 2;
        else if (c >= 0xF0 && c <= 0xF4) k = 3;
        else return -1;
        if (k && i + k >= n) return -1; /* the character is cut */
        if (k) {
            uint8_t c1 = (uint8_t)s[i + 1];
            uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
            uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            if (c1 < lo || c1 > hi) return -1;
            for (size_t j = 2; j <= k; j++)
                if (((uint8_t)s[i + j] & 0xC0) != 0x80) return -1;
        }
        i += k + 1;
        chars++;
    }
    return chars;
}

static void plain_bits(fr_tokvocab *v, int id, int chars) {
    for (int k = chars; k <= PLAIN_K; k++)
        v->plain_le[(size_t)k * (size_t)v->words + (size_t)(id >> 5)] |= 1u << (id & 31);
}

static struct strbody *strbody_new(fr_tokvocab *v);
static void entry_free(centry *e);

fr_tokvocab *fr_tokvocab_new(const fr_tokenizer *t, int n_vocab, const int *eos, int n_eos) {
    fr_tokvocab *v = fr_xcalloc(1, sizeof *v);
    v->n_vocab = n_vocab;
    v->words = (n_vocab + 31) / 32;
    v->tok = t;
    int nt = FR_MIN(n_vocab, fr_tokenizer_n_vocab(t));
    int32_t *ids = fr_xmalloc(sizeof(int32_t) * (size_t)(nt + 1));
    int32_t *rest = fr_xmalloc(sizeof(int32_t) * (size_t)(nt + 1));
    v->other = fr_xmalloc(sizeof(int32_t) * (size_t)(nt + 1));
    v->plain_le = fr_xcalloc((size_t)(PLAIN_K + 1) * (size_t)v->words, sizeof(uint32_t));
    v->first = fr_xcalloc(256 * (size_t)v->words, sizeof(uint32_t));
    v->normal = fr_xcalloc((size_t)v->words, sizeof(uint32_t));
    int n = 0;
    for (int id = 0; id < nt; id++) {
        size_t l;
        const char *s;
        if (fr_tokenizer_is_special(t, id) || !(s = fr_token_data(t, id, &l)) || l == 0) continue;
        v->max_chars = FR_MAX(v->max_chars, (int)l);
        v->first[(size_t)(uint8_t)s[0] * (size_t)v->words + (size_t)(id >> 5)] |= 1u << (id & 31);
        v->normal[id >> 5] |= 1u << (id & 31);
        if (l > FR_TOKMASK_TRIE_DEPTH) v->other[v->n_other++] = id;
        else ids[n++] = id;
    }
    sort_ids(t, ids, n);
    build_trie(t, &v->all, ids, n, v->other, &v->n_other);
    int nr = 0;
    for (int i = 0; i < n; i++) { /* ids stay sorted: the rest trie is built from the order */
        size_t l;
        const char *s = fr_token_data(t, ids[i], &l);
        int ch = plain_chars(s, l);
        if (ch >= 0 && ch <= PLAIN_K) plain_bits(v, ids[i], ch);
        else rest[nr++] = ids[i];
    }
    build_trie(t, &v->rest, rest, nr, NULL, NULL);
    free(ids);
    free(rest);
    v->eos = fr_xmalloc(sizeof(int32_t) * (size_t)(n_eos + 1));
    for (int i = 0; i < n_eos; i++)
        if (eos[i] >= 0 && eos[i] < n_vocab) v->eos[v->n_eos++] = eos[i];
    v->sb = strbody_new(v);
    return v;
}

void fr_tokvocab_free(fr_tokvocab *v) {
    if (!v) return;
    if (v->sb) {
        free(v->sb->in_id);
        free(v->sb->in_ch);
        free(v->sb->in_close);
        free(v->sb->mem_ch);
        entry_free(&v->sb->e);
        free(v->sb);
    }
    trie_free(&v->all);
    trie_free(&v->rest);
    free(v->plain_le);
    free(v->first);
    free(v->normal);
    free(v->other);
    free(v->eos);
    free(v);
}

int fr_tokvocab_n(const fr_tokvocab *v) { return v->n_vocab; }
int fr_tokvocab_trie_nodes(const fr_tokvocab *v) { return v->all.n_nodes; }
int fr_tokmask_words(const fr_tokvocab *v) { return v->words; }

/* --- masks --- */

fr_tokmask *fr_tokmask_new_shared(const fr_tokvocab *v, const fr_grammar *g, fr_maskcache *c) {
    fr_tokmask *m = fr_xcalloc(1, sizeof *m);
    m->v = v;
    m->g = g;
    m->own_cache = !c;
    m->c = c ? c : fr_maskcache_new();
    fr_gstate_init(g, &m->st);
    return m;
}

fr_tokmask *fr_tokmask_new(const fr_tokvocab *v, const fr_grammar *g) {
    return fr_tokmask_new_shared(v, g, NULL);
}

static void entry_free(centry *e) {
    free(e->acc);
    free(e->unc);
    free(e->unc_off);
    free(e->raw);
    free(e->g_tok);
    free(e->g_off);
    free(e->g_first);
    free(e->g_n);
    free(e->pop0);
    memset(e, 0, sizeof *e);
}

void fr_tokmask_free(fr_tokmask *m) {
    if (!m) return;
    if (m->own_cache) fr_maskcache_free(m->c);
    free(m->lv);
    free(m->pop_lv);
    free(m->mask_lv);
    free(m->hit_lv);
    free(m->multi_lv);
    free(m);
}

static inline void bit_set(uint32_t *b, int i) { b[i >> 5] |= 1u << (i & 31); }
static inline bool bit_get(const uint32_t *b, int i) { return b[i >> 5] >> (i & 31) & 1; }

static void unc_add(centry *e, int32_t id, int off) {
    if (e->n_unc == e->cap_unc) {
        e->cap_unc = e->cap_unc ? e->cap_unc * 2 : 64;
        e->unc = fr_xrealloc(e->unc, sizeof(int32_t) * (size_t)e->cap_unc);
        e->unc_off = fr_xrealloc(e->unc_off, sizeof(int16_t) * (size_t)e->cap_unc);
    }
    e->unc_off[e->n_unc] = (int16_t)off;
    e->unc[e->n_unc++] = id;
}

/* the trie walk of a cold entry (file comment) over t, adding to e->acc and e->unc */
static void walk_trie(fr_tokmask *m, const trie *t, const fr_gframe *f, centry *e) {
    fr_gstate_from_frame(m->g, f, &m->lv[0]);
    m->hit_lv[0] = -1;
    m->multi_lv[0] = false;
    for (int k = 0; k < t->n_nodes;) {
        int d = t->depth[k];
        fr_gstate *s = &m->lv[d];
        fr_gstate_feed(m->g, &m->lv[d - 1], t->byte[k], s);
        int hit = m->hit_lv[d - 1];
        bool multi = m->multi_lv[d - 1];
        if (s->hit_base) {
            if (hit < 0) hit = d - 1;
            else multi = true;
        }
        if (s->n == 0 && d == 1 && s->hit_base) { /* the frame ends before this byte */
            e->b0[t->byte[k] >> 3] |= (uint8_t)(1u << (t->byte[k] & 7));
            k = t->skip[k];
            continue;
        }
        if (s->n == 0) {
            if (hit >= 0)
                for (int j = k; j < t->skip[k]; j++)
                    if (t->token[j] >= 0) unc_add(e, t->token[j], multi ? -1 : hit);
            k = t->skip[k];
            continue;
        }
        if (t->token[k] >= 0) bit_set(e->acc, t->token[k]);
        m->hit_lv[d] = (int16_t)hit;
        m->multi_lv[d] = multi;
        k++;
    }
}

static uint64_t suffix_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool same_suffix(const fr_tokvocab *v, int a, int oa, int b, int ob) {
    size_t la, lb;
    const char *x = fr_token_data(v->tok, a, &la), *y = fr_token_data(v->tok, b, &lb);
    return la - (size_t)oa == lb - (size_t)ob && !memcmp(x + oa, y + ob, la - (size_t)oa);
}

/* Uncertain tokens into suffix groups (members contiguous in e->unc) and the raw list. */
static void group_uncertain(fr_tokmask *m, centry *e) {
    const fr_tokvocab *v = m->v;
    int n = e->n_unc, cap = 1;
    while (cap < 2 * n + 2) cap <<= 1;
    int32_t *slot = fr_xmalloc(sizeof(int32_t) * (size_t)cap), *gid = fr_xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int i = 0; i < cap; i++) slot[i] = -1;
    e->raw = fr_xrealloc(e->raw, sizeof(int32_t) * (size_t)(n + 1));
    e->g_tok = fr_xrealloc(e->g_tok, sizeof(int32_t) * (size_t)(n + 1));
    e->g_off = fr_xrealloc(e->g_off, sizeof(int32_t) * (size_t)(n + 1));
    e->g_first = fr_xrealloc(e->g_first, sizeof(int32_t) * (size_t)(n + 1));
    e->g_n = fr_xrealloc(e->g_n, sizeof(int32_t) * (size_t)(n + 1));
    e->n_raw = e->n_groups = 0;
    for (int i = 0; i < n; i++) {
        int id = e->unc[i], off = e->unc_off[i];
        gid[i] = -1;
        if (off < 0) {
            e->raw[e->n_raw++] = id;
            continue;
        }
        size_t l;
        const char *b = fr_token_data(v->tok, id, &l);
        size_t at = suffix_hash(b + off, l - (size_t)off) & (size_t)(cap - 1);
        while (slot[at] >= 0 && !same_suffix(v, e->g_tok[slot[at]], e->g_off[slot[at]], id, off))
            at = (at + 1) & (size_t)(cap - 1);
        if (slot[at] < 0) {
            slot[at] = e->n_groups;
            e->g_tok[e->n_groups] = id;
            e->g_off[e->n_groups] = off;
            e->g_n[e->n_groups++] = 0;
        }
        gid[i] = slot[at];
        e->g_n[slot[at]]++;
    }
    int pos = 0;
    for (int g = 0; g < e->n_groups; g++) {
        e->g_first[g] = pos;
        pos += e->g_n[g];
        e->g_n[g] = 0;
    }
    int32_t *members = fr_xmalloc(sizeof(int32_t) * (size_t)(pos + 1));
    int16_t *offs = fr_xmalloc(sizeof(int16_t) * (size_t)(pos + 1));
    for (int i = 0; i < n; i++)
        if (gid[i] >= 0) {
            int at = e->g_first[gid[i]] + e->g_n[gid[i]]++;
            members[at] = e->unc[i];
            offs[at] = e->unc_off[i];
        }
    if (pos) { /* e->unc is NULL while nothing was uncertain */
        memcpy(e->unc, members, sizeof(int32_t) * (size_t)pos);
        memcpy(e->unc_off, offs, sizeof(int16_t) * (size_t)pos);
    }
    e->n_unc = pos;
    free(members);
    free(offs);
    free(slot);
    free(gid);
}

/* pop0 = the tokens whose first byte is in b0, from the first-byte bitsets (the smaller side:
 * the bytes in b0, or every token minus the bytes not in it) */
static void build_pop0(const fr_tokvocab *v, centry *e) {
    int nb = 0;
    for (int b = 0; b < 256; b++) nb += e->b0[b >> 3] >> (b & 7) & 1;
    if (nb == 0) return;
    size_t W = (size_t)v->words;
    e->pop0 = fr_xcalloc(W, sizeof(uint32_t));
    if (nb > 128) memcpy(e->pop0, v->normal, W * sizeof(uint32_t));
    for (int b = 0; b < 256; b++) {
        bool member = e->b0[b >> 3] >> (b & 7) & 1;
        const uint32_t *fb = v->first + (size_t)b * W;
        if (nb <= 128 && member)
            for (size_t w = 0; w < W; w++) e->pop0[w] |= fb[w];
        else if (nb > 128 && !member)
            for (size_t w = 0; w < W; w++) e->pop0[w] &= ~fb[w];
    }
}

static void entry_compute(fr_tokmask *m, const fr_gframe *f, centry *e) {
    const fr_tokvocab *v = m->v;
    if (!m->lv) {
        m->lv = fr_xmalloc(sizeof(fr_gstate) * (FR_TOKMASK_TRIE_DEPTH + 1));
        m->hit_lv = fr_xmalloc(sizeof(int16_t) * (FR_TOKMASK_TRIE_DEPTH + 1));
        m->multi_lv = fr_xmalloc(sizeof(bool) * (FR_TOKMASK_TRIE_DEPTH + 1));
    }
    if (!e->acc) e->acc = fr_xmalloc(sizeof(uint32_t) * (size_t)v->words);
    memset(e->acc, 0, sizeof(uint32_t) * (size_t)v->words);
    e->n_unc = 0;
    memset(e->b0, 0, sizeof e->b0);
    free(e->pop0);
    e->pop0 = NULL;
    walk_trie(m, &v->all, f, e);
    group_uncertain(m, e);
    build_pop0(v, e);
}

static centry *entry_get(fr_tokmask *m, const fr_gframe *f) {
    fr_gframe key = fr_gframe_key(m->g, f, m->v->max_chars);
    fr_maskcache *c = m->c;
    for (int i = 0; i < c->n; i++)
        if (!memcmp(&c->e[i].key, &key, sizeof key)) {
            m->hits++;
            return &c->e[i];
        }
    m->misses++;
    /* full: replace round robin (a caller holding an entry across a recursion looks it up again) */
    centry *e = c->n < FR_TOKMASK_CACHE ? &c->e[c->n++] : &c->e[c->victim++ % FR_TOKMASK_CACHE];
    e->key = key;
    entry_compute(m, f, e);
    return e;
}

fr_maskcache *fr_maskcache_new(void) {
    fr_maskcache *c = fr_xcalloc(1, sizeof *c);
    c->e = fr_xcalloc(FR_TOKMASK_CACHE, sizeof(centry));
    return c;
}

void fr_maskcache_free(fr_maskcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) entry_free(&c->e[i]);
    free(c->e);
    free(c);
}

/* do bytes s[0..l) pass from state `from` */
static bool bytes_ok(fr_tokmask *m, const fr_gstate *from, const char *s, size_t l) {
    const fr_gstate *cur = from;
    for (size_t i = 0; i < l; i++) {
        fr_gstate *dst = &m->tmp[i & 1];
        if (!fr_gstate_feed(m->g, cur, (uint8_t)s[i], dst)) return false;
        cur = dst;
    }
    return true;
}

/* does token id's whole byte string pass from state `from` */
static bool token_ok(fr_tokmask *m, const fr_gstate *from, int id) {
    size_t l;
    const char *s = fr_token_data(m->v->tok, id, &l);
    return s && l > 0 && bytes_ok(m, from, s, l);
}

static bool fits(int c, int min, int max) { return c >= min && (max < 0 || c <= max); }

/* The suffix groups of e that pop passes into mask (a group's members only when `str` is NULL
 * or their characters fit str = {n, min, max}). A group whose first byte pop refuses is skipped
 * without feeding the rest: one feed per distinct first byte. */
static void check_groups(fr_tokmask *m, const fr_gstate *pop, const centry *e, const int *str,
                         const int16_t *mem_ch, uint32_t *mask) {
    uint8_t first_ok[256]; /* 0 unknown, 1 refused, 2 taken */
    memset(first_ok, 0, sizeof first_ok);
    for (int g = 0; g < e->n_groups; g++) {
        size_t l;
        const char *b = fr_token_data(m->v->tok, e->g_tok[g], &l);
        const char *suf = b + e->g_off[g];
        uint8_t c = (uint8_t)suf[0];
        if (!first_ok[c]) first_ok[c] = fr_gstate_feed(m->g, pop, c, &m->tmp[0]) ? 2 : 1;
        if (first_ok[c] == 1 || !bytes_ok(m, pop, suf, l - (size_t)e->g_off[g])) continue;
        for (int i = e->g_first[g]; i < e->g_first[g] + e->g_n[g]; i++)
            if (!str || fits(str[0] + mem_ch[i], str[1], str[2])) bit_set(mask, e->unc[i]);
    }
}

/* s with its top frame popped, in this level's scratch */
static fr_gstate *popped(fr_tokmask *m, const fr_gstack *s, int lv) {
    if (!m->pop_lv) {
        m->pop_lv = fr_xmalloc(sizeof(fr_gstate) * (FR_GRAMMAR_MAX_FRAMES + 2));
        m->mask_lv = fr_xmalloc(sizeof(uint32_t) * (size_t)m->v->words * (FR_GRAMMAR_MAX_FRAMES + 2));
    }
    fr_gstate_pop_top(m->g, s, &m->pop_lv[lv]);
    return &m->pop_lv[lv];
}

/* the entry's tokens checked whole against stack s */
static void raw_check(fr_tokmask *m, const fr_gstack *s, const centry *e, uint32_t *mask) {
    if (!e->n_raw) return;
    fr_gstate start; /* token_ok uses m->tmp: the start state is kept apart */
    start.n = 1;
    start.hit_base = false;
    fr_gstack_copy(&start.s[0], s);
    for (int i = 0; i < e->n_raw; i++)
        if (!bit_get(mask, e->raw[i]) && token_ok(m, &start, e->raw[i])) bit_set(mask, e->raw[i]);
}

/* characters a string gains from bytes b[0..n) of its body (an escape counts once) */
static int str_chars(const char *b, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\\') {
            i += i + 1 < n && b[i + 1] == 'u' ? 5 : 1;
            c++;
        } else if (((uint8_t)b[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    return c;
}

/* where an unescaped '"' closes a string body in b[0..n), or -1 */
static int closing_quote(const char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\\') i += i + 1 < n && b[i + 1] == 'u' ? 5 : 1;
        else if (b[i] == '"') return (int)i;
    }
    return -1;
}


/* A frame inside a string body: the plain tokens that fit, the vocabulary's string-body
 * entry filtered by the frame's count and limits, its groups from the popped stack. */
static void string_stack(fr_tokmask *m, const fr_gstack *s, int n, int min, int max,
                         uint32_t *mask, int lv) {
    const fr_tokvocab *v = m->v;
    const strbody *sb = v->sb;
    int k = max < 0 ? PLAIN_K : FR_MIN(max - n, PLAIN_K);
    const uint32_t *pl = v->plain_le + (size_t)k * (size_t)v->words;
    for (int w = 0; w < v->words; w++) mask[w] |= pl[w];
    for (int i = 0; i < sb->n_in; i++)
        if (sb->in_close[i] ? fits(n + sb->in_ch[i], min, max) : max < 0 || n + sb->in_ch[i] <= max)
            bit_set(mask, sb->in_id[i]);
    const centry *e = &sb->e;
    int str[3] = {n, min, max};
    check_groups(m, popped(m, s, lv), e, str, sb->mem_ch, mask);
    raw_check(m, s, e, mask);
}

/* The mask of stack s ORed into mask; lv: recursion level (a complete frame's pop0 tokens take
 * the popped stack's mask, one level down). */
static void one_stack(fr_tokmask *m, const fr_gstack *s, uint32_t *mask, int lv) {
    if (s->len == 0 || lv > FR_GRAMMAR_MAX_FRAMES) return;
    int n, min, max;
    if (fr_gframe_string_body(m->g, &s->f[s->len - 1], &n, &min, &max)) {
        m->hits++;
        string_stack(m, s, n, min, max, mask, lv);
        return;
    }
    const centry *e = entry_get(m, &s->f[s->len - 1]);
    size_t W = (size_t)m->v->words;
    for (size_t w = 0; w < W; w++) mask[w] |= e->acc[w];
    fr_gstate *pop = popped(m, s, lv);
    check_groups(m, pop, e, NULL, NULL, mask); /* what follows the frame: once per suffix */
    if (e->pop0) { /* the frame ends before the token: the popped stack decides */
        uint32_t *pm = m->mask_lv + (size_t)lv * W;
        memset(pm, 0, W * sizeof(uint32_t));
        one_stack(m, &pop->s[0], pm, lv + 1);
        e = entry_get(m, &s->f[s->len - 1]); /* the recursion may have reused the scratch entry */
        for (size_t w = 0; w < W; w++) mask[w] |= pm[w] & e->pop0[w];
    }
    raw_check(m, s, e, mask);
}

/* The string-body entry (strbody above), from a string grammar's body frame walked over the
 * trie of non-plain tokens. */
static strbody *strbody_new(fr_tokvocab *v) {
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_text("{\"type\":\"string\"}", 17, &err);
    FR_ASSERT(g);
    fr_tokmask *m = fr_tokmask_new(v, g);
    fr_gstate st;
    int live = fr_gstate_feed(g, &m->st, '"', &st);
    FR_ASSERT(live == 1);
    fr_gframe f = st.s[0].f[st.s[0].len - 1];
    strbody *sb = fr_xcalloc(1, sizeof *sb);
    centry *e = &sb->e;
    e->acc = fr_xcalloc((size_t)v->words, sizeof(uint32_t));
    m->lv = fr_xmalloc(sizeof(fr_gstate) * (FR_TOKMASK_TRIE_DEPTH + 1));
    m->hit_lv = fr_xmalloc(sizeof(int16_t) * (FR_TOKMASK_TRIE_DEPTH + 1));
    m->multi_lv = fr_xmalloc(sizeof(bool) * (FR_TOKMASK_TRIE_DEPTH + 1));
    walk_trie(m, &v->rest, &f, e);
    sb->in_id = fr_xmalloc(sizeof(int32_t) * (size_t)(v->rest.n_nodes + 1));
    sb->in_ch = fr_xmalloc(sizeof(int16_t) * (size_t)(v->rest.n_nodes + 1));
    sb->in_close = fr_xmalloc((size_t)(v->rest.n_nodes + 1));
    for (int k = 0; k < v->rest.n_nodes; k++) {
        int id = v->rest.token[k];
        if (id < 0 || !bit_get(e->acc, id)) continue;
        size_t l;
        const char *b = fr_token_data(v->tok, id, &l);
        int close = closing_quote(b, l);
        sb->in_id[sb->n_in] = id;
        sb->in_close[sb->n_in] = close >= 0;
        sb->in_ch[sb->n_in++] = (int16_t)str_chars(b, close >= 0 ? (size_t)close : l);
    }
    group_uncertain(m, e);
    sb->mem_ch = fr_xmalloc(sizeof(int16_t) * (size_t)(e->n_unc + 1));
    for (int i = 0; i < e->n_unc; i++) {
        size_t l;
        const char *b = fr_token_data(v->tok, e->unc[i], &l);
        sb->mem_ch[i] = (int16_t)str_chars(b, (size_t)e->unc_off[i] - 1); /* before the '"' */
    }
    fr_tokmask_free(m);
    fr_grammar_free(g);
    return sb;
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
    for (int i = 0; i < m->st.n; i++) one_stack(m, &m->st.s[i], mask, 0);
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
