/* kv.c — the paged KV pool: one allocation of n_blocks blocks for K and one for V, a stack of free
 * block ids, per-sequence block tables (fr_seq), and the optional prefix cache.
 *
 * Storage layout (see kv.h): k, v are (n_blocks, n_layer, block_size, n_head_kv*head_dim)
 * floats, so one block holds all layers of block_size consecutive positions of one sequence.
 * Blocks are handed out lowest id first. A sequence's table grows on reserve and is freed on
 * release, so fr_seq_release is the only clean-up a sequence needs.
 *
 * Prefix cache (kv.h): per block a holder count, and for a published block its key and token
 * ids; an open-addressing table (linear probing, power-of-two size >= 2 x blocks, deletion by
 * backward shift) maps a hash to its block; cached blocks nobody holds sit in a doubly linked LRU
 * list (head = released longest ago = evicted first). A sequence's blocks are released last block
 * first, so of one released prefix the deepest blocks are evicted before the shared root ones.
 * Every operation is O(1) per block (the table stays at most half full).
 */
#include "backend/kv.h"

#include <stdlib.h>
#include <string.h>

struct fr_kv_prefix {
    int n;                   /* pool blocks: ids 0..n-1 */
    int bs;                  /* tokens per block */
    int *ref;                /* (n) sequences holding each block */
    uint8_t *cached;         /* (n) 1 = published in the table */
    fr_kv_block_key *key;    /* (n) key of a published block */
    int32_t *tok;            /* (n, bs) token ids of a published block */
    int *prev, *next;        /* (n) LRU links of unheld cached blocks; -1 ends */
    int head, tail;          /* LRU: oldest, newest (-1 when empty) */
    int n_lru;               /* blocks on the LRU list */
    int *slot;               /* (cap) hash table: block id, or -1 = empty */
    int cap;                 /* table size, a power of two */
    int n_cached;            /* published blocks */
    uint64_t evictions;      /* published blocks taken back for new content */
};

static size_t block_floats(const fr_hparams *hp, int block_size) {
    return (size_t)hp->n_layer * (size_t)block_size * (size_t)hp->n_head_kv * (size_t)hp->head_dim;
}

fr_kv_pool *fr_kv_pool_new(const fr_hparams *hp, int n_blocks, int block_size) {
    if (n_blocks < 1 || block_size < 1 || hp->n_layer < 1 || hp->n_head_kv < 1 || hp->head_dim < 1)
        return NULL;
    size_t bf = block_floats(hp, block_size);
    if ((size_t)n_blocks > SIZE_MAX / sizeof(float) / bf) return NULL;
    fr_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    p->n_layer = hp->n_layer;
    p->n_head_kv = hp->n_head_kv;
    p->head_dim = hp->head_dim;
    p->block_bytes = 2 * bf * sizeof(float);
    p->k = calloc((size_t)n_blocks * bf, sizeof(float));
    p->v = calloc((size_t)n_blocks * bf, sizeof(float));
    p->free_ids = malloc((size_t)n_blocks * sizeof(int));
    if (!p->k || !p->v || !p->free_ids) {
        fr_kv_pool_free(p);
        return NULL;
    }
    for (int i = 0; i < n_blocks; i++) p->free_ids[i] = n_blocks - 1 - i; /* pop gives 0, 1, ... */
    p->n_free = n_blocks;
    return p;
}

