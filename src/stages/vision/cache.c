/* cache.c — the vision encoder cache (cache.h): a chained hash table over SHA-256 keys, a
 * doubly linked LRU list, one mutex, atomic reference counts on entries. */
#include "stages/vision/cache.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fr_vision_sha256(const void *data, size_t len, uint8_t out[32], fr_err *err) {
    unsigned int mdlen = 0;
    static const uint8_t none = 0;
    if (EVP_Digest(len ? data : &none, len, out, &mdlen, EVP_sha256(), NULL) != 1 ||
        mdlen != 32) {
        fr_err_setc(err, FR_ERR_INTERNAL, "vision cache: SHA-256 failed (libcrypto)");
        return -1;
    }
    return 0;
}

void fr_vision_digest_hex(const uint8_t digest[32], char out[65]) {
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hx[digest[i] >> 4];
        out[2 * i + 1] = hx[digest[i] & 15];
    }
    out[64] = 0;
}

int fr_vision_key_make(fr_vision_key *key, const void *bytes, size_t len, int64_t min_pixels,
                       int64_t max_pixels, fr_err *err) {
    if (!key || (!bytes && len) || min_pixels < 0 || max_pixels < min_pixels) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision cache: bad key arguments (min_pixels %lld, max_pixels %lld)",
                    (long long)min_pixels, (long long)max_pixels);
        return -1;
    }
    memset(key, 0, sizeof *key);
    if (fr_vision_sha256(bytes, len, key->digest, err) < 0) return -1;
    key->min_pixels = min_pixels;
    key->max_pixels = max_pixels;
    return 0;
}

/* One stored output; pub is first so that a public pointer converts back. */
typedef struct entry {
    fr_vision_entry pub;           /* what holders read */
    fr_vision_key key;             /* its key */
    atomic_long refs;              /* the cache's reference (while listed) + one per get */
    struct entry *prev, *next;     /* LRU list, most recent at the head */
    struct entry *hnext;           /* hash chain */
    size_t bytes;                  /* what it counts against the budget */
    float data[];                  /* (n, d), then the keep mask (n_all bytes) if any */
} entry;

struct fr_vision_cache {
    pthread_mutex_t mu;   /* guards everything below */
    entry **table;        /* hash buckets (a power of two) */
    size_t nbuckets;
    entry *head, *tail;   /* LRU: head most recent */
    size_t bytes, budget; /* held, allowed */
    fr_vision_cache_stats st; /* counters (entries, bytes, budget filled at snapshot) */
    int64_t entries;      /* entries listed */
};

static bool key_eq(const fr_vision_key *a, const fr_vision_key *b) {
    return !memcmp(a->digest, b->digest, 32) && a->min_pixels == b->min_pixels &&
           a->max_pixels == b->max_pixels;
}

static size_t key_hash(const fr_vision_key *k) {
    uint64_t h;
    memcpy(&h, k->digest, sizeof h); /* a SHA-256 prefix is already uniform */
    h ^= (uint64_t)k->min_pixels * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)k->max_pixels * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

fr_vision_cache *fr_vision_cache_new(size_t budget_bytes, fr_err *err) {
    if (budget_bytes < 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision cache: the budget is 0 bytes");
        return NULL;
    }
    fr_vision_cache *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->nbuckets = 64;
    c->table = calloc(c->nbuckets, sizeof *c->table);
    if (!c->table || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->table);
        free(c);
        goto oom;
    }
    c->budget = budget_bytes;
    return c;
oom:
    fr_err_setc(err, FR_ERR_INTERNAL, "vision cache: out of memory");
    return NULL;
}

static void entry_unref(entry *e) {
    if (atomic_fetch_sub(&e->refs, 1) == 1) free(e);
}

void fr_vision_entry_release(const fr_vision_entry *e) {
    if (e) entry_unref((entry *)(void *)e); /* pub is the first member */
}

static void lru_unlink(fr_vision_cache *c, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else c->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(fr_vision_cache *c, entry *e) {
    e->prev = NULL;
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

static entry **chain_slot(fr_vision_cache *c, const fr_vision_key *k) {
    entry **p = &c->table[key_hash(k) & (c->nbuckets - 1)];
    while (*p && !key_eq(&(*p)->key, k)) p = &(*p)->hnext;
    return p;
}

/* Unlists e (table and LRU) and drops the cache's reference. Caller holds the lock. */
static void drop(fr_vision_cache *c, entry *e) {
    entry **p = chain_slot(c, &e->key);
    FR_ASSERT(*p == e);
    *p = e->hnext;
    lru_unlink(c, e);
    c->bytes -= e->bytes;
    c->entries--;
    entry_unref(e);
}

/* Doubles the table when it holds more entries than buckets (best effort: on no memory the
 * chains just grow longer). Caller holds the lock. */
static void maybe_grow(fr_vision_cache *c) {
    if ((size_t)c->entries < c->nbuckets) return;
    size_t nb = c->nbuckets * 2;
    entry **t = calloc(nb, sizeof *t);
    if (!t) return;
    for (size_t b = 0; b < c->nbuckets; b++)
        for (entry *e = c->table[b], *nx; e; e = nx) {
            nx = e->hnext;
            entry **slot = &t[key_hash(&e->key) & (nb - 1)];
            e->hnext = *slot;
            *slot = e;
        }
    free(c->table);
    c->table = t;
    c->nbuckets = nb;
}

void fr_vision_cache_free(fr_vision_cache *c) {
    if (!c) return;
    while (c->head) drop(c, c->head);
    pthread_mutex_destroy(&c->mu);
    free(c->table);
    free(c);
}

const fr_vision_entry *fr_vision_cache_get(fr_vision_cache *c, const fr_vision_key *key) {
    if (!c || !key) return NULL;
    pthread_mutex_lock(&c->mu);
    entry *e = *chain_slot(c, key);
    if (e) {
        atomic_fetch_add(&e->refs, 1);
        lru_unlink(c, e);
        lru_push_front(c, e);
        c->st.hits++;
    } else {
        c->st.misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e ? &e->pub : NULL;
}

int fr_vision_cache_put(fr_vision_cache *c, const fr_vision_key *key, const float *feat,
                        int64_t n, int d, const int grid_thw[3], fr_err *err) {
    return fr_vision_cache_put_kept(c, key, feat, n, d, grid_thw, NULL, n, err);
}

int fr_vision_cache_put_kept(fr_vision_cache *c, const fr_vision_key *key, const float *feat,
                             int64_t n, int d, const int grid_thw[3], const uint8_t *keep,
                             int64_t n_all, fr_err *err) {
    int64_t n_keep = n_all;
    if (keep && n_all >= 1) {
        n_keep = 0;
        for (int64_t u = 0; u < n_all; u++) n_keep += keep[u] != 0;
    }
    if (!c || !key || !feat || !grid_thw || n < 1 || d < 1 || grid_thw[0] < 1 ||
        grid_thw[1] < 1 || grid_thw[2] < 1 || n_all < n || n_keep != n ||
        (uint64_t)n_all > SIZE_MAX / 4) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision cache: bad entry (n %lld, d %d)",
                    (long long)n, d);
        return -1;
    }
    if ((uint64_t)n > (SIZE_MAX - sizeof(entry)) / sizeof(float) / (uint64_t)d) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision cache: entry of %lld x %d is too large",
                    (long long)n, d);
        return -1;
    }
    size_t fbytes = (size_t)n * (size_t)d * sizeof(float), mbytes = keep ? (size_t)n_all : 0;
    if (fbytes > SIZE_MAX - sizeof(entry) - mbytes) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision cache: entry of %lld x %d is too large",
                    (long long)n, d);
        return -1;
    }
    size_t bytes = sizeof(entry) + fbytes + mbytes;
    pthread_mutex_lock(&c->mu);
    entry *old = *chain_slot(c, key);
    if (old || bytes > c->budget) {
        if (old) {
            lru_unlink(c, old);
            lru_push_front(c, old);
        } else {
            c->st.rejected++;
        }
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    pthread_mutex_unlock(&c->mu);

    /* copy outside the lock (megabytes); another thread may store the same key meanwhile */
    entry *e = malloc(bytes);
    if (!e) {
        fr_err_setc(err, FR_ERR_INTERNAL, "vision cache: out of memory for %zu bytes", bytes);
        return -1;
    }
    memset(e, 0, sizeof *e);
    memcpy(e->data, feat, fbytes);
    e->pub.feat = e->data;
    e->pub.n = n;
    e->pub.n_all = n_all;
    if (keep) {
        uint8_t *mask = (uint8_t *)e->data + fbytes;
        for (int64_t u = 0; u < n_all; u++) mask[u] = keep[u] != 0;
        e->pub.keep = mask;
    }
    e->pub.d = d;
    memcpy(e->pub.grid_thw, grid_thw, sizeof e->pub.grid_thw);
    e->key = *key;
    e->bytes = bytes;
    atomic_init(&e->refs, 1);

    pthread_mutex_lock(&c->mu);
    entry **slot = chain_slot(c, key);
    if (*slot) { /* stored by another thread while we copied */
        lru_unlink(c, *slot);
        lru_push_front(c, *slot);
        pthread_mutex_unlock(&c->mu);
        free(e);
        return 0;
    }
    while (c->bytes + bytes > c->budget) {
        FR_ASSERT(c->tail);
        drop(c, c->tail);
        c->st.evictions++;
    }
    slot = chain_slot(c, key); /* the chains changed */
    e->hnext = *slot;
    *slot = e;
    lru_push_front(c, e);
    c->bytes += bytes;
    c->entries++;
    c->st.inserts++;
    maybe_grow(c);
    pthread_mutex_unlock(&c->mu);
    return 1;
}

void fr_vision_cache_stats_get(fr_vision_cache *c, fr_vision_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    out->entries = c->entries;
    out->bytes = c->bytes;
    out->budget = c->budget;
    pthread_mutex_unlock(&c->mu);
}