int fr_kv_pool_blocks_for_bytes(const fr_hparams *hp, int block_size, size_t bytes) {
    if (block_size < 1) return 0;
    size_t bb = 2 * block_floats(hp, block_size) * sizeof(float);
    if (bb == 0) return 0;
    size_t n = bytes / bb;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

void fr_kv_pool_free(fr_kv_pool *p) {
    if (!p) return;
    fr_kv_prefix_disable(p);
    free(p->k);
    free(p->v);
    free(p->free_ids);
    free(p);
}

/* ---- the prefix cache's lists and table ---- */

static void lru_unlink(struct fr_kv_prefix *c, int b) {
    if (c->prev[b] >= 0) c->next[c->prev[b]] = c->next[b];
    else c->head = c->next[b];
    if (c->next[b] >= 0) c->prev[c->next[b]] = c->prev[b];
    else c->tail = c->prev[b];
    c->prev[b] = c->next[b] = -1;
    c->n_lru--;
}

static void lru_push(struct fr_kv_prefix *c, int b) {
    c->prev[b] = c->tail;
    c->next[b] = -1;
    if (c->tail >= 0) c->next[c->tail] = b;
    else c->head = b;
    c->tail = b;
    c->n_lru++;
}

static size_t home(const struct fr_kv_prefix *c, uint64_t h) {
    return (size_t)(h ^ (h >> 29)) & (size_t)(c->cap - 1);
}

/* The table slot holding block b (published), found by probing from its hash's home. */
static size_t slot_of(const struct fr_kv_prefix *c, int b) {
    size_t mask = (size_t)c->cap - 1;
    for (size_t i = home(c, c->key[b].hash), k = 0; k < (size_t)c->cap; i = (i + 1) & mask, k++)
        if (c->slot[i] == b) return i;
    fr_panic(__FILE__, __LINE__, "prefix cache: published block %d not in the table", b);
}

/* The published block with hash h, or -1. */
static int find(const struct fr_kv_prefix *c, uint64_t h) {
    size_t mask = (size_t)c->cap - 1;
    for (size_t i = home(c, h); c->slot[i] >= 0; i = (i + 1) & mask)
        if (c->key[c->slot[i]].hash == h) return c->slot[i];
    return -1;
}

/* Unpublish b: remove it from the table, closing the gap by backward shift. */
static void unpublish(struct fr_kv_prefix *c, int b) {
    size_t mask = (size_t)c->cap - 1;
    size_t i = slot_of(c, b);
    c->slot[i] = -1;
    for (size_t j = (i + 1) & mask; c->slot[j] >= 0; j = (j + 1) & mask) {
        size_t k = home(c, c->key[c->slot[j]].hash);
        /* the entry at j may move to the hole at i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        c->slot[i] = c->slot[j];
        c->slot[j] = -1;
        i = j;
    }
    c->cached[b] = 0;
    c->n_cached--;
}

/* One block for a reservation: a free one, else the least recently released cached one. */
static int take_block(fr_kv_pool *p) {
    struct fr_kv_prefix *c = p->prefix;
    int b;
    if (p->n_free > 0) {
        b = p->free_ids[--p->n_free];
    } else {
        FR_ASSERT(c && c->head >= 0);
        b = c->head;
        lru_unlink(c, b);
        unpublish(c, b);
        c->evictions++;
    }
    if (c) c->ref[b] = 1;
    return b;
}

static void give_block(fr_kv_pool *p, int b) {
    struct fr_kv_prefix *c = p->prefix;
    if (c) {
        FR_ASSERT(c->ref[b] > 0);
        if (--c->ref[b] > 0) return; /* another sequence still holds it */
        if (c->cached[b]) {
            lru_push(c, b);
            return;
        }
    }
    FR_ASSERT(p->n_free < p->n_blocks);
    p->free_ids[p->n_free++] = b;
}

/* ---- sequences ---- */

static void table_grow(fr_seq *s, int n_blocks) {
    if (n_blocks <= s->cap_blocks) return;
    int cap = s->cap_blocks ? s->cap_blocks : 8;
    while (cap < n_blocks) cap *= 2;
    s->blocks = fr_xrealloc(s->blocks, (size_t)cap * sizeof(int));
    s->cap_blocks = cap;
}

int fr_seq_reserve(fr_seq *s, fr_kv_pool *p, int n_pos_total) {
    int need = fr_kv_blocks_needed(p, n_pos_total) - s->n_blocks;
    if (need <= 0) return 0;
    if (need > fr_kv_pool_available(p)) return -1;
    table_grow(s, s->n_blocks + need);
    for (int i = 0; i < need; i++) s->blocks[s->n_blocks++] = take_block(p);
    return 0;
}

void fr_seq_release(fr_seq *s, fr_kv_pool *p) {
    for (int i = s->n_blocks - 1; i >= 0; i--) give_block(p, s->blocks[i]);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

/* ---- hashing ---- */

/* A 64-bit finaliser (xor-shift-multiply rounds); every input bit reaches every output bit. */
static uint64_t avalanche(uint64_t x) {
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

uint64_t fr_kv_hash_mix(uint64_t h, uint64_t v) {
    return avalanche(h ^ avalanche(v + 0x9e3779b97f4a7c15ull));
}

uint64_t fr_kv_hash_bytes(const void *data, size_t n) {
    const unsigned char *b = data;
    uint64_t h = fr_kv_hash_mix(0x243f6a8885a308d3ull, (uint64_t)n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = fr_kv_hash_mix(h, w);
    }
    uint64_t w = 0;
    if (i < n) memcpy(&w, b + i, n - i);
    return fr_kv_hash_mix(h, w ^ ((uint64_t)(n - i) << 56));
}

uint64_t fr_kv_chain_root(uint64_t salt) { return fr_kv_hash_mix(0x13198a2e03707344ull, salt); }

uint64_t fr_kv_block_hash(uint64_t parent, const int32_t *tokens, int n, uint64_t extra) {
    uint64_t h = fr_kv_hash_mix(parent, (uint64_t)(uint32_t)n);
    int i = 0;
    for (; i + 2 <= n; i += 2) /* two ids a round */
        h = fr_kv_hash_mix(h, (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32);
    if (i < n) h = fr_kv_hash_mix(h, (uint64_t)(uint32_t)tokens[i]);
    return fr_kv_hash_mix(h, extra);
}

/* ---- the prefix cache ---- */

int fr_kv_prefix_enable(fr_kv_pool *p) {
    if (p->prefix) return 0;
    struct fr_kv_prefix *c = calloc(1, sizeof *c);
    if (!c) return -1;
    int n = p->n_blocks;
    c->n = n;
    c->bs = p->block_size;
    c->cap = 16;
    while (c->cap < 2 * n && c->cap < (1 << 30)) c->cap *= 2;
    c->ref = calloc((size_t)n, sizeof(int));
    c->cached = calloc((size_t)n, 1);
    c->key = calloc((size_t)n, sizeof(fr_kv_block_key));
    c->tok = malloc((size_t)n * (size_t)c->bs * sizeof(int32_t));
    c->prev = malloc((size_t)n * sizeof(int));
    c->next = malloc((size_t)n * sizeof(int));
    c->slot = malloc((size_t)c->cap * sizeof(int));
    if (!c->ref || !c->cached || !c->key || !c->tok || !c->prev || !c->next || !c->slot) {
        free(c->ref), free(c->cached), free(c->key), free(c->tok), free(c->prev), free(c->next);
        free(c->slot), free(c);
        return -1;
    }
    for (int i = 0; i < n; i++) c->prev[i] = c->next[i] = -1;
    for (int i = 0; i < c->cap; i++) c->slot[i] = -1;
    c->head = c->tail = -1;
    p->prefix = c;
    return 0;
}

void fr_kv_prefix_disable(fr_kv_pool *p) {
    struct fr_kv_prefix *c = p->prefix;
    if (!c) return;
    /* unheld cached blocks go back to the free stack (oldest first, as released) */
    while (c->head >= 0) {
        int b = c->head;
        lru_unlink(c, b);
        FR_ASSERT(p->n_free < p->n_blocks);
        p->free_ids[p->n_free++] = b;
    }
    free(c->ref), free(c->cached), free(c->key), free(c->tok), free(c->prev), free(c->next);
    free(c->slot), free(c);
    p->prefix = NULL;
}

int fr_kv_pool_available(const fr_kv_pool *p) {
    return p->n_free + (p->prefix ? p->prefix->n_lru : 0);
}

int fr_kv_prefix_match(const fr_kv_pool *p, const fr_kv_block_key *keys, const int32_t *tokens,
                       int n, int *ids) {
    const struct fr_kv_prefix *c = p->prefix;
    if (!c) return 0;
    int k = 0;
    for (; k < n; k++) {
        int b = find(c, keys[k].hash);
        if (b < 0) break;
        const fr_kv_block_key *got = &c->key[b];
        if (got->parent != keys[k].parent || got->extra != keys[k].extra ||
            memcmp(c->tok + (size_t)b * (size_t)c->bs, tokens + (size_t)k * (size_t)c->bs,
                   (size_t)c->bs * sizeof(int32_t)))
            break; /* a 64-bit collision: never share what differs */
        ids[k] = b;
    }
    return k;
}

int fr_kv_prefix_unheld(const fr_kv_pool *p, const int *ids, int n) {
    const struct fr_kv_prefix *c = p->prefix;
    int k = 0;
    for (int i = 0; c && i < n; i++) k += c->ref[ids[i]] == 0;
    return k;
}

void fr_seq_share(fr_seq *s, fr_kv_pool *p, const int *ids, int n) {
    struct fr_kv_prefix *c = p->prefix;
    FR_ASSERT(c && s->n_blocks == 0 && s->n_pos == 0);
    table_grow(s, n);
    for (int i = 0; i < n; i++) {
        int b = ids[i];
        FR_ASSERT(b >= 0 && b < c->n && c->cached[b]);
        if (c->ref[b] == 0) lru_unlink(c, b);
        c->ref[b]++;
        s->blocks[i] = b;
    }
    s->n_blocks = n;
    s->n_pos = n * p->block_size;
}

bool fr_kv_prefix_publish(fr_kv_pool *p, const fr_seq *s, int i, const fr_kv_block_key *key,
                          const int32_t *tokens) {
    struct fr_kv_prefix *c = p->prefix;
    if (!c || i < 0 || i >= s->n_blocks || (i + 1) * p->block_size > s->n_pos) return false;
    int b = s->blocks[i];
    if (c->cached[b] || find(c, key->hash) >= 0) return false;
    c->key[b] = *key;
    memcpy(c->tok + (size_t)b * (size_t)c->bs, tokens, (size_t)c->bs * sizeof(int32_t));
    size_t mask = (size_t)c->cap - 1, j = home(c, key->hash);
    while (c->slot[j] >= 0) j = (j + 1) & mask;
    c->slot[j] = b;
    c->cached[b] = 1;
    c->n_cached++;
    return true;
}

int fr_seq_sole_blocks(const fr_seq *s, const fr_kv_pool *p) {
    const struct fr_kv_prefix *c = p->prefix;
    if (!c) return s->n_blocks;
    int k = 0;
    for (int i = 0; i < s->n_blocks; i++) k += c->ref[s->blocks[i]] == 1;
    return k;
}

void fr_kv_prefix_stats_get(const fr_kv_pool *p, fr_kv_prefix_stats *st) {
    memset(st, 0, sizeof *st);
    const struct fr_kv_prefix *c = p->prefix;
    if (!c) return;
    st->cached = c->n_cached;
    st->evictable = c->n_lru;
    st->evictions = c->evictions;
}
